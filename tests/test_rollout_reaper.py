"""The reaper (rollout/reaper.py): an owner's child processes end when the owner is SIGKILLed
(what vLLM's engine processes did not do, issue 21), and outlive nothing on a clean exit.
Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

OWNER = r"""
import subprocess, sys, time
from ragen_cli.rollout.reaper import start_reaper
start_reaper(interval=0.2, grace=1.0)
# a child that ignores SIGTERM (SIGKILL must follow) and a grandchild in another session
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
grand = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; p = subprocess.Popen(['sleep', '600'], start_new_session=True); print(p.pid, flush=True); time.sleep(600)"],
    stdout=subprocess.PIPE, text=True)
print(child.pid, grand.pid, grand.stdout.readline().strip(), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for_reaper(owner: int, seconds: float = 60.0) -> int | None:
    """The pid of `owner`'s reaper child once it sleeps in its loop (its interpreter started and
    its first scan done), or None after `seconds` (a hang guard, not a timing bound)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        for pid in children(owner):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
                syscall = open(f"/proc/{pid}/syscall").read().split()[0]
            except (OSError, IndexError):
                continue
            # the reaper is `python -c SCRIPT OWNER INTERVAL GRACE` (rollout/reaper.py); asleep in
            # time.sleep: syscall 230 (clock_nanosleep, x86_64) or 101 (nanosleep, aarch64)
            argv = cmd.split(b"\0")
            if len(argv) > 3 and argv[1] == b"-c" and argv[3] == str(owner).encode() and syscall in ("230", "101"):
                return pid
        time.sleep(0.05)
    return None


def left_after(pids: list[int], seconds: float) -> list[int]:
    """The `pids` still alive after waiting up to `seconds` for them to end; those are then
    killed, so a failing test leaves nothing behind."""
    deadline = time.time() + seconds
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    return left


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the reaper reads /proc (Linux)")
def test_children_end_when_the_owner_is_sigkilled():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    pids = [int(x) for x in owner.stdout.readline().split()]
    assert len(pids) == 3 and all(alive(p) for p in pids)
    # the reaper (interval 0.2 s) must have noted them: bound by work, wait until it runs (its
    # Python started, so it scans every 0.2 s), then 5 intervals more for a loaded machine
    reaper = _wait_for_reaper(owner.pid)
    assert reaper is not None, "the reaper did not start"
    time.sleep(1.0)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert not left_after(pids, 10.0)


def test_a_clean_owner_leaves_nothing_and_the_reaper_ends():
    code = ("from ragen_cli.rollout.reaper import start_reaper\n"
            "r = start_reaper(interval=0.2, grace=0.5)\nprint(r.pid, flush=True)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    reaper = int(p.stdout.strip())
    deadline = time.time() + 10
    while time.time() < deadline and alive(reaper):
        time.sleep(0.1)
    assert not alive(reaper)


VLLM_OWNER = r"""
import os, sys, time
from ragen_cli.rollout.vllm_backend import VLLMBackend
b = VLLMBackend(sys.argv[1], "float32", max_model_len=512, seed=0, kv_cache_gib=1)
print("READY", flush=True)
time.sleep(600)
"""


def children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the reaper reads /proc (Linux)")
def test_vllm_engine_processes_end_when_the_trainer_is_sigkilled(tiny_model_dir):
    owner = subprocess.Popen([sys.executable, "-c", VLLM_OWNER, str(tiny_model_dir)], stdout=subprocess.PIPE,
                             text=True)
    try:
        while (line := owner.stdout.readline()) and line.strip() != "READY":  # vLLM logs to stdout too
            pass
        assert line.strip() == "READY"
        engine = [p for p in children(owner.pid)]
        tree = engine + [g for p in engine for g in children(p)]
        assert len(tree) >= 2  # the reaper and vLLM's engine core, at least
        # the reaper notes the tree every second once it runs: wait until it runs, then 3 intervals
        assert _wait_for_reaper(owner.pid) is not None, "the reaper did not start"
        time.sleep(3.0)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert not left_after(tree, 20.0)


def _sigblk(text: str) -> int:
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith("SigBlk")), 16)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads signal masks from /proc (Linux)")
def test_children_started_in_ctrl_c_spared_never_see_sigint():
    from multiprocessing import resource_tracker

    from ragen_cli.rollout.reaper import ctrl_c_spared

    show = [sys.executable, "-c", "print(open('/proc/self/status').read())"]
    before = _sigblk(open("/proc/self/status").read())
    with ctrl_c_spared():
        resource_tracker.ensure_running()  # what vLLM's spawn does: must not undo the block
        inside = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    after = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    sigint = 1 << (signal.SIGINT - 1)  # signal 2: bit 1 of the mask, 0x2
    assert _sigblk(inside) & sigint
    assert not _sigblk(after) & sigint and _sigblk(open("/proc/self/status").read()) == before
