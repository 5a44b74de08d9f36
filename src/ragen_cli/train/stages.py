"""The pieces of one training step that are not maths: rollouts across processes, scoring with
the trainer's models, the parity probe of the weight sync (the sync itself: train/sync.py), and the step's metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ragen_cli.algos.advantages import ADVANTAGES, AdvantageInputs
from ragen_cli.algos.losses import explained_variance
from ragen_cli.train.batch import Batch, collate, score
from ragen_cli.train.engine import ref_context
from ragen_cli.train.turn_rows import RowMap, turn_rows
from ragen_cli.train.validate import chose_high_ev_share


def step_seeds(cursor: int, groups: int) -> list[int]:
    """Training seeds of a step: the next P seeds from the run's seed cursor (RunState.cursor,
    saved in checkpoints; a rollback restores it, so the seeds follow the cursor, not the step)."""
    return list(range(cursor, cursor + groups))


def sample_seed(train_seed: int, step: int, rank: int = 0) -> int:
    """Sampling seed of a step's rollouts (a pure function of the step: resume replays it)."""
    return train_seed * 100_003 + step * 101 + rank


def gather_rollouts(run, seeds: list[int], step: int):
    """Every process rolls out its share of the groups; all processes get all trajectories,
    grouped in seed order (group = index into `seeds`)."""
    from ragen_cli.rollout.context import example_groups
    from ragen_cli.rollout.driver import rollout_stats, run_rollouts

    spec = run.spec
    mine = list(range(run.rank, len(seeds), run.world))
    shown = example_groups(step, len(seeds), spec.rollout.answer_example_steps)
    start = time.perf_counter()
    trajs = run_rollouts(run.backend, run.tokenizer, spec.env.train, [seeds[g] for g in mine],
                         spec.env.train.group_size, spec.rollout, spec.model.max_context,
                         sample_seed(spec.train.seed, step, run.rank), shown=sum(g < shown for g in mine))
    seconds = time.perf_counter() - start
    for t in trajs:
        t.group = mine[t.group]
    if run.world > 1:
        parts: list = [None] * run.world
        torch.distributed.all_gather_object(parts, (trajs, seconds))
        trajs = sorted((t for part, _ in parts for t in part), key=lambda t: t.group)
        seconds = max(s for _, s in parts)  # the ranks roll out side by side: the slowest sets the time
        if run.rank != 0:
            return trajs, {}
    # rank 0's metrics speak for the whole batch (the health verdict reads them)
    return trajs, {**rollout_stats(trajs, seconds), "episode/example_frac": shown / len(seeds),
                   "perf/rollout_tokens": engine_tokens([t.input_ids for t in trajs])}


def engine_tokens(seqs: list[list[int]]) -> int:
    """Tokens a rollout engine with a prefix cache runs for these trajectories: every distinct
    token prefix once (the size of their token trie: a prompt shared by samples, or by groups
    up to where their states differ, runs once). In sorted order a sequence shares the most with
    the one before it, so the trie adds its length less that common prefix."""
    total, prev = 0, []
    for ids in sorted(seqs):
        lcp = 0
        while lcp < min(len(ids), len(prev)) and ids[lcp] == prev[lcp]:
            lcp += 1
        total += len(ids) - lcp
        prev = ids
    return total


def single_pass(spec, rows: int, mini_rows: int) -> bool:
    """True when the update is one optimizer step over the whole batch (online_k = ppo_epochs
    = 1, one mini-batch): every forward of the update then runs on the weights the old
    log-probs would be computed with, so its own detached log-probs are the old ones (ratio
    exactly 1) and the separate scoring pass is skipped."""
    from ragen_cli.train.update import passes

    return passes(spec) == 1 and mini_rows >= rows


def old_scores(run, batch: Batch, need_old_logp: bool = True) -> dict[str, torch.Tensor | None]:
    """Old log-probs (trainer, before the update; None when not needed), critic values,
    reference log-probs."""
    micro, share = run.spec.train.micro_batch, run.spec.train.share_prefix
    engines = run.engines
    old_logp = score(engines.actor, batch, micro, share_prefix=share) if need_old_logp else None
    out: dict[str, torch.Tensor | None] = {"old_logp": old_logp, "values": None, "ref_logp": None}
    if engines.critic is not None:
        out["values"] = score(engines.critic, batch, micro, kind="value")
    if engines.ref is not None:
        with ref_context(engines):
            out["ref_logp"] = score(engines.ref, batch, micro, share_prefix=share)
    return out


