"""A rank of a multi-node run that cannot see the run directory (not on a shared filesystem)
stops at once with exit 2 and a message naming its host, before any work."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from ragen_cli.train.worker import unshared_run_dir


def test_a_rank_that_sees_the_run_files_may_start(tmp_path):
    (tmp_path / "spec.yaml").write_text("name: x\n")
    assert "plan.json" in unshared_run_dir(tmp_path, "3", "node-b")
    (tmp_path / "plan.json").write_text("{}\n")
    assert unshared_run_dir(tmp_path, "3", "node-b") == ""


def test_the_worker_on_a_host_without_the_run_directory_exits_2(tmp_path):
    missing = tmp_path / "runs" / "r"  # what a second node sees when output.dir is local to the first
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
    proc = subprocess.run([sys.executable, "-m", "ragen_cli.train.worker", str(missing), "--local_rank=1"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"rank 1 on host {socket.gethostname()} cannot see spec.yaml, plan.json" in proc.stderr
    assert "filesystem that every node mounts at the same path" in proc.stderr
    assert "Traceback" not in proc.stderr
