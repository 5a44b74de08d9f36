"""Running a compiled job, for `ragen train` (train/commands.py) and the Python API (api.py):
lock the run directory and write its spec.yaml and plan.json (`prepare_run`), then run the
training loop in this process or the Plan's launch command (`run_job`). On a run whose nodes each
start their own ranks (`ragen train --node-rank R`), node 0 prepares the run directory and every
other node waits to see it (`join_run`) before it starts its ranks. Light imports only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragen_cli.compile.plan import Plan
    from ragen_cli.spec.models import RunSpec


class RunFailed(RuntimeError):
    """A multi-process run's launcher exited non-zero (its ranks' output says why); `code` is
    its exit code."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def prepare_run(spec: "RunSpec", plan: "Plan", run_dir: Path, resume: bool):
    """Lock the run directory (one writer at a time) and write its spec.yaml and plan.json;
    returns the lock, held until `.release()` (or this process ends)."""
    from ragen_cli.monitor.rundir import RunDir, lock_run_dir
    from ragen_cli.train.runtime_light import spec_yaml

    lock = lock_run_dir(run_dir)
    try:
        RunDir(run_dir).create(spec_yaml(spec), plan.to_json(), resume=resume)
    except BaseException:
        lock.release()
        raise
    return lock


class JoinFailed(RuntimeError):
    """A node other than node 0 cannot join the run directory node 0 prepares."""


JOIN_TIMEOUT_S = 900.0  # what node 0 may still do first: fetch or convert the model, compile, probe


def join_run(run_dir: Path, spec_text: str, resume: bool, node_rank: int,
             timeout_s: float = JOIN_TIMEOUT_S, poll_s: float = 1.0) -> None:
    """Wait until node 0 has written `run_dir`'s spec.yaml (the same text as this node's resolved
    spec, `spec_text`) and plan.json; raise `JoinFailed` saying why not.

    The run directory (output.dir / name) is the same path on every node only on a filesystem that
    every node mounts there; a directory that never appears is the usual sign that it is not. A
    new run refuses a directory that already trained (metrics or checkpoints: node 0 refuses it
    too, and this node's ranks would wait for node 0's forever); a spec.yaml that differs from this
    node's is an error on a new run (the nodes were given different specs or --set values) and is
    waited on when resuming (node 0 rewrites it from its own --set values)."""
    import time

    from ragen_cli.monitor.rundir import RunDir
    from ragen_cli.train.checkpoint import latest_checkpoint

    rundir = RunDir(run_dir)
    if not resume and (rundir.metrics_path.exists() or latest_checkpoint(rundir.checkpoints_dir) is not None):
        raise JoinFailed(f"run directory {run_dir} already trained; node 0 refuses it too. Resume it on every "
                         f"node (ragen train --resume {run_dir} --node-rank R) or choose another run name")
    deadline = time.monotonic() + timeout_s
    while True:
        written = rundir.spec_path.read_text() if rundir.spec_path.is_file() else None
        if written == spec_text and rundir.plan_path.is_file():
            return
        if written is not None and written != spec_text and not resume:
            raise JoinFailed(f"{rundir.spec_path} differs from this node's spec: every node runs the same spec "
                             "with the same --set values")
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    if written is None or written == spec_text:  # nothing yet, or spec.yaml without plan.json
        seen = rundir.spec_path if written is None else rundir.plan_path
        raise JoinFailed(f"node {node_rank} waited {timeout_s:.0f} s for node 0 to write {seen} and "
                         "never saw it: a run on several nodes needs its run directory (output.dir) on a filesystem "
                         "that every node mounts at the same path (NFS, Lustre, a cluster home directory); "
                         "start node 0 too, with the same spec")
    raise JoinFailed(f"node {node_rank} waited {timeout_s:.0f} s for {rundir.spec_path} to match this node's spec "
                     "(the same spec and --set values on every node)")


def run_job(spec: "RunSpec", plan: "Plan", run_dir: Path, resume: bool, quiet: bool = False,
            warm_start_only: bool = False) -> dict:
    """Run the compiled job: the training loop in this process for one process, the Plan's
    launch command (deepspeed launcher + ragen_cli.train.worker) for several, its launcher's INFO
    lines off where `quiet` (`ragen train` without --verbose). Returns the loop's summary (for a
    launched job: read back from the run directory)."""
    import os
    import subprocess
    import sys

    from ragen_cli.monitor.jsonl import read_jsonl
    from ragen_cli.monitor.rundir import RunDir

    if plan.launch.kind == "in-process":
        from ragen_cli.train.loop import train as train_loop

        return train_loop(spec, plan, run_dir, resume=resume, warm_start_only=warm_start_only)
    argv = [a.replace("{run_dir}", str(run_dir)) for a in plan.launch.argv] + (["--resume"] if resume else []) \
        + (["--warm-start-only"] if warm_start_only else [])
    local = Path(sys.executable).parent / argv[0]  # the launcher installed next to this Python
    argv[0] = str(local) if local.is_file() else argv[0]
    if quiet:
        from ragen_cli.quiet import quiet_launcher

        argv = quiet_launcher(argv)
    code = subprocess.run(argv, env={**os.environ, **plan.env}).returncode
    if code:
        raise RunFailed(code, f"{argv[0]} exited {code}; see the ranks' output and {run_dir}/events.jsonl")
    rows = RunDir(run_dir).read_metrics()
    events = run_dir / "events.jsonl"
    end = [e for e in (read_jsonl(events) if events.is_file() else []) if e.get("kind") == "end"]
    return {"step": rows[-1]["step"] if rows else 0, "stopped": bool(end and end[-1].get("stopped")),
            "metrics": rows[-1] if rows else {}}
