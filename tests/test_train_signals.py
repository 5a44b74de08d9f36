"""`ragen train` under SIGTERM (a scheduler's or `kill`'s stop) and under a terminal's Ctrl-C
(SIGINT to the whole foreground process group, vLLM's engine processes included): it finishes
the step, saves a checkpoint, writes its `end` event and exits 0. Real runs on the tiny model in
a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

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


def _group_alive(pgid: int) -> list[int]:
    """Pids of live (not zombie) processes in process group `pgid` (Linux /proc)."""
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if rest[0] != "Z" and int(rest[2]) == pgid:
            out.append(int(name))
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process groups from /proc (Linux)")
def test_ctrl_c_in_a_terminal_finishes_the_step_with_the_vllm_engine(tmp_path):
    pytest.importorskip("vllm")
    out = tmp_path / "runs"
    sets = [s for s in TINY if not s.startswith("rollout.backend=")] + [
        "rollout.backend=vllm", "model.lora=null", "train.steps=200", "checkpoint.every=0", f"output.dir={out}", "name=cc"]
    argv = [sys.executable, "-c", "from ragen_cli.cli import main; main()", "train", str(SPEC)]
    for s in sets:
        argv += ["--set", s]
    # a process group of its own, as a shell gives a job; the engine's processes start in it
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    metrics = out / "cc" / "metrics.jsonl"
    deadline = time.time() + 400
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    assert len(_group_alive(proc.pid)) >= 2  # the trainer and vLLM's engine
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    assert "Ctrl-C: finishing this step" in output and "EngineDeadError" not in output

    last = [json.loads(line)["step"] for line in metrics.read_text().splitlines()][-1]
    assert 1 <= last < 200
    events = [json.loads(line) for line in (out / "cc" / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["kind"] == "checkpoint"] == [last]
    end = events[-1]
    assert end["kind"] == "end" and end["interrupted"] is True and end["step"] == last
    deadline = time.time() + 30  # the trainer shut its engine down: nothing of the group is left
    while time.time() < deadline and _group_alive(proc.pid):
        time.sleep(0.5)
    assert _group_alive(proc.pid) == []
