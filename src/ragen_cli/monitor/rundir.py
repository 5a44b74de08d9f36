"""The run directory: the contract between the trainer (writer), `ragen watch` and `ragen eval`.

Layout (docs/internals.md): `spec.yaml`, `plan.json`, `metrics.jsonl` (one object per step:
`step`, `time` and names from `METRICS`), `events.jsonl` (`step`, `time`, `kind`, ...),
`trajectories/step-<k>.jsonl` (one trajectory per line), `val_trajectories/step-<k>.jsonl` (every
validation episode at step k), `checkpoints/step-<k>/`.

After a resume the trainer repeats the steps after its checkpoint, so metrics.jsonl can hold a
step twice; `read_metrics()` keeps the last line of each step.

One `ragen train` at a time writes a run directory: `lock_run_dir` takes an exclusive `flock`
on `.train.lock` for the life of the process (the kernel frees it when the process dies, so a
crashed or killed run leaves nothing stuck); the file names the holder (pid, host, start).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from pathlib import Path

from ragen_cli.monitor.jsonl import JsonlTail, append_jsonl, read_jsonl, read_jsonl_checked, truncate_partial_tail
from ragen_cli.monitor.metrics import validate_metrics

EVENT_KINDS = ("start", "warm_start", "health", "intervention", "rollback", "checkpoint", "val", "end", "error")
_TRAJ_FILE = re.compile(r"^step-(\d+)\.jsonl$")


class RunDirError(Exception):
    """A run directory cannot be created or written as asked."""


class RunDirLocked(RunDirError):
    """Another live process holds the run directory's lock."""


LOCK_NAME = ".train.lock"


