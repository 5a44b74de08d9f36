"""The StarPO / StarPO-S training loop (RAGEN, arXiv 2504.20073), one straight-line step.

    rollout (P groups x N) -> StarPO-S filter -> old log-probs, values, ref log-probs
    -> token rewards and advantages -> online_k x ppo_epochs x mini-batch updates
    -> sync to the rollout engine + parity probe -> metrics, trajectories, health -> checkpoint

With `rollout.max_staleness` > 0 the engine rolls out the next step's batch while the trainer
scores and updates (train/ahead.py): the step's rollout is then the batch rolled out during the
last update, one policy version old, and the update's importance weights correct for it.

How this departs from the paper and its reference code (docs/training.md has the details):
1. Old log-probs are recomputed by the trainer before the update (as verl), so the first
   ratio is exactly 1; the rollout engine's log-probs are only used by the parity probe. When
   the update is one optimizer step over the whole batch, the update's own forward gives them.
2. Online-k is a real loop (k consecutive updates on one rollout batch, all against the same
   old log-probs); the reference emulates it by enlarging the batch.
3. The episode's text is trained exactly as sampled (the reference re-formats the parsed
   reply before training), so trainer and sampler see the same tokens.
4. Seeds: step k takes the next P seeds from a cursor (saved in checkpoints); validation
   always uses the same seeds and the same sampling seed.
5. Rows are not shuffled between mini-batches (bit-identical resume, see update.py).
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
from pathlib import Path

from ragen_cli.envs.base import EnvFailure
from ragen_cli.rollout.parity import ParityError
from ragen_cli.spec.sizes import mini_batch_rows
from ragen_cli.train import stages, step_metrics
from ragen_cli.train import sync as weight_sync
from ragen_cli.train.ahead import AheadFailure
from ragen_cli.train.batch import collate, forward_tokens
from ragen_cli.train.runtime import (Run, apply_decision, best_metric, health_decision, log_validation, new_best,
                                    setup, teardown)
from ragen_cli.train.update import actor_update, critic_update, passes, shares_prefix
from ragen_cli.train.validate import should_validate


def train_step(run: Run, step: int) -> dict[str, float]:
    """One StarPO step; returns its metrics (all names from monitor.metrics.METRICS)."""
    spec, a, engines = run.spec, run.spec.algorithm, run.engines
    t_step = time.perf_counter()
    # 1. rollout: P initial states x N rollouts each (with rollout.max_staleness, the batch the
    # engine rolled out during the last update: train/ahead.py)
    trajs, metrics = stages.step_rollouts(run, step)
    # 2. StarPO-S filter: keep the groups with the highest in-group std of the task reward
    # (or another RAGEN-2 strategy and metric: algorithm.filter)
    kept, fstats = stages.select_kept(trajs, a.filter, run.state.keep_ratio)
    run.state.empty_steps = 0 if kept else run.state.empty_steps + 1
    # template-collapse metrics: every reply of the step under every state, before the update
    metrics.update(step_metrics.collapse_metrics(run, trajs, step))
    metrics.update(step_metrics.reward_stats(trajs))
    metrics.update(step_metrics.diversity_stats(trajs))
    metrics.update({
        "filter/in_group_std_before": fstats["in_group_std_before"],
        "filter/in_group_std_after": fstats["in_group_std_after"],
        "filter/zero_std_frac": fstats["zero_std_frac"], "filter/kept_frac": fstats["kept_fraction"],
        "filter/empty_steps": run.state.empty_steps,
    })
    if run.rank == 0:
        run.rundir.write_trajectories(step, step_metrics.sample_records(trajs, spec.monitor.trajectories_per_step))
    if not kept:  # nothing kept, nothing to learn from: no update, the engine keeps serving these weights
        metrics["timing/step_s"] = time.perf_counter() - t_step
        return metrics
    # 3. the update's rows: the whole episodes or (rollout.update_context: window) one row per
    # turn as sampled; the parity probe's trainer and engine log-probs with the weights both hold,
    # what the sync's probe is judged against
    episodes = collate(kept)
    batch, rowmap = stages.update_rows(run.plan.turn_rows, kept, episodes, run.world)
    mine = list(range(run.rank, len(batch), run.world))
    mini_rows = mini_batch_rows(len(batch), run.world, spec.train.mini_batch, a.mini_batches)
    t_parity = time.perf_counter()
    parity = run.sync.baseline(batch)
    parity_s = time.perf_counter() - t_parity
    # with rollout.max_staleness the engine rolls out the next step's batch during 4-6
    stages.launch_ahead(run, step + 1)
    t_scores = time.perf_counter()
    try:
        # 4. old log-probs (none needed for a single-pass update), values and reference log-probs
        old = stages.old_scores(run, batch, need_old_logp=not stages.single_pass(spec, len(mine), mini_rows))
        metrics["timing/old_scores_s"] = time.perf_counter() - t_scores
        # 5. token rewards and advantages on the whole episodes (GAE with the critic, GRPO or
        # REINFORCE-LOO), on the update's rows
        adv, returns = stages.advantages(spec, episodes, old["values"], rowmap, stages.anchor_states(kept))
        # 6. updates on this process's share of the kept rows
        t_update = time.perf_counter()
        run.sync.sleep()  # CUDA: vLLM gives its GPU memory to the update (rollout.sleep)
        local = batch.rows(mine)

        def part(x):
            return None if x is None else x[mine, : local.mask.shape[1]]

        actor_stats = actor_update(engines.actor, local, part(old["old_logp"]), part(adv), part(old["ref_logp"]),
                                   spec, mini_rows, run.state.lr_scale, run.plan.rollout_is_cap)
        critic_stats = None
        if engines.critic is not None:
            critic_stats = critic_update(engines.critic, local, part(old["values"]), part(returns), spec, mini_rows,
                                         run.state.lr_scale)
            metrics.update(step_metrics.critic_stats(old["values"], returns, batch.mask))
        update_s = time.perf_counter() - t_update
    finally:  # the engine is free again (or given up on: a hung rollout) before anything else uses it
        t_trained = time.perf_counter()
        waited = run.ahead.join()
    # every rank learns whether a rank's rollout failed during the update: if one did, all save
    # this step and stop (AheadFailure) before the sync, validation or checkpoint use the engine
    metrics.update(stages.settle_ahead(run, step, waited, (t_scores, t_trained)))
    # 7. sync the new weights into the rollout engine and check it serves them
    run.sync.wake()
    try:
        metrics.update(weight_sync.push_weights(run, f"step-{step}"))  # and how much of the update reached it
        run.state.version += 1
        t_parity = time.perf_counter()
        metrics.update(run.sync.probe(parity, run.state.history))
    except ParityError as exc:
        exc.step = step  # the engine failed, not the update: the stop saves this step's weights as step `step`
        raise
    metrics["timing/parity_s"] = parity_s + time.perf_counter() - t_parity
    # 8. metrics
    metrics.update(step_metrics.rank_mean(run, step_metrics.update_metrics(actor_stats, critic_stats)))
    metrics.update({
        "timing/update_s": update_s,
        "perf/update_tokens_per_s": batch.tokens * passes(spec) / max(update_s, 1e-9),
        "perf/update_tokens": forward_tokens(local, spec.train.micro_batch, shares_prefix(spec))
        * passes(spec),
        "timing/step_s": time.perf_counter() - t_step,
    })
    return metrics


def train(spec, plan, run_dir, resume: bool = False, warm_start_only: bool = False) -> dict:
    """Run (or resume) the job described by `spec` and its compiled `plan` in `run_dir`: the
    warm start (spec `warm_start`, train/warm_start.py) when it has one and it is not done, then
    RL (not with `warm_start_only`). Returns a summary: last step, whether it stopped early, the
    last metrics, and the RL start's evaluation after a warm start."""
    run = setup(spec, plan, Path(run_dir), resume)
    stop = StopRequest(run.say)
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, stop) for sig in handled} if run.rank == 0 and _main_thread() else {}
    summary = {"step": run.state.step, "stopped": False, "metrics": {}}
    try:
        if spec.warm_start is not None and not run.state.warm_done:
            from ragen_cli.train.warm_start import run_warm_start

            summary["warm_start"] = run_warm_start(run, lambda: stop.requested)
            if summary["warm_start"] is None:  # stopped mid-way (Ctrl-C): its checkpoint is saved
                summary["stopped"] = True
                run.event("end", run.state.step, stopped=True, interrupted=True, warm_start_only=warm_start_only)
                return summary
        if warm_start_only:
            run.event("end", run.state.step, stopped=True, interrupted=False, warm_start_only=True)
            return summary
        if run.state.step == 0 and should_validate(spec, 0):
            log_validation(run, 0)
        with run.progress() as bar:
            while run.state.step < spec.train.steps:
                step = run.state.step + 1
                metrics = train_step(run, step)
                run.state.step = step
                empty = stages.filter_exhausted(spec, run.state.empty_steps,  # no group kept for k steps
                                                metrics.get("train/success"))
                best = False
                if should_validate(spec, step) or (empty and spec.env.val.every > 0):  # a stopping run ends validated
                    metrics.update(log_validation(run, step))
                    best = new_best(run, step, metrics)  # checkpoint.keep_best: saved below
                run.log_metrics(step, metrics)
                decision = health_decision(run, step)
                bar.advance(step, metrics)
                summary.update(step=step, metrics=metrics)
                if empty:
                    run.say(empty)
                # a rollback deletes the abandoned branch's checkpoints and saves the restored step
                # again with the intervention's settings: a resume continues the branch that runs now
                rolled_back = decision.action == "intervene" and apply_decision(run, decision)
                ending = decision.action == "stop" or stop.requested or bool(empty)
                if rolled_back or _checkpoint_due(spec, step) or decision.save_checkpoint or ending or best:
                    run.save_checkpoint()
                if ending:
                    summary["stopped"] = True
                    break
        run.event("end", run.state.step, stopped=summary["stopped"], interrupted=stop.requested,
                  rank_checksums=step_metrics.rank_checksums(run), best_step=run.state.best_step,
                  best_value=run.state.best_value)
        start = summary.get("warm_start") or {}
        final = summary["metrics"].get(best_metric(spec) or "")
        if start and final is not None:
            run.say(f"ragen: validation success: {start['success']:.3f} at the RL start (the warm start's "
                    f"checkpoint), {final:.3f} after RL step {run.state.step}")
        if run.state.best_step is not None:
            run.say(f"ragen: best {best_metric(spec)} {run.state.best_value:.3f} at step {run.state.best_step}: "
                    f"{run.rundir.checkpoints_dir / 'best'} (step-{run.state.best_step})")
    except (EnvFailure, ParityError, AheadFailure) as exc:
        # an outside env or a user's function failed, the rollout engine does not serve the
        # trainer's weights, or the rollout during an update failed: the trainer's own state is
        # sound, so keep what is trained, then stop
        if isinstance(exc, (AheadFailure, ParityError)) and getattr(exc, "step", None):
            run.state.step = exc.step  # its update is done; the engine gets these weights on resume
        saved = save_before_stopping(run)
        _record_error(run, exc, checkpoint=None if saved is None else str(saved))
        run.say(f"ragen: stopping: {exc}"
                + (f"\nragen: saved {saved}; after the fix, resume with: ragen train --resume {run.rundir.path}"
                   if saved is not None else ""))
        raise
    except BaseException as exc:
        _record_error(run, exc)
        raise
    finally:
        stop.closing = True  # a signal from here on: the shutdown goes on (StopRequest)
        try:
            teardown(run)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return summary