def update_rows(turn_rows_on: bool, kept, episodes: Batch, world: int) -> tuple[Batch, RowMap | None]:
    """The batch the update trains on, and how its rows map onto the episodes: the episodes
    themselves (`rollout.update_context: full`; map None), or with `turn_rows_on` (`window`;
    `Plan.turn_rows`) one row per turn holding exactly the prompt that turn was sampled from
    (train/turn_rows.py), padded with empty rows to a multiple of the process count."""
    if not turn_rows_on:
        return episodes, None
    rows, keys, rowmap = turn_rows(kept, pad_to=world)
    return collate(rows, prefix_group=keys), rowmap


def advantages(spec, episodes: Batch, values, rowmap: RowMap | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(adv, returns) by the spec's estimator (algos.advantages.ADVANTAGES), computed on the
    whole episodes; with per-turn rows (`rowmap`, from `update_rows`) the critic's `values` come
    on the rows' grid and the results go back to it."""
    a = spec.algorithm
    if rowmap is not None and values is not None:
        values = rowmap.to_full(values)
    inp = AdvantageInputs.from_turns(episodes.turn_end, episodes.turn_rewards, episodes.group, episodes.mask,
                                     values=values, turn_level=a.turn_rewards)
    adv, returns = ADVANTAGES[a.adv_estimator](inp, a)
    return (adv, returns) if rowmap is None else (rowmap.to_rows(adv), rowmap.to_rows(returns))


def critic_stats(values, returns, mask) -> dict[str, float]:
    return {"critic/explained_var": explained_variance(values, returns, mask)}


def probe_rows(batch: Batch, min_tokens: int, window: int = 0) -> list[int]:
    """The parity probe's rows: from the start of the batch until their probe windows
    (`probe_windows`) hold at least `min_tokens` sampled tokens (`rollout.parity_tokens`), or
    every row with any."""
    rows, total = [], 0
    lengths = batch.attention_mask.sum(-1).tolist()
    for r, n in enumerate(lengths):
        count = int(batch.mask[r, _window_start(int(n), window): int(n) - 1].sum().item())
        if count > 0:
            rows.append(r)
            total += count
        if total >= min_tokens:
            break
    return rows


def _window_start(n: int, window: int) -> int:
    """First token of the probe window of a row of `n` tokens: its last `window` (0: all)."""
    return max(0, n - window) if window > 0 else 0


def probe_windows(batch: Batch, rows: list[int], window: int) -> Batch:
    """The probe's sequences: of each row in `rows`, its last `window` tokens (0: the whole row),
    with the row's sampled tokens in them as the tokens to compare (`rollout.parity_window`). The
    probe asks whether both sides compute the same function, which any input shows; a window
    spares the engine the row's long prompt, whose every position `prompt_logprobs` scores."""
    sub = batch.rows(rows)
    if window <= 0:
        return sub
    lengths = [int(n) for n in sub.attention_mask.sum(-1).tolist()]
    starts = [_window_start(n, window) for n in lengths]
    W = max(n - s for n, s in zip(lengths, starts))
    ids = torch.zeros(len(rows), W, dtype=sub.input_ids.dtype)
    attn = torch.zeros(len(rows), W, dtype=sub.attention_mask.dtype)
    mask = torch.zeros(len(rows), W - 1, dtype=sub.mask.dtype)
    logp = torch.zeros(len(rows), W - 1, dtype=sub.sample_logp.dtype)
    for i, (n, s) in enumerate(zip(lengths, starts)):
        ids[i, : n - s], attn[i, : n - s] = sub.input_ids[i, s:n], 1
        mask[i, : n - s - 1], logp[i, : n - s - 1] = sub.mask[i, s : n - 1], sub.sample_logp[i, s : n - 1]
    # one group: the windows run as one forward (they share no prompt; per-group parts would be
    # one forward call per row)
    return Batch(ids, attn, mask, logp, [[] for _ in rows], [[] for _ in rows], [0] * len(rows))


@dataclass(frozen=True)
class ParityBaseline:
    """The probe before the update: its sequences, and trainer and engine log-probs of their
    sampled tokens while both hold the same weights."""

    probe: Batch
    trainer: list[float]
    engine: list[float]


def probe_logprobs(run, probe: Batch) -> tuple[list[float], list[float]]:
    """(trainer, engine) log-probs of the sampled tokens of the probe's sequences, in row order."""
    trainer = score(run.engines.actor, probe, run.spec.train.micro_batch, share_prefix=run.spec.train.share_prefix)
    t_out: list[float] = []
    e_out: list[float] = []
    for i in range(len(probe)):
        n = int(probe.attention_mask[i].sum().item())
        on = probe.mask[i, : n - 1].bool()
        t_out += trainer[i, : n - 1][on].tolist()
        e_out += torch.tensor(run.backend.score(probe.input_ids[i, :n].tolist()))[on].tolist()
    return t_out, e_out


def parity_baseline(run, batch: Batch) -> ParityBaseline:
    """Before the update: both sides on the probe's sequences with the same weights
    (rollout/parity.py)."""
    r = run.spec.rollout
    probe = probe_windows(batch, probe_rows(batch, r.parity_tokens, r.parity_window), r.parity_window)
    return ParityBaseline(probe, *probe_logprobs(run, probe))


def parity_probe(run, batch: Batch, base: ParityBaseline) -> dict[str, float]:
    """The probe's rows after the sync, judged against the baseline (rollout/parity.py) -> the sync metrics."""
    from ragen_cli.rollout.parity import judge_sync, recent_noise

    r = run.spec.rollout
    trainer_new, engine_after = probe_logprobs(run, base.probe)
    check = judge_sync(base.trainer, base.engine, trainer_new, engine_after, r.parity_threshold,
                       r.parity_noise_factor, recent_noise(run.state.history))
    return agreed_sync(run, check).metrics()


def agreed_sync(run, check):
    """This rank's `check` once every rank has passed its own (`parity.ruling`: all ranks raise
    the same ParityError, naming the rank whose engine failed, or none does)."""
    from ragen_cli.rollout.parity import check_sync, ruling

    r, checks = run.spec.rollout, [check] * run.world
    if run.world > 1:
        torch.distributed.all_gather_object(checks, check)
    bad = ruling(checks, run.rank)
    check_sync(checks[bad], r.parity_threshold, r.parity_noise_factor, rank=bad if run.world > 1 else None)
    return check


def filter_rewards(trajs, which: str) -> torch.Tensor:
    """The episode rewards the StarPO-S filter ranks groups by (`algorithm.filter.reward`):
    `task`, the env's own reward (no format penalty, no progress shaping), or `shaped`, the
    reward the advantages are computed from."""
    if which not in ("task", "shaped"):
        raise ValueError(f"filter reward must be task or shaped, got {which!r}")
    return torch.tensor([t.task_reward if which == "task" else t.episode_reward for t in trajs])


def select_kept(trajs, f, keep_ratio: float) -> tuple[list, dict[str, float]]:
    """The StarPO-S / RAGEN-2 filter over a step's trajectories (`algorithm.filter` = `f`;
    `keep_ratio`: the run's current one, which a health intervention may have lowered) ->
    (kept trajectories in batch order, filter stats). The entropy metrics use the sampler's
    estimate, the mean of -log p over a trajectory's sampled tokens (E[-log p] is the entropy)."""
    from ragen_cli.algos.filter import METRICS, filter_groups

    source, stat = METRICS[f.metric]
    rewards = filter_rewards(trajs, f.reward)
    if source == "reward":
        values = rewards
    elif source == "length":
        values = torch.tensor([float(t.num_generated) for t in trajs])
    else:
        values = torch.tensor([-sum(t.old_logprobs) / max(t.num_generated, 1) for t in trajs])
    keep, stats = filter_groups(
        rewards, torch.tensor([t.group for t in trajs]), keep_ratio, f.direction, strategy=f.strategy,
        value=f.value, values=values, stat=stat, include_zero=f.include_zero, top_p_mode=f.top_p_mode,
        selection_eps=f.selection_eps,
    )
    return [trajs[i] for i in keep.tolist()], stats


def filter_exhausted(spec, empty_steps: int, success: float | None = None) -> str:
    """Why the run stops for want of kept groups (`algorithm.filter.empty_stop_steps`), or ''.
    `success`: the last step's train/success, which says whether the run settled on the task's
    best answer (solved) or on another one (a dead run: no reward spread, nothing to learn)."""
    f = spec.algorithm.filter
    if not f.empty_stop_steps or empty_steps < f.empty_stop_steps:
        return ""
    why = (f"ragen: stopping: the filter kept no group in the last {empty_steps} steps "
           f"(algorithm.filter.empty_stop_steps {f.empty_stop_steps}): strategy {f.strategy}, metric {f.metric}"
           + ("" if f.include_zero else ", include_zero false") + ". ")
    if success is not None and not f.include_zero and f.metric == "reward_std":
        state = "solved" if success >= 0.9 else "dead"
        return why + (f"Every group's rollouts earned one reward each step (train success {success:.2f}): the policy "
                      f"has settled and the run is {state}; more steps would not change it. "
                      + ("" if state == "solved" else "Try other seeds, more groups per step (env.train.groups) "
                         "or a higher keep_ratio; the best checkpoint is kept (checkpoint.keep_best)."))
    return why + ("Every group's score was zero or below the threshold; lower algorithm.filter.value, set "
                  "include_zero: true, or look at the replies (ragen watch) for why rewards never differ within a group.")


def in_group_std(values: list[float], groups: list[int]) -> float:
    """Mean over groups of the population std of a group's values (the filter's definition)."""
    from ragen_cli.algos.masked import group_index, group_moments

    _, inverse, num_groups = group_index(torch.tensor(groups))
    return group_moments(torch.tensor(values, dtype=torch.float64), inverse, num_groups, unbiased=False)[2].mean().item()


def reward_stats(trajs) -> dict[str, float]:
    r = torch.tensor([t.episode_reward for t in trajs], dtype=torch.float64)
    task = [t.task_reward for t in trajs]
    out = {"reward/mean": r.mean().item(), "reward/std": r.std(unbiased=False).item(),
           "reward/min": r.min().item(), "reward/max": r.max().item(),
           "reward/task_mean": sum(task) / len(task),
           "reward/task_in_group_std": in_group_std(task, [t.group for t in trajs])}
    high = chose_high_ev_share(trajs)
    if high is not None:
        out["train/chose_high_ev"] = high
    return out


def collapse_metrics(run, trajs, step: int) -> dict[str, float]:
    """The template-collapse metrics (monitor/collapse.py) on this step's rollouts, every
    `monitor.collapse.every` steps; scored with the actor before its update."""
    from ragen_cli.monitor.collapse import cross_stats
    from ragen_cli.train.cross_score import cross_matrix, pairs

    cfg = run.spec.monitor.collapse
    if cfg.every == 0 or step % cfg.every:
        return {}
    start = time.perf_counter()
    prompts, weights, replies, own = pairs(trajs, cfg.replies, cfg.groups)
    if len(prompts) < 2 or not replies:
        return {}
    cross = cross_matrix(run.engines.actor.module, prompts, replies, run.rank, run.world)
    return {**cross_stats(cross, own, weights), "timing/collapse_s": time.perf_counter() - start}


def diversity_stats(trajs) -> dict[str, float]:
    from ragen_cli.monitor.diversity import distinct_n, identical_share

    replies = [turn.reply for t in trajs for turn in t.turns]
    out = {"diversity/distinct_2": distinct_n(replies, 2), "diversity/identical_share": identical_share(replies)}
    return {k: v for k, v in out.items() if v is not None}


def update_metrics(actor: dict, critic: dict | None) -> dict[str, float]:
    """Rename the update's stats into the metrics table's names."""
    out = {
        "actor/entropy": actor.get("entropy"), "actor/answer_entropy": actor.get("answer_entropy"),
        "actor/grad_norm": actor.get("grad_norm"),
        "actor/clip_frac_low": actor.get("clipfrac_low"), "actor/clip_frac_high": actor.get("clipfrac_high"),
        "actor/approx_kl": actor.get("approx_kl"), "actor/policy_loss": actor.get("policy_loss"),
        "actor/lr": actor.get("lr"),
    }
    if "kl_ref" in actor:
        out["actor/kl_ref"] = actor["kl_ref"]
    if "is_truncated_frac" in actor:
        out["actor/is_truncated_frac"] = actor["is_truncated_frac"]
        out["actor/is_weight_mean"] = actor["is_weight_mean"]
    if critic is not None:
        out.update({"critic/value_loss": critic.get("value_loss"), "critic/grad_norm": critic.get("grad_norm"),
                    "critic/lr": critic.get("lr")})
    return {k: v for k, v in out.items() if v is not None}


def rank_mean(run, stats: dict[str, float]) -> dict[str, float]:
    """The mean over processes of each update stat (each rank trains on its share of the rows;
    a stat a rank lacks, e.g. answer entropy without answer tokens, is averaged over the others),
    so rank 0's metrics, and the health verdict read from them, speak for the whole batch."""
    if run.world == 1:
        return stats
    parts: list = [None] * run.world
    torch.distributed.all_gather_object(parts, stats)
    keys = {k for part in parts for k in part}
    return {k: sum(p[k] for p in parts if k in p) / sum(k in p for p in parts) for k in sorted(keys)}


def sample_records(trajs, k: int) -> list[dict]:
    """`k` trajectories spread evenly over the batch (all groups represented), as JSON records."""
    if k <= 0 or not trajs:
        return []
    stride = max(1, len(trajs) // k)
    return [t.to_record(with_tokens=False) for t in trajs[::stride][:k]]


def rank_checksums(run) -> list[float]:
    """A checksum of the actor's trainable parameters from every process (equal when the ranks
    stayed in lockstep); [own] for a single process."""
    with torch.no_grad():
        params = [p for p in run.engines.actor.module.parameters() if p.requires_grad]
        own = float(sum(p.double().sum() + (p.double() ** 2).sum() for p in params))
    if run.world == 1:
        return [own]
    out: list = [None] * run.world
    torch.distributed.all_gather_object(out, own)
    return out