class MetricsTail(JsonlTail):
    """Incremental reader of a run's metrics.jsonl (see `JsonlTail`); lines without a step are
    named and skipped."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, check=step_problem)


def step_problem(record: dict) -> str | None:
    """Why a metrics.jsonl record cannot be placed on the step axis (None when it can)."""
    step = record.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and step >= 0:
        return None
    return "no step" if step is None else f"step {step!r} is not a whole number >= 0"


class RunDir:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    # ------------------------------------------------------------------ paths
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def spec_path(self) -> Path:
        return self.path / "spec.yaml"

    @property
    def plan_path(self) -> Path:
        return self.path / "plan.json"

    @property
    def trajectories_dir(self) -> Path:
        return self.path / "trajectories"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    def trajectories_path(self, step: int) -> Path:
        return self.trajectories_dir / f"step-{step}.jsonl"

    @property
    def val_trajectories_dir(self) -> Path:
        return self.path / "val_trajectories"

    def val_trajectories_path(self, step: int) -> Path:
        return self.val_trajectories_dir / f"step-{step}.jsonl"

    # ----------------------------------------------------------------- writers
    def create(self, spec_yaml_text: str, plan_json: dict | str, resume: bool = False) -> None:
        """Create the directory and write spec.yaml and plan.json.

        Refuses a directory that already holds files unless `resume` is true; on resume a
        half-written last line of metrics.jsonl / events.jsonl is cut off before appending.
        """
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path} exists and is not a directory")
        if self.path.is_dir() and any(p.name != LOCK_NAME for p in self.path.iterdir()) and not resume:
            raise RunDirError(
                f"run directory {self.path} already exists and is not empty; "
                "resume it (ragen train --resume) or choose another run name"
            )
        if resume and not self.path.is_dir():
            raise RunDirError(f"cannot resume {self.path}: no such run directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self.trajectories_dir.mkdir(exist_ok=True)
        plan_text = plan_json if isinstance(plan_json, str) else json.dumps(plan_json, indent=2)
        _write_atomic(self.spec_path, spec_yaml_text)
        _write_atomic(self.plan_path, plan_text if plan_text.endswith("\n") else plan_text + "\n")
        if resume:
            truncate_partial_tail(self.metrics_path)
            truncate_partial_tail(self.events_path)

    def write_metrics(self, step: int, metrics: dict[str, float | int | None], at: float | None = None) -> None:
        """Append one step's metrics (names from METRICS) as one line, flushed to disk.

        `at`: the line's `time` stamp (Unix seconds); default now.
        """
        problems = validate_metrics(metrics)
        if problems:
            raise RunDirError(f"step {step}: " + "; ".join(problems))
        append_jsonl(self.metrics_path, {"step": int(step), "time": time.time() if at is None else at, **metrics})

    def write_event(self, kind: str, step: int, at: float | None = None, **data: object) -> None:
        """Append one event (`start`, `health`, `intervention`, `rollback`, `checkpoint`, `val`, `end`, `error`).

        `at`: the event's `time` stamp (Unix seconds); default now.
        """
        if kind not in EVENT_KINDS:
            raise RunDirError(f"unknown event kind {kind!r}; expected one of {', '.join(EVENT_KINDS)}")
        clash = {"step", "time", "kind"} & data.keys()
        if clash:
            raise RunDirError(f"event data may not redefine {sorted(clash)}")
        stamp = time.time() if at is None else at
        append_jsonl(self.events_path, {"step": int(step), "time": stamp, "kind": kind, **data})

    def write_trajectories(self, step: int, trajectories: list[dict], validation: bool = False) -> None:
        """Write trajectories/step-<k>.jsonl (`validation`: val_trajectories/step-<k>.jsonl) at once
        (temp file + rename: readers never see half)."""
        path = self.val_trajectories_path(step) if validation else self.trajectories_path(step)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(t, separators=(",", ":")) + "\n" for t in trajectories)
        _write_atomic(path, text)

    # ----------------------------------------------------------------- readers
    def read_metrics(self) -> list[dict]:
        """One record per step, in step order; a step logged twice (resume) keeps its last line."""
        return self.read_metrics_checked()[0]

    def read_metrics_checked(self) -> tuple[list[dict], list[str]]:
        """(`read_metrics()`, the skipped lines named `FILE:LINE: why`)."""
        records, problems = read_jsonl_checked(self.metrics_path, step_problem)
        return dedupe_steps(records), problems

    def read_events(self) -> list[dict]:
        return read_jsonl(self.events_path)

    def read_trajectories(self, step: int) -> list[dict]:
        return read_jsonl(self.trajectories_path(step))

    def steps_with_trajectories(self) -> list[int]:
        try:
            names = [p.name for p in self.trajectories_dir.iterdir()]
        except (FileNotFoundError, NotADirectoryError):  # not yet, or the run was deleted
            return []
        return sorted(int(m.group(1)) for m in map(_TRAJ_FILE.match, names) if m)

    def read_spec_text(self) -> str | None:
        try:
            return self.spec_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def read_plan(self) -> dict | None:
        """plan.json as a dict; None when missing or not (yet) valid JSON."""
        try:
            plan = json.loads(self.plan_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return plan if isinstance(plan, dict) else None

    def tail_metrics(self) -> MetricsTail:
        return MetricsTail(self.metrics_path)

    def tail_events(self) -> JsonlTail:
        return JsonlTail(self.events_path)


class RunLock:
    """The held lock of a run directory (`lock_run_dir`); `release()` or process death frees it.

    `held` is False (and `note` says why) on a filesystem without `flock` (ENOLCK, e.g. some
    NFS mounts): the run goes on unguarded rather than not at all.
    """

    def __init__(self, path: Path, fd: int | None, note: str = "") -> None:
        self.path, self._fd, self.note = path, fd, note

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock; the file stays (deleting it would let a third process lock a new inode
        while a second still waits on the old one)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None


def lock_run_dir(path: str | os.PathLike) -> RunLock:
    """Take `path`'s writer lock (creating the directory); RunDirLocked names the live holder.

    Only the launching process (rank 0's parent, or the in-process trainer) takes it. The lock
    is not inherited by launched workers (Python opens files close-on-exec).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{path} exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(fd)
        os.close(fd)
        raise RunDirLocked(
            f"run directory {path} is in use by another ragen train ({holder}); wait for it to end "
            "or stop it (a run that crashed or was killed does not hold this lock)") from None
    except OSError as exc:
        os.close(fd)
        return RunLock(path, None, f"cannot lock {path / LOCK_NAME} ({exc.strerror}): "
                                   "nothing stops a second run from writing here")
    info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    return RunLock(path, fd)


def _lock_holder(fd: int) -> str:
    """'pid P on HOST since TIME' from a lock file's contents (as far as they can be read)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"null")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["started"])))
        return f"pid {int(info['pid'])} on {info['host']} since {when}"
    except (OSError, ValueError, TypeError, KeyError):
        return "its pid is not recorded yet"


def dedupe_steps(records: list[dict]) -> list[dict]:
    """Keep the last record of each `step` (records without an int step are dropped), by step."""
    by_step: dict[int, dict] = {}
    for rec in records:
        step = rec.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            by_step[step] = rec
    return [by_step[s] for s in sorted(by_step)]


def latest_run(parent: str | os.PathLike = "runs") -> Path | None:
    """The run directory under `parent` written to most recently (None when there is none)."""
    parent = Path(parent)
    if not parent.is_dir():
        return None
    best: tuple[float, Path] | None = None
    for d in parent.iterdir():
        stamps = [t for n in ("metrics.jsonl", "events.jsonl", "spec.yaml", "plan.json") if (t := _mtime(d / n))]
        if stamps and (best is None or max(stamps) > best[0]):
            best = (max(stamps), d)
    return best[1] if best else None


def _mtime(path: Path) -> float | None:
    """Modification time, None when the file is absent (or deleted while we look)."""
    try:
        return path.stat().st_mtime
    except (FileNotFoundError, NotADirectoryError):
        return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
