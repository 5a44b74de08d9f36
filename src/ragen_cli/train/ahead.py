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
trainer's version minus that (`version_lag`). A batch more than k versions old (`is_stale`: only
after a rollback, since one batch is in flight) is dropped and the step rolls out again
(`rollout.stale: drop`, counted), or trained on with its correction (`correct`).

The batch in flight is part of the run's state: it is joined before every sync and checkpoint,
and a checkpoint after step t holds batch t+1 (`ahead-<rank>.json`; the weights that drew it are gone by
then), so a resumed run trains on exactly the trajectories the uninterrupted run did (an env's
info goes through JSON: values JSON cannot hold come back as lists or text). The last step rolls
one out too, so extending a finished run (`--resume` with more steps) continues exactly. A
failure in the engine's thread is raised when the next step takes the batch, after the step it
ran during has finished: an env's or a reward function's (`EnvFailure`) then saves that step and
stops the run, as it does in a sequential rollout; its seeds were not counted, so a resume
retries them. Only the engine's work runs in the thread: with several processes the
batch is shared (all_gather) in the main thread, where the update's collectives run.
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


def version_lag(sampled: int, current: int) -> int:
    """Policy versions between the weights that drew a trajectory and the trainer's now."""
    return current - sampled


def is_stale(sampled: int, current: int, max_staleness: int) -> bool:
    """A batch drawn more than `max_staleness` versions ago (`rollout.max_staleness`)."""
    return version_lag(sampled, current) > max_staleness


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

    def join(self) -> float:
        """Wait for the batch in flight; returns the seconds waited (0 when none is in flight)."""
        if self._thread is None:
            return 0.0
        start = time.perf_counter()
        self._thread.join()
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
