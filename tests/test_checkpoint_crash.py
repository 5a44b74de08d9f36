"""Checkpoint writes under kill -9 and a full disk (issue 38, section 3).

The code under test is `train.checkpoint.save` itself, run in other processes with stand-in
engines that write what DeepSpeed and transformers write (tests/checkpoint_saver.py). A saver
process is SIGKILLed at a random point of one of its saves, 25 times; after each kill every
`step-*` directory is whole and `latest_checkpoint` is the newest save that finished (or the
one in flight, if it got renamed in). The seed of the kill moments is RAGEN_KILL_SEED (default
38).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoint_saver import KEEP, save_step
from ragen_cli.train.checkpoint import checkpoint_problems, latest_checkpoint, list_checkpoints
from ragen_cli.train.rng import read_rng

SAVER = str(Path(__file__).with_name("checkpoint_saver.py"))


def _whole(ckpt: Path) -> int:
    """The step of a checkpoint that loads: no problems, rng.pt readable, state.json's step."""
    assert checkpoint_problems(ckpt) == [], ckpt
    assert read_rng(ckpt / "rng.pt")["torch"].numel() > 0
    step = json.loads((ckpt / "state.json").read_text())["step"]
    assert ckpt.name == f"step-{step}"
    return step


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


@pytest.mark.slow
def test_kill_9_at_random_moments_of_saves_leaves_the_newest_complete_checkpoint(tmp_path, tiny_model_dir):
    root, log = tmp_path / "checkpoints", tmp_path / "saves.log"
    rng = random.Random(int(os.environ.get("RAGEN_KILL_SEED", "38")))
    server = subprocess.Popen([sys.executable, SAVER, "serve", str(root), str(tiny_model_dir), str(log)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    save_step(tmp_path / "reference", 1, tiny_model_dir)  # how long one save takes on this machine now
    one_save = time.perf_counter() - t0
    first, finished, steps, lost = 1, 0, [], set()
    try:
        for kill in range(25):
            lines = _lines(log)
            server.stdin.write(f"{first}\n")
            server.stdin.flush()
            pid = int(server.stdout.readline())
            # kill during this life's m-th save (m = 1..3), at a random point of it: bound by the
            # work done, not by wall time, so a loaded machine moves the moments, not the coverage
            m = rng.randint(1, 3)
            for _ in range(6000):
                if sum(line.startswith("start") for line in _lines(log)[len(lines):]) >= m:
                    break
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 1.5 * one_save))
            os.kill(pid, signal.SIGKILL)
            for _ in range(500):  # reaped by the server at once; bounded wait, not a timing bound
                if _gone(pid):
                    break
                time.sleep(0.01)
            assert _gone(pid)
            events = [line.split() for line in _lines(log)]
            done = sorted({int(k) for what, k in events if what == "done"} - lost)
            started = [int(k) for what, k in events if what == "start"]
            in_flight = started[-1] if events and events[-1][0] == "start" else None
            steps = [_whole(p) for _, p in list_checkpoints(root)]  # none is a partial one taken as valid
            latest = latest_checkpoint(root)
            newest = _whole(latest) if latest else None
            # nothing that finished is lost: the newest is at least the last finished save (a
            # save killed after its rename but before its `done` line may be newer still)...
            floor = done[-1] if done else None
            if in_flight is not None and done and in_flight == done[-1]:
                # ...except while step k is saved again: between renaming the old step-k aside
                # and the new one in, step-k is absent and the one before it is the newest
                floor = done[-2] if len(done) > 1 else None
            assert floor is None or (newest is not None and newest >= floor), (kill, newest, floor, steps)
            assert newest is None or newest in started
            if in_flight is not None and done and in_flight == done[-1] and newest != in_flight:
                lost.add(in_flight)  # that window it was: the next lives go on from later steps
            finished = len(done)
            first = (started[-1] + 1) if started else first  # the next life goes on from a later step
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    assert finished >= 10  # the kills landed among many finished saves, not only in the first ones
    save_step(root, first, tiny_model_dir)  # a save after the kills clears what they left
    names = sorted(p.name for p in root.iterdir())
    assert names == sorted(f"step-{k}" for k in sorted({*steps, first})[-KEEP:]), names


def test_saving_a_step_again_replaces_it_whole_and_clears_leftovers(tmp_path, tiny_model_dir):
    root = tmp_path / "checkpoints"
    save_step(root, 3, tiny_model_dir)
    (root / ".tmp-step-9").mkdir()  # left by a save killed in an earlier life of the run
    (root / ".old-step-1").mkdir()  # left by a prune killed mid-delete
    path = save_step(root, 3, tiny_model_dir)
    assert _whole(path) == 3 and sorted(p.name for p in root.iterdir()) == ["step-3"]


@pytest.mark.parametrize("limit, cause", [
    (1 << 20, "RuntimeError"),  # torch.save of the 2 MB DeepSpeed file fails (torch's own writer error)
    (8 << 20, "OSError: [Errno 27] File too large"),  # the 13 MB weights copy fails
])
def test_a_file_size_limit_during_a_save_is_a_clear_error_and_keeps_the_previous(tmp_path, tiny_model_dir, limit,
                                                                                  cause):
    root = tmp_path / "checkpoints"
    save_step(root, 1, tiny_model_dir)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    out = subprocess.run([sys.executable, SAVER, "save-limited", str(root), str(tiny_model_dir), "2", str(limit)],
                         capture_output=True, text=True, timeout=120).stdout.strip()
    assert out.startswith(f"CheckpointWriteError: checkpoint step-2 could not be written to {root} ({cause}"), out
    assert "the newest complete checkpoint, step-1, is intact; " in out
    assert out.endswith(f"files limited to {limit} bytes (ulimit -f): free space or raise the limit, then resume "
                        "(ragen train --resume)"), out
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # no .tmp-step-2 left
    assert latest_checkpoint(root) == root / "step-1" and _whole(root / "step-1") == 1
