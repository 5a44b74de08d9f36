"""OpenEnv servers that ragen starts (`env.train.config.command` of the openenv adapter).

One server per (command, working directory) in a process, shared by every env object through a
reference count: the P x N episodes of a step (and validation's) are sessions on it, not servers
of their own. A server is started on 127.0.0.1 on a free port (the command's `{port}`), waited for
until GET /health answers, runs in its own process group with its output in a temporary log
file, and is stopped with its whole group (SIGTERM, then SIGKILL) when its last env is released
and `keep_alive_s` has passed, or at interpreter exit. A parent-death signal (Linux) stops it
when the trainer itself is killed (SIGKILL skips atexit).
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from ragen_cli.envs.base import EnvFailure

HOST = "127.0.0.1"


class EnvServerError(EnvFailure):
    """An OpenEnv server failed (did not start, died, timed out, answered garbage); the message
    names the server and, once an episode runs, the episode."""


class Server:
    """A server process ragen started, shared by `users` env objects."""

    def __init__(self, command: tuple[str, ...], cwd: str, keep_alive_s: float | None):
        self.command, self.cwd, self.keep_alive_s = command, cwd, keep_alive_s
        self.users, self.timer, self.owner = 0, None, os.getpid()
        self.proc: subprocess.Popen | None = None
        self.url = ""
        with tempfile.NamedTemporaryFile(prefix="ragen-openenv-", suffix=".log", delete=False) as f:
            self.log = f.name

    def describe(self) -> str:
        return f"OpenEnv server {self.url or '(not started)'} (command: {shlex.join(self.command)})"

    def start(self, timeout_s: float) -> None:
        for _ in range(3):  # the picked port taken before the server bound it: pick another
            port = _free_port()
            args = [a.replace("{port}", str(port)).replace("{host}", HOST).replace("{python}", sys.executable)
                    for a in self.command]
            self.url = f"http://{HOST}:{port}"
            try:
                with open(self.log, "ab") as log:
                    self.proc = subprocess.Popen(args, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=subprocess.STDOUT, start_new_session=True,
                                                 preexec_fn=_die_with_parent if _main_thread() else None)
            except OSError as err:  # no such program, or cwd
                raise EnvServerError(f"{self.describe()} could not start in {self.cwd}: {err}") from None
            if self._wait_healthy(timeout_s):
                return
            port_taken = "address already in use" in self.log_tail().lower()
            self.stop()
            if not port_taken:
                break
        raise EnvServerError(f"{self.describe()} did not answer GET /health within {timeout_s:g} s "
                             f"(start_timeout_s){self.exit_note()}; its output:\n{self.log_tail()}")

    def _wait_healthy(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                    if reply.status == 200:
                        return True
            except OSError:  # not listening yet (refused), or an HTTP error
                pass
            time.sleep(0.2)
        return False

    def exit_note(self) -> str:
        """' (its process exited with code c)' once the process is gone, else ''."""
        code = None if self.proc is None else self.proc.poll()
        return "" if code is None else f" (its process exited with code {code})"

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:]).rstrip()
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the process group: SIGTERM, SIGKILL after 5 s, and SIGKILL to what is left."""
        proc = self.proc
        if proc is None or os.getpid() != self.owner:  # a forked child does not own the server
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            _killpg(proc.pid, sig)
            try:
                proc.wait(5.0)
                break
            except subprocess.TimeoutExpired:
                continue
        _killpg(proc.pid, signal.SIGKILL)  # the group may outlive its leader (a worker it spawned)


_SERVERS: dict[tuple, Server] = {}
_LOCK = threading.RLock()  # re-entrant: a finalizer may release a server while this thread holds it


def acquire_server(command: tuple[str, ...], cwd: str, keep_alive_s: float | None, start_timeout_s: float) -> Server:
    """The started server for (command, cwd), starting it on first use; one more user."""
    key = (tuple(command), os.path.abspath(cwd or os.getcwd()))
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = Server(*key, keep_alive_s)
            try:
                server.start(start_timeout_s)
            except EnvServerError:
                _remove(server.log)  # its tail is in the message
                raise
            _SERVERS[key] = server
        elif server.proc.poll() is not None:
            raise EnvServerError(f"{server.describe()} is no longer running{server.exit_note()}; "
                                 f"its output:\n{server.log_tail()}")
        if server.timer is not None:
            server.timer.cancel()
            server.timer = None
        server.users += 1
        return server


def release_server(server: Server) -> None:
    """One user fewer; after the last, stop the server (after `keep_alive_s`; None: at exit)."""
    with _LOCK:
        server.users -= 1
        if server.users > 0 or server.keep_alive_s is None:
            return
        if server.keep_alive_s == 0:
            _drop(server)
        else:
            server.timer = threading.Timer(server.keep_alive_s, _stop_idle, (server,))
            server.timer.daemon = True
            server.timer.start()


def running_servers() -> list[Server]:
    """The servers this process started and has not stopped."""
    with _LOCK:
        return list(_SERVERS.values())


@atexit.register
def stop_servers() -> None:
    """Stop every server this process started."""
    with _LOCK:
        for server in list(_SERVERS.values()):
            _drop(server)


def _stop_idle(server: Server) -> None:
    with _LOCK:
        if server.users == 0:
            _drop(server)


def _drop(server: Server) -> None:
    for key, s in list(_SERVERS.items()):
        if s is server:
            del _SERVERS[key]
    if server.timer is not None:
        server.timer.cancel()
    server.stop()
    _remove(server.log)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


try:  # looked up here: the forked child only calls it
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _PRCTL = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (prctl PR_SET_PDEATHSIG). The
    signal follows the thread that forked, so it is only set when the main thread starts one."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)
