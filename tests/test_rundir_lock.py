"""One writer per run directory (issue 38, section 3): a second `ragen train` into a directory
another live process holds exits 2 naming the directory and the holder's pid and host; a lock
left by a process killed with SIGKILL does not block (the kernel drops a dead process's flock)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.monitor.rundir import LOCK_NAME, RunDir, RunDirLocked, lock_run_dir

SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
HOLD = ("import sys; from ragen_cli.monitor.rundir import lock_run_dir; lock = lock_run_dir(sys.argv[1]); "
        "print('locked', flush=True); sys.stdin.read()")  # holds the lock until stdin closes
TRY = ("import sys; from ragen_cli.monitor.rundir import RunDirLocked, lock_run_dir\n"
       "try:\n    lock_run_dir(sys.argv[1])\nexcept RunDirLocked as exc:\n    print(exc); sys.exit(3)\n")


@pytest.fixture
def holder(tmp_path):
    """A separate live process holding the lock of tmp_path/out/r."""
    run = tmp_path / "out" / "r"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    yield proc, run
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_second_train_into_a_held_run_directory_exits_2_naming_the_holder(holder, tmp_path, tiny_model_dir):
    proc, run = holder
    sets = ["model.name=tiny-random", f"output.dir={run.parent}", "name=r"]
    result = CliRunner().invoke(app, ["train", str(SPEC)] + [x for s in sets for x in ("--set", s)])
    assert result.exit_code == 2, result.output
    assert f"run directory {run} is in use by another ragen train (pid {proc.pid} on {socket.gethostname()} since" \
        in result.output
    assert "Traceback" not in result.output
    assert [p.name for p in run.iterdir()] == [LOCK_NAME]  # nothing written: no spec.yaml, no plan.json


def test_a_second_process_cannot_lock_while_the_first_lives_and_can_after_a_kill_9(holder):
    proc, run = holder
    other = subprocess.run([sys.executable, "-c", TRY, str(run)], capture_output=True, text=True, timeout=60)
    assert other.returncode == 3 and f"pid {proc.pid}" in other.stdout, other.stdout + other.stderr
    proc.send_signal(signal.SIGKILL)  # no chance to release: the kernel frees the flock at death
    proc.wait()
    lock = lock_run_dir(run)  # not stuck
    try:
        assert lock.held
        assert json.loads((run / LOCK_NAME).read_text())["pid"] != proc.pid  # now names this process
        refused = subprocess.run([sys.executable, "-c", TRY, str(run)], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 3
    finally:
        lock.release()
    lock_run_dir(run).release()  # released: free again


def test_a_new_run_directory_holding_only_its_lock_is_created(tmp_path):
    lock = lock_run_dir(tmp_path / "new")
    RunDir(tmp_path / "new").create("name: new\n", {"steps": 1})  # the lock file is not "not empty"
    assert (tmp_path / "new" / "spec.yaml").read_text() == "name: new\n"
    with pytest.raises(RunDirLocked):  # the same process, a second open: refused too
        lock_run_dir(tmp_path / "new")
    lock.release()
