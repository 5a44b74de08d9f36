"""kill -9 at a random moment of a real run (issue 21): `ragen train` on tiny-random (real
DeepSpeed engine, HF rollouts, a checkpoint every step) is SIGKILLed at a moment drawn at random
over its whole life, checkpoint writes included; then the run directory is still readable,
`ragen train --resume` exits 0 and ends exactly where an uninterrupted run ends (same
trajectories, same weights), and no process of the run is left. The drawn moment is printed in
any failure message, so a failing moment can be replayed with RAGEN_KILL_AT=seconds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_train_e2e import SPEC, TINY, safetensors_state

pytestmark = pytest.mark.slow
RAGEN = Path(sys.executable).parent / "ragen"
SETS = TINY + ["model.lora=null", "train.steps=4"]


def train_cmd(out: Path, name: str) -> list[str]:
    sets = SETS + [f"output.dir={out}", f"name={name}"]
    return [str(RAGEN), "train", str(SPEC)] + [x for s in sets for x in ("--set", s)]


def descendants_of(pid: int) -> list[int]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
                if rest[0] != "Z":
                    table[int(name)] = int(rest[1])
            except (OSError, ValueError, IndexError):
                pass
    out, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in table.items() if pp in frontier}
        out += sorted(frontier)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_kill_9_at_a_random_moment_then_resume_is_exact(tmp_path):
    import torch

    from ragen_cli.eval.checkpoint import load_checkpoint
    from ragen_cli.monitor.replay import replay

    start = time.perf_counter()
    ref = subprocess.run(train_cmd(tmp_path, "ref"), capture_output=True, text=True, timeout=900)
    assert ref.returncode == 0, ref.stderr[-2000:]
    life = time.perf_counter() - start
    at = float(os.environ.get("RAGEN_KILL_AT") or random.uniform(0.1, 0.95) * life)
    why = f"(killed at {at:.1f} s of a {life:.1f} s run; replay with RAGEN_KILL_AT={at:.1f})"

    victim = subprocess.Popen(train_cmd(tmp_path, "k"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(at)
    tree = descendants_of(victim.pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    run = tmp_path / "k"
    if (run / "metrics.jsonl").exists():  # readable whatever the moment
        replay(run)
    for ckpt in sorted((run / "checkpoints").glob("step-*")) if (run / "checkpoints").is_dir() else []:
        load_checkpoint(ckpt)  # every complete checkpoint loads whole

    resumed = subprocess.run([str(RAGEN), "train", "--resume", str(run)], capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, f"{why}\n{resumed.stderr[-2000:]}"
    for step in (3, 4):
        name = f"trajectories/step-{step}.jsonl"
        assert (run / name).read_text() == (tmp_path / "ref" / name).read_text(), f"{name} differs {why}"
    wa = safetensors_state(run / "checkpoints" / "step-4" / "model")
    wb = safetensors_state(tmp_path / "ref" / "checkpoints" / "step-4" / "model")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), f"weights differ {why}"
    time.sleep(1.0)
    left = [p for p in tree if alive(p) and p not in descendants_of(os.getpid())]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"processes left {why}"
