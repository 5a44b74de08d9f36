"""Rollouts that overlap the update (`rollout.max_staleness: k`, docs/training.md "Rollouts that
overlap the update"): the engine rolls out the next step's batch while the trainer updates.

    step t   batch t: the batch the engine rolled out during step t-1's update, or rolled out now
             filter, parity baseline -> launch: the engine rolls out batch t+1 with the weights it
             serves (version v) in a thread -> old scores, advantages, update (the trainer, meanwhile)
             -> join: wait for the engine -> sync (version v+1) -> parity probe
    step t+1 batch t+1 was drawn by version v and the trainer holds v+1: lag 1

The same scheme as verl's one-step off-policy trainer and prime-rl's `max_off_policy_steps`: one
batch in flight, so a trajectory's lag is 1 (0 for a batch rolled out in its own step: the first,
or after a step that made no update). The update corrects for it with the truncated importance
weights min(pi_old / pi_sampler, cap) (`algos.losses.rollout_is_weights`): pi_sampler is the
engine's log-prob of each token under the version that drew it, pi_old the trainer's before this
update, as in decoupled PPO (Hilton et al. 2022; AReaL, Fu et al. 2025).

Versions (`RunState.version`) count the changes of the engine's weights the loop makes: +1 for
each step's sync and for a rollback; a resume pushes the saved weights again and does not count.
Every trajectory carries the version that drew it (`Trajectory.policy_version`); its lag is the
trainer's version minus that (`version_lag`). A batch is stale (`is_stale`) when it is more than k
versions old or was drawn before the last health rollback (`RunState.rollback_version`): then it
comes from weights the run abandoned, whatever its lag (a rollback at step t restores an older
checkpoint, so the batch rolled out during step t's update is lag 2, within k >= 2, yet drawn by
a policy the run no longer descends from). A stale batch is dropped and the step rolls out again
(`rollout.stale: drop`, counted), or trained on with its correction (`correct`). One batch is in
flight, so in practice only a rollback makes a batch stale.

The batch in flight is part of the run's state: it is joined before every sync and checkpoint,
and a checkpoint after step t holds batch t+1 (`ahead-<rank>.json`; the weights that drew it are gone by
then), so a resumed run trains on exactly the trajectories the uninterrupted run did (an env's
info goes through JSON: values JSON cannot hold come back as lists or text). The last step rolls
one out too, so extending a finished run (`--resume` with more steps) continues exactly.

A failure in the engine's thread (any exception: an env's, a reward function's, the engine's)
surfaces in the step it ran during, right after the update, before the sync, validation or
checkpoint use the engine: `RunAhead.join` waits at most `JOIN_TIMEOUT_S` (a hung engine is a
failure too), then every process says whether its thread failed (`agree_failures`, one
all_gather, where all ranks stand after the update) and if any did, all raise `AheadFailure`
naming the rank and its error. The loop then saves that step (its update is done; the engine
gets the saved weights on resume) and stops; the failed batch's seeds were not counted, so a
resume rolls them out again. Only the engine's work runs in the thread: with several processes
the batch is shared (all_gather) in the main thread, where the update's collectives run.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

AHEAD_FILE = "ahead-{rank}.json"  # each process's share of the batch
JOIN_TIMEOUT_S = 3600.0
"""How long the trainer waits, after its update, for the batch in flight before it calls the
engine hung: as long as vLLM itself waits for one model step on CPU
(VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, rollout/vllm_backend.py), counted from the end of the update."""


class AheadFailure(RuntimeError):
    """The batch rolled out during step `step`'s update failed (or hung) on rank `rank`: every
    process raises it (the failing one `from` its thread's error), saves step `step` and stops."""

    def __init__(self, step: int, rank: int, error: str):
        super().__init__(f"the rollout of step {step + 1}'s batch, during step {step}'s update, failed on rank "
                         f"{rank}: {error}")
        self.step, self.rank, self.error = step, rank, error


def version_lag(sampled: int, current: int) -> int:
    """Policy versions between the weights that drew a trajectory and the trainer's now."""
    return current - sampled


def is_stale(sampled: int, current: int, max_staleness: int, rollback_version: int = 0) -> bool:
    """A batch drawn more than `max_staleness` versions ago (`rollout.max_staleness`), or before
    the last rollback, which made version `rollback_version` (drawn by abandoned weights)."""
    return sampled < rollback_version or version_lag(sampled, current) > max_staleness


def error_text(exc: BaseException) -> str:
    """'Type: message' of an error, as every process reports it (the first 500 characters)."""
    return f"{type(exc).__name__}: {exc}"[:500]


def agree_failures(failure: str | None, world: int) -> list[tuple[int, str]]:
    """Every process's thread failure (None where it finished) -> the (rank, error) of those
    that failed, the same list on every process. A collective with several processes."""
    parts: list = [failure]
    if world > 1:
        import torch.distributed as dist

        parts = [None] * world
        dist.all_gather_object(parts, failure)
    return [(rank, text) for rank, text in enumerate(parts) if text is not None]


def overlap_seconds(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Seconds two (start, end) spans of one clock ran at once."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


@dataclass
class Ahead:
    """A batch the engine rolls out during an update: its seeds, the version that draws it, and
    when it is done its (this process's) trajectories or the error that stopped it."""

    step: int  # the step it is for (its sampling seed)
    version: int
    seeds: list[int]
    trajs: list | None = None
    seconds: float = 0.0  # the rollout's wall time
    span: tuple[float, float] = (0.0, 0.0)  # time.perf_counter() at its start and end
    error: BaseException | None = field(default=None, repr=False)


class RunAhead:
    """At most one batch in flight (module docstring): `launch` starts it in a thread, `join`
    waits for it, `take` hands it to the step it is for (raising what stopped it)."""

    def __init__(self) -> None:
        self.pending: Ahead | None = None
        self._thread: threading.Thread | None = None

    def launch(self, ahead: Ahead, work: Callable[[], tuple[list, float]]) -> None:
        if self._thread is not None or self.pending is not None:
            raise RuntimeError("a rollout batch is already in flight")

        device = _current_cuda_device()

        def body() -> None:
            if device is not None:  # torch's current GPU is per thread: the rank's, as in the main thread
                import torch

                torch.cuda.set_device(device)
            start = time.perf_counter()
            try:
                ahead.trajs, ahead.seconds = work()
            except BaseException as exc:  # noqa: BLE001 - raised in the main thread by `take`
                ahead.error = exc
            ahead.span = (start, time.perf_counter())

        self.pending = ahead
        self._thread = threading.Thread(target=body, name="ragen-rollout-ahead", daemon=True)
        self._thread.start()

    def join(self, timeout: float = JOIN_TIMEOUT_S) -> float:
        """Wait for the batch in flight, at most `timeout` seconds; returns the seconds waited (0
        when none is in flight). A thread still running then is given up on (a daemon: it ends
        with the process) and its batch fails with a TimeoutError that says so."""
        if self._thread is None:
            return 0.0
        start = time.perf_counter()
        self._thread.join(timeout)
        if self._thread.is_alive() and self.pending is not None:
            self.pending = dataclasses.replace(self.pending, trajs=None, error=TimeoutError(
                f"the rollout engine did not finish the batch of step {self.pending.step} within {timeout:g} s "
                "after the update (train/ahead.py JOIN_TIMEOUT_S): it is hung or far slower than the update"))
        self._thread = None
        return time.perf_counter() - start

    def take(self) -> Ahead | None:
        """The finished batch (None when there is none); raises the error that stopped it."""
        self.join()
        ahead, self.pending = self.pending, None
        if ahead is not None and ahead.error is not None:
            raise ahead.error
        return ahead


def _current_cuda_device() -> int | None:
    """The calling thread's current CUDA device, None where CUDA is not in use."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return torch.cuda.current_device()


# ------------------------------------------------------------------------------ in checkpoints
def _json_default(value: Any) -> Any:
    """What JSON cannot hold in an env's info: arrays and tensors as lists, scalars as numbers,
    sets as sorted lists, anything else as its text (info only feeds metrics and logs)."""
    for name in ("tolist", "item"):  # numpy / torch arrays and scalars
        fn = getattr(value, name, None)
        if callable(fn):
            try:
                return fn()
            except (TypeError, ValueError):
                pass
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def ahead_to_json(ahead: Ahead) -> str:
    """A finished batch as the checkpoint's ahead.json (every field of every trajectory)."""
    if ahead.trajs is None:
        raise ValueError("only a finished batch is saved")
    data = {"step": ahead.step, "version": ahead.version, "seeds": list(ahead.seeds), "seconds": ahead.seconds,
            "trajs": [dataclasses.asdict(t) for t in ahead.trajs]}
    return json.dumps(data, default=_json_default)


def read_ahead(ckpt: Path, rank: int = 0) -> Ahead | None:
    """This process's share of the batch a checkpoint holds (None when it holds none)."""
    from ragen_cli.rollout.types import Trajectory, TurnRecord

    path = ckpt / AHEAD_FILE.format(rank=rank)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    trajs = []
    for t in data["trajs"]:
        t["turns"] = [TurnRecord(**turn) for turn in t["turns"]]
        trajs.append(Trajectory(**t))
    return Ahead(step=data["step"], version=data["version"], seeds=data["seeds"], trajs=trajs, seconds=data["seconds"])
