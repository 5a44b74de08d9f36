"""`ragen train` under SIGTERM (a scheduler's or `kill`'s stop): it finishes the step, saves a
checkpoint, writes its `end` event and exits 0. A real run on the tiny model in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_train_e2e import SPEC, TINY

pytestmark = pytest.mark.slow


def test_sigterm_checkpoints_and_exits_cleanly(tmp_path):
    out = tmp_path / "runs"
    sets = TINY + ["model.lora=null", "train.steps=200", "checkpoint.every=0", f"output.dir={out}", "name=sig"]
    argv = [sys.executable, "-c", "from ragen_cli.cli import main; main()", "train", str(SPEC)]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    metrics = out / "sig" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    assert "SIGTERM: finishing this step" in output

    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    last = steps[-1]
    assert 1 <= last < 200
    events = [json.loads(line) for line in (out / "sig" / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["kind"] == "checkpoint"] == [last]
    assert (out / "sig" / "checkpoints" / f"step-{last}" / "state.json").is_file()
    end = events[-1]
    assert end["kind"] == "end" and end["stopped"] is True and end["interrupted"] is True and end["step"] == last
