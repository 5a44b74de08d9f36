"""The pieces of one training step that are not maths: seeds, rollouts across processes, the
StarPO-S filter, scoring with the trainer's models, the update's rows and advantages. The weight
sync with its parity probe is train/sync.py; the step's metrics are train/step_metrics.py."""

from __future__ import annotations

import time

import torch

from ragen_cli.algos.estimators import ADVANTAGES, AdvantageInputs
from ragen_cli.train.batch import Batch, collate, score
from ragen_cli.train.engine import ref_context
from ragen_cli.train.step_metrics import engine_tokens
from ragen_cli.train.turn_rows import RowMap, turn_rows


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
    return share_rollouts(run, seeds, step, *local_rollouts(run, seeds, step, run.state.version))


def local_rollouts(run, seeds: list[int], step: int, version: int) -> tuple[list, float]:
    """This process's share of a step's groups, drawn by policy `version` -> (trajectories, seconds).
    Nothing collective: it also runs in the thread that rolls out during the update (train/ahead.py)."""
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.prompts import example_groups

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
        t.policy_version = version
    return trajs, seconds


def share_rollouts(run, seeds: list[int], step: int, trajs: list, seconds: float):
    """Every process's share of a step's trajectories to every process -> (all trajectories in
    group order, rank 0's rollout metrics)."""
    from ragen_cli.rollout.driver import rollout_stats
    from ragen_cli.rollout.prompts import example_groups

    spec = run.spec
    shown = example_groups(step, len(seeds), spec.rollout.answer_example_steps)
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


def step_rollouts(run, step: int):
    """The step's trajectories and rollout metrics: the batch the engine rolled out during the
    last update (`rollout.max_staleness` > 0; train/ahead.py) unless it is stale (too old, or
    drawn before a rollback) and dropped, else rolled out now with the weights the engine
    serves. Advances the seed cursor past the groups rolled out now (a batch rolled out ahead
    counted its own when it finished)."""
    from ragen_cli.train.ahead import is_stale, version_lag

    spec, state = run.spec, run.state
    ahead, dropped = run.ahead.take(), 0.0
    if ahead is not None and is_stale(ahead.version, state.version, spec.rollout.max_staleness,
                                      state.rollback_version) and spec.rollout.stale == "drop":
        ahead, dropped = None, 1.0
    if ahead is None:
        seeds = step_seeds(state.cursor, spec.env.train.groups)
        trajs, metrics = gather_rollouts(run, seeds, step)
        state.cursor += spec.env.train.groups  # after the rollouts: an env failure's seeds are not skipped on resume
    else:
        trajs, metrics = share_rollouts(run, ahead.seeds, ahead.step, ahead.trajs, ahead.seconds)
    if spec.rollout.max_staleness > 0 and run.rank == 0:
        lags = [version_lag(t.policy_version, state.version) for t in trajs]
        metrics.update({"sync/version_lag": sum(lags) / max(len(lags), 1), "sync/stale_dropped_frac": dropped})
    return trajs, metrics


def launch_ahead(run, step: int) -> None:
    """Start rolling out the batch of step `step` with the weights the engine serves now
    (train/ahead.py), unless the run does not overlap (`rollout.max_staleness` 0)."""
    from ragen_cli.train.ahead import Ahead

    if run.spec.rollout.max_staleness == 0:
        return
    state = run.state
    ahead = Ahead(step=step, version=state.version, seeds=step_seeds(state.cursor, run.spec.env.train.groups))
    run.ahead.launch(ahead, lambda: local_rollouts(run, ahead.seeds, step, ahead.version))


def settle_ahead(run, step: int, waited: float, trainer_span: tuple[float, float]) -> dict[str, float]:
    """After step `step`'s update and the join (`RunAhead.join`): did the batch rolled out
    meanwhile finish on every process? If any process's failed or hung, every process raises the
    same `AheadFailure` (naming that rank and its error) before the sync, validation or
    checkpoint use the engine; else its seeds are counted and -> the seconds the trainer waited
    and the seconds both worked at once. A collective with several processes."""
    from ragen_cli.train.ahead import AheadFailure, agree_failures, error_text, overlap_seconds

    ahead = run.ahead.pending
    if run.spec.rollout.max_staleness == 0 or ahead is None:
        return {}
    failed = agree_failures(None if ahead.error is None else error_text(ahead.error), run.world)
    if failed:
        run.ahead.pending = None  # not saved: a resume rolls its seeds out again
        (rank, text), others = failed[0], [r for r, _ in failed[1:]]
        raise AheadFailure(step, rank, text + (f" (and on rank {', '.join(map(str, others))})" if others else "")) \
            from ahead.error
    run.state.cursor += len(ahead.seeds)
    return {"timing/ahead_wait_s": waited, "timing/overlap_s": overlap_seconds(ahead.span, trainer_span)}


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


def advantages(spec, episodes: Batch, values, rowmap: RowMap | None = None,
               anchors: list[list[str]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(adv, returns) by the spec's estimator (algos.estimators.ADVANTAGES), computed on the
    whole episodes; with per-turn rows (`rowmap`, from `update_rows`) the critic's `values` come
    on the rows' grid and the results go back to it. `anchors`: each kept episode's observation
    before each turn (`anchor_states`), what GiGPO groups steps by."""
    a = spec.algorithm
    if rowmap is not None and values is not None:
        values = rowmap.to_full(values)
    inp = AdvantageInputs.from_turns(episodes.turn_end, episodes.turn_rewards, episodes.group, episodes.mask,
                                     values=values, turn_level=a.turn_rewards, anchors=anchors)
    adv, returns = ADVANTAGES[a.adv_estimator](inp, a)
    return (adv, returns) if rowmap is None else (rowmap.to_rows(adv), rowmap.to_rows(returns))


def anchor_states(trajs) -> list[list[str]]:
    """Each episode's observation before each of its turns (GiGPO's anchor states)."""
    return [[turn.obs for turn in t.turns] for t in trajs]


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
