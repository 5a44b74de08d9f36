"""The metrics table: every per-step metric defined once (name, unit, meaning, section).

The trainer writes metrics under these names (`RunDir.write_metrics` rejects others), the TUI
reads them, and docs/metrics.md is generated from this table (`python -m
ragen_cli.monitor.metrics_doc`). A name may contain one placeholder, `<env>` standing for an
environment name (`val/<env>/success` covers `val/bandit/success`) or `<fn>` for a reward
function's name (`reward/fn/<fn>`).

Every line of metrics.jsonl also carries `step` (int) and `time` (Unix seconds): see
`RESERVED_KEYS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RESERVED_KEYS = ("step", "time")
ENV_PLACEHOLDER = "<env>"
FN_PLACEHOLDER = "<fn>"  # a reward function's name (envs/adapters/dataset_env.py) or a tool's
PLACEHOLDERS = (ENV_PLACEHOLDER, FN_PLACEHOLDER)
_ENV_NAME = r"[A-Za-z0-9_.:\-]+"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    meaning: str
    section: str

    @property
    def is_pattern(self) -> bool:
        return any(p in self.name for p in PLACEHOLDERS)


SECTIONS = {
    "reward": "Reward (episode return, all trajectories of the step, before filtering)",
    "train": "Training-env outcomes",
    "val": "Validation (fixed seeds, per env)",
    "filter": "StarPO-S filter (in-group reward std)",
    "actor": "Actor update",
    "critic": "Critic update",
    "episode": "Episode shape and action quality",
    "agent": "Agent envs (your own agent program on ragen's endpoint; rollout/agent_driver.py)",
    "judge": "Judge rewards (a model scores the answer against a rubric; envs/judge.py)",
    "diversity": "Response diversity (Echo Trap signals)",
    "collapse": "Template collapse (RAGEN-2): do replies depend on the initial state? (monitor/collapse.py)",
    "timing": "Timing",
    "perf": "Throughput",
    "sync": "Weight sync",
    "warm": "Warm start (supervised fine-tuning on demonstrations before RL; RUN_DIR/warm_start/metrics.jsonl)",
}

# (name, unit, meaning); the section is the part of the name before the first slash.
_TABLE: list[tuple[str, str, str]] = [
    ("reward/mean", "reward", "Mean episode reward over the step's trajectories."),
    ("reward/std", "reward", "Std of episode rewards over the step's trajectories (population std)."),
    ("reward/min", "reward", "Lowest episode reward of the step."),
    ("reward/max", "reward", "Highest episode reward of the step."),
    ("reward/task_mean", "reward", "Mean task reward: the env's own reward, without format penalty or progress shaping."),
    ("reward/task_in_group_std", "reward", "Mean over groups of the std of a group's N task rewards (unshaped, before the filter)."),
    ("train/success", "fraction", "Share of training episodes that ended in success."),
    ("train/episodes", "count", "Training episodes behind train/success this step (P x N, over all processes): its sample size."),
    ("train/groups", "count", "Groups (initial states, P) behind train/success this step, over all processes: its number of independent draws where each group's rollouts all agree."),
    ("train/chose_high_ev", "fraction", "Share of training episodes whose env reported `chose_high_ev` (Bandit: picked the higher-expected-value arm); absent for envs that do not report it."),
    ("reward/fn/<fn>", "reward", "Mean over the step's episodes of reward function `<fn>` (a dataset task's `module:function`, named by its function part); episodes where it returned None are left out."),
    ("val/<env>/success", "fraction", "Share of validation episodes of env `<env>` that ended in success."),
    ("val/<env>/reward", "reward", "Mean validation episode reward on env `<env>`."),
    ("val/<env>/chose_high_ev", "fraction", "Validation share of episodes on env `<env>` that reported `chose_high_ev`."),
    ("filter/in_group_std_before", "reward", "Mean over groups of the std of a group's N episode rewards (the reward the filter ranks by: algorithm.filter.reward, task by default), before the StarPO-S filter."),
    ("filter/in_group_std_after", "reward", "The same mean over the groups the filter kept."),
    ("filter/zero_std_frac", "fraction", "Share of groups whose N rewards (the filter's reward) are all equal (no learning signal)."),
    ("filter/kept_frac", "fraction", "Share of groups kept by the filter (keep_ratio after rounding with top_k; varies with top_p, min_p or include_zero false)."),
    ("filter/empty_steps", "steps", "Consecutive steps, up to this one, in which the filter kept no group and no update was made (algorithm.filter.empty_stop_steps stops the run)."),
    ("actor/entropy", "nats", "Mean token entropy of the policy over sampled (loss-mask) tokens."),
    ("actor/answer_entropy", "nats", "Mean token entropy over the answer tokens alone (after </think>; all reply tokens with thinking off, end-of-turn token excluded), kept trajectories."),
    ("actor/grad_norm", "norm", "Actor gradient L2 norm before clipping, averaged over the step's optimizer steps."),
    ("actor/clip_frac_low", "fraction", "Share of loss-mask tokens clipped at the lower bound (negative advantage, ratio < 1 - clip_low)."),
    ("actor/clip_frac_high", "fraction", "Share of loss-mask tokens clipped at the upper bound (positive advantage, ratio > 1 + clip_high)."),
    ("actor/approx_kl", "nats", "Approximate KL between the sampling policy and the updated policy (k3 estimator)."),
    ("actor/kl_ref", "nats", "KL of the policy to the reference model (the spec's estimator); absent when kl_coef is 0."),
    ("actor/is_truncated_frac", "fraction", "Share of loss-mask tokens whose rollout importance weight pi_old / pi_sampler (at algorithm.rollout_is_level: a sequence level counts each token of a reply whose weight was) exceeded algorithm.rollout_is_cap and was truncated; absent when the correction is off or in mask mode."),
    ("actor/is_masked_frac", "fraction", "Mask mode (IcePop): share of loss-mask tokens whose rollout importance weight lay outside [rollout_is_lower, rollout_is_cap] and was set to 0 (at a sequence level, the tokens of whole replies); absent when the correction is off or in truncate mode."),
    ("actor/is_weight_mean", "weight", "Mean rollout importance weight applied to the policy loss (after truncation or masking) over loss-mask tokens; absent when the correction is off."),
    ("actor/is_ess", "fraction", "Normalised effective sample size of the applied rollout importance weights, (sum w)^2 / (n sum w^2): over loss-mask tokens at rollout_is_level token, over replies at sequence and geometric; masked weights count as 0. 1 when all weights are equal, 1/n when one carries them all; each process's rows, averaged over processes. Absent when the correction is off."),
    ("actor/policy_loss", "loss", "PPO clipped surrogate loss (the aggregated value that was minimised, without bonuses)."),
    ("actor/lr", "lr", "Actor learning rate of the step's last optimizer step (schedule x health-intervention scale)."),
    ("critic/value_loss", "loss", "Critic (value-clipped) squared-error loss; absent without a critic."),
    ("critic/grad_norm", "norm", "Critic gradient L2 norm before clipping; absent without a critic."),
    ("critic/explained_var", "1", "Explained variance of returns by values, 1 - Var(returns - values) / Var(returns)."),
    ("critic/lr", "lr", "Critic learning rate of the step's last optimizer step; absent without a critic."),
    ("episode/response_tokens_per_turn", "tokens", "Mean tokens the model generated per turn."),
    ("episode/turns", "turns", "Mean model turns per episode."),
    ("episode/actions", "actions", "Mean actions executed per episode."),
    ("episode/valid_action_ratio", "fraction", "Share of executed actions the env accepted as valid."),
    ("episode/example_frac", "fraction", "Share of the step's groups whose prompts showed the answer example (1 unless rollout.answer_example_steps fades it)."),
    ("episode/effective_action_ratio", "fraction", "Share of executed actions that changed the env state."),
    ("episode/example_copy_ratio", "fraction", "Share of the turns that showed an answer example whose actions are that example (copying it; RAGEN-2's template collapse when the example, not the state, picks the reply). Absent when no example is shown."),
    ("episode/format_error_ratio", "fraction", "Share of turns whose reply did not parse (format penalty applied)."),
    ("episode/truncated", "count", "Episodes truncated by the context length or the turn/action budget."),
    ("episode/tool_calls", "calls", "Mean tool calls run per episode of a tool env (envs/adapters/tools_env.py; docs/tools.md); absent for other envs."),
    ("episode/invalid_call_ratio", "fraction", "Share of a tool env's attempted calls that were invalid (malformed, an unknown tool, arguments that do not fit its schema): not run, format penalty."),
    ("episode/tool_error_ratio", "fraction", "Share of a tool env's calls run that failed: the tool raised, ran past timeout_s, or its MCP server marked the result an error."),
    ("episode/tool_calls/<fn>", "calls", "Mean calls of tool `<fn>` per episode of a tool env."),
    ("agent/failed_ratio", "fraction", "Share of an agent env's episodes that failed: the agent program raised, ran past timeout_s, made no request or returned neither a number nor None (rollout/agent_driver.py); nothing of them is trained. Absent for other envs."),
    ("agent/requests", "requests", "Mean model requests per episode of an agent env."),
    ("judge/failed_ratio", "fraction", "Share of the step's judged episodes whose judge gave no score: a reply without a number, an HTTP error, a timeout (envs/judge.py); those episodes get no judge reward. Absent without a judge."),
    ("agent/new_row_ratio", "fraction", "Share of an agent env's requests that did not continue their episode's token list (an edited history): each starts a row of its own (rollout/endpoint.py)."),
    ("diversity/distinct_2", "fraction", "Distinct bigrams / all bigrams over the step's replies (1 = no repetition)."),
    ("diversity/identical_share", "fraction", "Share of replies whose text equals another reply of the step."),
    ("collapse/mi", "nats", "I(X;Z): mean over sampled first-turn replies of log p(z|own state) - log p_mix(z), per token; 0 when replies ignore the state."),
    ("collapse/mi_norm", "fraction", "I(X;Z) / H(X): the share of the initial states' entropy that the replies carry (1 = each state's replies identify it)."),
    ("collapse/cond_entropy", "nats", "H(Z|X): minus the mean per-token log-prob of a reply under its own state's prompt."),
    ("collapse/retrieval_acc", "fraction", "Share of sampled replies that score highest under their own state's prompt (ties shared)."),
    ("collapse/retrieval_chance", "fraction", "Retrieval accuracy of a guess drawn from the states' empirical distribution (sum of squared shares)."),
    ("collapse/prompts", "count", "Distinct initial-state prompts the replies were scored under."),
    ("timing/rollout_s", "s", "Wall time of the rollout stage; with rollout.max_staleness, of the rollout of this step's batch, which ran during the last step's update."),
    ("timing/overlap_s", "s", "With rollout.max_staleness: seconds the engine rolled out the next step's batch while the trainer scored and updated (train/ahead.py)."),
    ("timing/ahead_wait_s", "s", "With rollout.max_staleness: seconds the trainer waited after its update for the engine to finish the next step's batch."),
    ("timing/old_scores_s", "s", "Wall time of scoring the kept batch before the update: old log-probs (skipped for a single-pass update), critic values, reference log-probs."),
    ("timing/update_s", "s", "Wall time of the update proper: the actor's (and critic's) forwards, backwards and optimizer steps."),
    ("timing/parity_s", "s", "Wall time of the weight-sync parity probe: its rows scored by trainer and engine before the update and again after the sync."),
    ("timing/sync_s", "s", "Wall time of pushing new weights to the rollout engine."),
    ("timing/val_s", "s", "Wall time of validation in this step; absent on steps without validation."),
    ("timing/collapse_s", "s", "Wall time of the template-collapse cross-scoring (part of the step)."),
    ("timing/step_s", "s", "Wall time of the whole step."),
    ("timing/warm_step_s", "s", "Wall time of one warm-start optimizer step."),
    ("warm/loss", "nats/token", "Warm start: mean negative log-likelihood of the demonstrated reply tokens of the step (before its update)."),
    ("warm/token_accuracy", "fraction", "Warm start: share of demonstrated reply tokens that are the model's most likely token (before the update)."),
    ("warm/grad_norm", "norm", "Warm start: gradient norm of the step (before clipping)."),
    ("warm/lr", "lr", "Warm start: the learning rate of the step (warm_start.lr)."),
    ("warm/tokens", "tokens", "Warm start: trained (reply) tokens in this process's rows of the step."),
    ("warm/rows", "rows", "Warm start: demonstration rows of the current round (one per demonstration, or per turn with per-turn rows)."),
    ("warm/round", "index", "Warm start: the rejection-sampling round (0 for a file or a scripted policy)."),
    ("perf/rollout_tokens_per_s", "tokens/s", "Generated tokens per second during rollouts."),
    ("perf/rollout_tokens", "tokens", "Tokens a rollout engine with a prefix cache runs for the step's trajectories: every distinct token prefix once (a shared prompt once)."),
    ("perf/update_tokens", "tokens", "Tokens the update's forwards ran, over all its passes: each group's shared prompt once with train.share_prefix, then every row's own tokens."),
    ("perf/update_tokens_per_s", "tokens/s", "Tokens (prompt and reply) processed per second by the update."),
    ("sync/parity_gap", "nats", "Root-mean-square log-prob gap between trainer and rollout engine on the probe's tokens after a sync (rollout/parity.py)."),
    ("sync/parity_noise", "nats", "The same gap before the update, when both hold the same weights: the kernels' own disagreement at this precision."),
    ("sync/parity_noise_after", "nats", "The noise expected after the update: sync/parity_noise scaled by how much less sure the new weights are of the probe's tokens, rms(1 - p) new over old, never below the largest sync/parity_noise of the last 5 steps and never above 8 x sync/parity_noise_ref (rollout/parity.py); the size check allows parity_noise_factor times it."),
    ("sync/parity_noise_ref", "nats", "The run's first sync's sync/parity_noise, measured before any sync could leave the engine wrong, carried in every sync's record: the expected noise never exceeds 8 times it, so an engine drifting a little more at each sync cannot raise its own bound (rollout/parity.py)."),
    ("sync/parity_moved", "nats", "Root-mean-square change of the probe tokens' log-probs made by the update (trainer, before vs after)."),
    ("sync/update_kept", "fraction", "Share of the trainer's update since the last sync that the engine's weights carry (train/sync.py). Full weights: the share of the elements of the parameters the update moved that the engine holds at their new values, read back inside the engine's workers (rollout/weight_sums.py). LoRA: <engine change, trainer change> / |trainer change|^2 over every adapted layer (embeddings included), with the engine's change from the merged weights it was handed (and verified to hold) or the adapter file it loaded. 1.0 = all of it. Absent when the weights did not move or the HF backend samples with the trainer's module."),
    ("sync/update_error", "fraction", "LoRA: |engine change - trainer change| / |trainer change| over the same weights: 0.0 = exact; a bf16 merge of a small LoRA update gives about 1. Absent with full weights, whose engine either holds a moved parameter exactly or stops the run."),
    ("sync/engine_held", "fraction", "Share of the pushed weights' elements that the rollout engine holds, read back inside its workers after every push: the sums of each parameter its load_weights loaded against the pushed tensors' (full weights, merged LoRA), or of the A and scaled B in the new adapter's LoRA slot against the adapter file's (adapter sync) (rollout/weight_sums.py). Below 1 the run saves and stops, naming the weights. Absent with the HF backend."),
    ("sync/parity_lag", "fraction", "How far back toward the weights from before the update the engine's log-probs lie after a sync: about 0 when it serves the new weights, 1 when it serves the old ones (rollout/parity.py); absent when the update moved nothing."),
    ("sync/version_lag", "versions", "With rollout.max_staleness: mean policy versions between the weights that drew the step's trajectories and the trainer's (1 for a batch rolled out during the last update, 0 for one rolled out in its own step)."),
    ("sync/stale_dropped_frac", "fraction", "With rollout.max_staleness: 1 when the batch rolled out ahead was more than max_staleness versions old and was dropped (rollout.stale: drop), else 0."),
]

METRICS: dict[str, Metric] = {
    name: Metric(name, unit, meaning, name.split("/", 1)[0]) for name, unit, meaning in _TABLE
}


def _pattern_regex(name: str) -> re.Pattern[str]:
    text = re.escape(name)
    for p in PLACEHOLDERS:
        text = text.replace(re.escape(p), _ENV_NAME)
    return re.compile("^" + text + "$")


_PATTERNS: list[tuple[re.Pattern[str], Metric]] = [
    (_pattern_regex(m.name), m) for m in METRICS.values() if m.is_pattern
]


def metric_for(name: str) -> Metric | None:
    """The table entry a concrete metric name belongs to (`val/bandit/success` -> `val/<env>/success`)."""
    if name in METRICS and not METRICS[name].is_pattern:
        return METRICS[name]
    for regex, metric in _PATTERNS:
        if regex.match(name):
            return metric
    return None


def env_metric(template: str, env: str) -> str:
    """The concrete name of a per-env (or per-function) metric: `env_metric("val/<env>/success",
    "bandit")`, `env_metric("reward/fn/<fn>", "correct")`."""
    if template not in METRICS or not METRICS[template].is_pattern:
        raise KeyError(f"{template!r} is not a per-env metric in METRICS")
    if not re.fullmatch(_ENV_NAME, env):
        raise ValueError(f"name {env!r} may only contain letters, digits and _ . : -")
    for p in PLACEHOLDERS:
        template = template.replace(p, env)
    return template


def validate_metrics(values: dict[str, object]) -> list[str]:
    """Problems with one step's metrics: unknown names and non-numeric values (empty when fine).

    `step` and `time` are allowed; values must be int, float or None (None: not measured).
    """
    problems = []
    for name, value in values.items():
        if name in RESERVED_KEYS:
            continue
        if metric_for(name) is None:
            problems.append(f"unknown metric {name!r}: add it to ragen_cli.monitor.metrics._TABLE first")
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            problems.append(f"metric {name!r} has non-numeric value {value!r}")
    return problems

