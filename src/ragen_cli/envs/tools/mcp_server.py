"""MCP servers as tools, over stdio or by URL, through the `mcp` SDK's `Client`.

A server is a command or a URL. ragen starts the server command (an argv list, or a string split like a shell's; no shell runs;
`{python}` is the Python ragen runs in) in the directory ragen runs in, lists its tools (the
`inputSchema` each declares becomes the tool's JSON schema) and calls them. One server per
(command, cwd) serves the whole process; it is stopped at exit, and a server left behind by a
killed trainer exits when its stdin closes (the stdio transport). A URL (`http://` or
`https://`) is a server somebody else runs, reached over Streamable HTTP: ragen connects to it
and neither starts nor stops it.

The SDK is asynchronous: each server has its own event loop in a daemon thread, holding the
`Client` open; calls from the rollout thread wait on it with a time limit.

Failures (docs/tools.md, "Limits"):
- the server answers with an error: a result it marks `isError`, a JSON-RPC error response (the
  SDK's `MCPError`, e.g. InvalidParams), a result that fails the tool's `outputSchema` or the
  protocol's shape: an error result for the model; the server is alive and keeps serving;
- a call past `timeout_s`: an error result; then the server is asked for its tools (`tools/list`,
  MCP's ping being deprecated) within `PROBE_TIMEOUT_S`. A server that answers was only slow and
  keeps serving; one that does not is hung, and is restarted as a dead one is, so the calls after
  it do not each wait out their own time limit;
- the server is gone (its process exited, the connection broke, it wrote a line longer than
  `mcp_stdio.MAX_LINE_BYTES`, it did not answer the probe): it is restarted (a URL: connected to
  again) and the call that found it gone gets an error result. Calls in flight on the same server
  at that moment share the one restart. The count of restarts resets whenever the server answers a
  call, so a server may die now and then over a long run; one that dies again before answering
  any call after its restart (`MAX_RESTARTS` in a row) raises `ToolServerError` (an `EnvFailure`)
  naming the command or URL (and a command's last output), and the run saves its last finished
  step and stops.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shlex
import shutil
import sys
import tempfile
import threading
from typing import Any

from ragen_cli.envs.base import EnvFailure

_GROUPS = getattr(__import__("builtins"), "BaseExceptionGroup", ())  # Python 3.11+ (3.10: shown as they are)
START_TIMEOUT_S = 120.0  # a Python server imports the SDK first (tens of seconds on a loaded machine)
PROBE_TIMEOUT_S = 5.0  # after a call timed out: how long a live server takes to list its tools
MAX_RESTARTS = 1  # restarts in a row without an answered call between them


class ToolServerError(EnvFailure):
    """An MCP server that cannot start, or died again after its restart before answering a call."""


def is_url(command: str | list[str]) -> bool:
    """Whether a server entry is a URL (a server ragen connects to) rather than a command."""
    return isinstance(command, str) and command.strip().lower().startswith(("http://", "https://"))


def server_url(command: str) -> str:
    """The URL of a server entry; ValueError when it has no host."""
    from urllib.parse import urlsplit

    url = command.strip()
    if not urlsplit(url).netloc:
        raise ValueError(f"MCP server URL {command!r} has no host (e.g. http://127.0.0.1:8000/mcp)")
    return url


def server_argv(command: str | list[str]) -> list[str]:
    """The argv of a server command; ValueError when it is empty or its program is not found."""
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    argv = [a.replace("{python}", sys.executable) for a in argv]
    if not argv:
        raise ValueError("an MCP server command is empty")
    if shutil.which(argv[0]) is None:
        raise ValueError(f"MCP server command {command!r}: program {argv[0]!r} not found")
    return argv


class McpServer:
    """One MCP server process and the client session to it (module docstring)."""

    def __init__(self, target: list[str] | str, cwd: str, start_timeout_s: float = START_TIMEOUT_S,
                 max_line_bytes: int | None = None):
        """`target`: a command's argv, or a URL (module docstring)."""
        from ragen_cli.envs.tools.mcp_stdio import MAX_LINE_BYTES

        self.url = target if isinstance(target, str) else None
        self.argv = [] if self.url else list(target)
        self.cwd, self.start_timeout_s = cwd, start_timeout_s
        self.max_line_bytes = max_line_bytes or MAX_LINE_BYTES
        self.label = self.url or shlex.join(self.argv)
        self.restarts = 0  # in a row, since the server last answered a call
        self.generation = 0  # starts so far: a failed call restarts only the session it used
        self._restarting = threading.Lock()
        self._broke = ""  # why the transport closed the connection itself (a line over the limit)
        self.tools: list[Any] = []  # mcp Tool objects (name, description, input_schema)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving = None  # concurrent Future of _serve
        self._client = None
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        import mcp.client.stdio  # noqa: F401 - imported here, not on the clock of the start timeout

        self.generation += 1
        self._broke = ""
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="ragen-mcp", daemon=True).start()
        self._loop, ready = loop, threading.Event()
        self._stop_event: asyncio.Event | None = None
        self._serving = asyncio.run_coroutine_threadsafe(self._serve(ready), loop)
        if not ready.wait(self.start_timeout_s):
            self.stop()
            raise ToolServerError(f"MCP server `{self.label}` did not answer within {self.start_timeout_s:g} s "
                                  f"(start_timeout_s){self._tail()}")
        if self._client is None:  # _serve ended before it listed the tools (it sets `ready` on its way out)
            try:
                err = self._serving.exception(10)
            except BaseException as waited:  # noqa: BLE001 - still ending, or cancelled
                err = waited
            while isinstance(err, _GROUPS) and err.exceptions:  # the SDK's task groups wrap the cause
                err = err.exceptions[0]
            self.stop()
            raise ToolServerError(f"MCP server `{self.label}` did not start: {type(err).__name__}: {err}{self._tail()}")

    async def _serve(self, ready: threading.Event) -> None:
        from mcp import Client

        from ragen_cli.envs.tools.mcp_stdio import stdio_transport

        self._stop_event = asyncio.Event()
        if self.url:  # Streamable HTTP
            transport: Any = self.url
        else:  # the SDK's stdio transport with a line limit, the server's stderr into our log
            transport = stdio_transport(self.argv, self.cwd, self._log, self.max_line_bytes, self._note)
        try:
            async with Client(transport, mode="legacy") as client:
                tools, cursor = [], None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.tools, self._client = tools, client
                ready.set()
                await self._stop_event.wait()
        finally:
            self._client = None
            ready.set()

    def stop(self) -> None:
        loop, serving = self._loop, self._serving
        self._loop = self._serving = self._client = None
        if loop is None:
            return
        if self._stop_event is not None:
            loop.call_soon_threadsafe(self._stop_event.set)
        try:
            serving.result(10)
        except BaseException:  # noqa: BLE001 - a dead server's session ends with the connection's error
            serving.cancel()
        loop.call_soon_threadsafe(loop.stop)

    def _tail(self, chars: int = 1500) -> str:
        try:
            self._log.flush()
            self._log.seek(0)
            text = self._log.read()[-chars:]
        except (OSError, ValueError):
            return ""
        return f"; its last output:\n{text}" if text.strip() else ""

    # ------------------------------------------------------------------ calls
    def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> tuple[str, bool]:
        """-> (result text, is_error). Every failure but a dead server twice in a row is an error
        result (module docstring)."""
        with self._restarting:  # a restart in progress: wait for the new session
            client, loop, serving, generation = self._client, self._loop, self._serving, self.generation
        if client is None or loop is None or serving is None or serving.done():
            return self._died(f"MCP server exited before the call to {name}", generation)
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(client.call_tool(name, arguments), timeout_s), loop)
        try:
            result = future.result(timeout_s + 10)
        except (TimeoutError, asyncio.TimeoutError):
            future.cancel()
            timed_out = f"{name} timed out after {timeout_s:g} s"
            if self._answers(client, loop):
                return f"Error: {timed_out}", True
            return self._died(f"{timed_out}, and the server did not answer within {PROBE_TIMEOUT_S:g} s after it",
                              generation)
        except Exception as err:  # noqa: BLE001 - an answered error, or a dead server
            if self._alive_after(err, client, loop, serving):
                self.restarts = 0
                return f"Error: {name} failed: {err_text(err)}", True
            why = f": {self._broke}" if self._broke else ""
            return self._died(f"MCP server failed during the call to {name} ({type(err).__name__}: {err}){why}",
                              generation)
        self.restarts = 0
        return result_text(result), bool(result.is_error)

    def _alive_after(self, err: Exception, client: Any, loop: asyncio.AbstractEventLoop, serving: Any) -> bool:
        """Whether the server answered a failed call and still serves (`answered_error`). Over HTTP
        an error response may come from a server that lost this session (restarted behind the
        URL: "Session not found"), so there the server must also list its tools."""
        if not answered_error(err) or serving.done():
            return False
        return not self.url or self._answers(client, loop)

    def _note(self, why: str) -> None:
        self._broke = why

    def _answers(self, client: Any, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether the server lists its tools within `PROBE_TIMEOUT_S` (it is alive and not hung)."""
        probe = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(client.list_tools(cache_mode="bypass"), PROBE_TIMEOUT_S), loop)
        try:
            probe.result(PROBE_TIMEOUT_S + 5)
            return True
        except BaseException:  # noqa: BLE001 - no answer in time, or no connection: not serving
            probe.cancel()
            return False

    def _died(self, what: str, generation: int) -> tuple[str, bool]:
        """Restart the server (once for all the calls that found generation `generation` gone)."""
        restarted = f"; the server was {'connected to again' if self.url else 'restarted'}"
        with self._restarting:
            if self.generation != generation and self._client is not None:  # another call restarted it
                return f"Error: {what}{restarted}", True
            tail = self._tail()
            if self.restarts >= MAX_RESTARTS:
                self.stop()
                again = "reconnect" if self.url else "restart"
                raise ToolServerError(f"MCP server `{self.label}` died again after its one {again}, before answering "
                                      f"a call: {what}{tail}")
            self.restarts += 1
            self.stop()
            try:
                self.start()
            except ToolServerError as err:
                raise ToolServerError(f"{err} (restarting it after: {what})") from None
        return f"Error: {what}{restarted}", True


def answered_error(err: BaseException) -> bool:
    """Whether a failed call was answered by a live server: a JSON-RPC error response (the SDK's
    `MCPError` with any code but a closed connection or its own read timeout), or a result the SDK
    refused (`RuntimeError` for one that fails the tool's outputSchema, pydantic's
    `ValidationError` for one of the wrong shape). Anything else is a broken connection."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
    from pydantic import ValidationError

    if isinstance(err, MCPError):
        return err.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
    return isinstance(err, (RuntimeError, ValidationError))


def err_text(err: BaseException) -> str:
    """An answered error as the model reads it: a JSON-RPC error with its code."""
    from mcp.shared.exceptions import MCPError

    return f"{err.message} (JSON-RPC error {err.code})" if isinstance(err, MCPError) else str(err).split("\n")[0]


def result_text(result: Any) -> str:
    """The text of a `CallToolResult`: its text blocks joined; structured content as JSON when the
    result has no text; other blocks (images, resources) named by type."""
    parts = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


_SERVERS: dict[tuple[tuple[str, ...], str], McpServer] = {}  # (argv or (url,), cwd or "")
_LOCK = threading.Lock()


def server_for(command: str | list[str], start_timeout_s: float = START_TIMEOUT_S) -> McpServer:
    """The running server of `command` in the current directory (or the one at a URL), started
    (connected to) on first use."""
    target: list[str] | str = server_url(command) if is_url(command) else server_argv(command)
    key = ((target,) if isinstance(target, str) else tuple(target), "" if isinstance(target, str) else os.getcwd())
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = McpServer(target, os.getcwd(), start_timeout_s)
            server.start()
            _SERVERS[key] = server
        return server


@atexit.register
def stop_all() -> None:
    """Stop every server this process started."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()