class StopRequest:
    """The signal handler of a run (rank 0): Ctrl-C or SIGTERM (a scheduler, `kill`) asks it to
    finish the step, checkpoint and shut the rollout engine down; a second signal aborts at once
    (KeyboardInterrupt; the engine is still closed: no orphaned vLLM processes). Once the loop
    is over (`closing`: ended, stopped or failed) only that shutdown is left: a signal then says
    so and the shutdown goes on; another one aborts it (the reaper ends the engine)."""

    def __init__(self, say):
        self.say, self.requested, self.closing, self.close_asked = say, False, False, False

    def __call__(self, signum, frame=None) -> None:
        what = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self.closing and not self.close_asked:
            self.close_asked = True
            self.say(f"ragen: {what}: the run is over; closing the rollout engine (again to abort)")
        elif self.requested or self.closing:
            raise KeyboardInterrupt
        else:
            self.requested = True
            self.say(f"ragen: {what}: finishing this step, saving a checkpoint, then exiting (again to abort)")


def _record_error(run: Run, exc: BaseException, **data) -> None:
    """The `error` event, unless writing it fails too (a full disk): then the run's own error is
    what the user sees, not the failed write (which is named on stderr)."""
    try:
        run.event("error", run.state.step, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(), **data)
    except OSError as write_error:
        print(f"ragen: could not record the error in events.jsonl: {write_error}", file=sys.stderr, flush=True)


def save_before_stopping(run: Run) -> Path | None:
    """A checkpoint of the last finished step, unless it has one already or no step finished;
    returns its path (None when there was nothing new to save)."""
    step = run.state.step
    path = run.rundir.checkpoints_dir / f"step-{step}"
    if step == 0:
        return None
    if path.is_dir():
        return path
    return run.save_checkpoint()


def _checkpoint_due(spec, step: int) -> bool:
    every = spec.checkpoint.every
    return step == spec.train.steps or (every > 0 and step % every == 0)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()

