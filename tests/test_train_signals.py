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


def train_past_step_one(out, name: str, sets: list[str], new_session: bool = False) -> subprocess.Popen:
    """`ragen train` of the bandit spec in a subprocess (its own process group if
    `new_session`, as a shell gives a job), returned once step 1 is logged."""
    argv = [sys.executable, "-c", "from ragen_cli.cli import main; main()", "train", str(SPEC)]
    for s in sets + ["train.steps=200", "checkpoint.every=0", f"output.dir={out}", f"name={name}"]:
        argv += ["--set", s]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=new_session, env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    metrics = out / name / "metrics.jsonl"
    deadline = time.time() + 400
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    return proc


def checkpointed_and_ended(run_dir) -> int:
    """The run's last step, after checking that it saved its one checkpoint there and ended
    interrupted."""
    last = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()][-1]
    assert 1 <= last < 200
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["kind"] == "checkpoint"] == [last]
    assert (run_dir / "checkpoints" / f"step-{last}" / "state.json").is_file()
    end = events[-1]
    assert end["kind"] == "end" and end["stopped"] is True and end["interrupted"] is True and end["step"] == last
    return last


def test_sigterm_checkpoints_and_exits_cleanly(tmp_path):
    out = tmp_path / "runs"
    proc = train_past_step_one(out, "sig", TINY + ["model.lora=null"])
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    assert "SIGTERM: finishing this step" in output
    checkpointed_and_ended(out / "sig")


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
    sets = [s for s in TINY if not s.startswith("rollout.backend=")] + ["rollout.backend=vllm", "model.lora=null"]
    proc = train_past_step_one(out, "cc", sets, new_session=True)
    assert len(_group_alive(proc.pid)) >= 2  # the trainer (vLLM's engine inside it) and its reaper
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    assert "Ctrl-C: finishing this step" in output and "EngineDeadError" not in output
    checkpointed_and_ended(out / "cc")
    deadline = time.time() + 30  # the trainer shut its engine down: nothing of the group is left
    while time.time() < deadline and _group_alive(proc.pid):
        time.sleep(0.5)
    assert _group_alive(proc.pid) == []
