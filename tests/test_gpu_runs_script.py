"""bench/gpu_runs.sh, the harness the GPU batches of the health corpus ran with: its usage
errors, and the deadline that keeps a lease's last call from being cut off mid-run."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_runs.sh"


def _run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300, **kw)


def test_usage_errors_exit_2(tmp_path):
    r = _run()
    assert r.returncode == 2 and "LIST CORPUS OUT" in r.stderr
    r = _run("a", "b", "c", "--fast")
    assert r.returncode == 2 and "unknown option --fast" in r.stderr


@pytest.mark.slow  # the SmolLM2 conversion (smollm2_dir), about 25 s on first use
def test_past_the_deadline_no_run_starts_and_the_summary_says_so(tmp_path, smollm2_dir):
    # every run needs 60 s of the deadline left to start: with --deadline 0 none does; comments
    # and blank lines are not runs; OUT still gets the summary and a tarball of CORPUS
    listing = tmp_path / "list.txt"
    listing.write_text("# a comment\n\nrun-a specs/bandit.yaml --set train.steps=1\nrun-b specs/larger.yaml\n")
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    corpus.mkdir()
    env = {**os.environ, "RUNS_DIR": str(tmp_path / "runs")}
    r = _run(str(listing), str(corpus), str(out), "--deadline", "0", "--python", sys.executable, env=env)
    assert r.returncode == 0, r.stderr
    summary = (out / "summary.txt").read_text()
    assert "not started: run-a (deadline)" in summary and "not started: run-b (deadline)" in summary
    assert "started run-" not in summary.replace("not started: run-", "")
    with tarfile.open(out / "gpu-runs.tgz") as tar:
        assert any(n.endswith("corpus") for n in tar.getnames())
