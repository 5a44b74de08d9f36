"""Child processes end with their owner, even when the owner is killed with SIGKILL.

vLLM runs its engine in processes of its own. When the trainer is SIGKILLed (by a user, a
scheduler or the OOM killer) nothing in it runs any more, so those processes keep running and
keep their memory. A watchdog *inside* vLLM's processes was tried and reverted (it made vLLM
abort at exit under pytest). This one lives outside: `start_reaper()` starts a small
stdlib-only process in a session of its own (a Ctrl-C to the terminal does not reach it). Every
`interval` seconds it notes the owner's descendants and checks that the owner still runs (same
pid and start time, not a zombie); once it does not (it ended, however it ended), the reaper
sends SIGTERM to the descendants it saw that are still alive, SIGKILL after `grace` seconds,
and exits. (A pipe's end-of-file would not do: vLLM forks, and a forked child keeps the owner's
end of the pipe open.) The owner's own clean shutdown closes the engine first, so the reaper
then finds nothing left to do.

Linux only (/proc); elsewhere `start_reaper` does nothing and returns None.

`ctrl_c_spared()` keeps the engine's processes out of a terminal's Ctrl-C. A terminal sends
SIGINT to its whole foreground process group, and vLLM's EngineCore shuts down on SIGINT, so
the trainer, which answers Ctrl-C by finishing its step and saving a checkpoint, lost its engine
mid-step and ended with EngineDeadError and no checkpoint. Processes started inside the block
inherit a signal mask with SIGINT blocked (kept across fork and exec, whichever way vLLM starts
them; on CPU it spawns), so they never see it; the trainer alone gets the Ctrl-C and shuts the
engine down itself (SIGTERM), and the reaper ends them if it cannot.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager

_SCRIPT = r"""
import os, signal, sys, time

owner, interval, grace = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
me = os.getpid()

def stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1]), rest[19]  # state, ppid, start time (pid reuse guard)
    except (OSError, IndexError, ValueError):
        return None

def descendants(root):
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            s = stat(int(name))
            if s:
                table[int(name)] = s
    out, frontier = {}, {root}
    while frontier:
        nxt = {pid for pid, (_, ppid, _) in table.items() if ppid in frontier and pid not in out}
        out.update({pid: table[pid][2] for pid in nxt})
        frontier = nxt
    return out

first = stat(owner)
seen = {}
while first is not None:
    seen.update(descendants(owner))
    now = stat(owner)
    if now is None or now[0] == "Z" or now[2] != first[2]:
        break
    time.sleep(interval)

def alive(pid, start):
    s = stat(pid)
    return s is not None and s[0] != "Z" and s[2] == start

for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
    left = {pid: st for pid, st in seen.items() if alive(pid, st)}
    for pid in left:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    end = time.time() + wait
    while wait and time.time() < end and any(alive(p, s) for p, s in left.items()):
        time.sleep(0.1)
"""


_STARTED: dict[int, subprocess.Popen] = {}  # owner pid -> its reaper (one per process)


def start_reaper(interval: float = 1.0, grace: float = 5.0) -> subprocess.Popen | None:
    """Start this process's reaper (see the module docstring), once per process; None where
    there is no /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    me = os.getpid()
    if me in _STARTED and _STARTED[me].poll() is None:
        return _STARTED[me]
    _STARTED[me] = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(me), str(interval), str(grace)],
                                    stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    return _STARTED[me]


@contextmanager
def ctrl_c_spared():
    """Processes started inside this block never receive SIGINT (see the module docstring); a
    Ctrl-C that reaches the calling thread meanwhile is delivered when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # starting, it unblocks SIGINT in this thread: start it first
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
