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

Failures: a call past `timeout_s` and a result the server marks `isError` are error results for
the model. A server that exits (or whose connection breaks) is restarted once (a URL: connected to
once more), and the call that found it gone is an error result; when it dies again
`ToolServerError` (an `EnvFailure`) names the command or URL (and a command's last output), and
the run saves its last finished step and stops.
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


class ToolServerError(EnvFailure):
    """An MCP server that cannot start, or died again after its one restart."""


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

    def __init__(self, target: list[str] | str, cwd: str, start_timeout_s: float = START_TIMEOUT_S):
        """`target`: a command's argv, or a URL (module docstring)."""
        self.url = target if isinstance(target, str) else None
        self.argv = [] if self.url else list(target)
        self.cwd, self.start_timeout_s = cwd, start_timeout_s
        self.label = self.url or shlex.join(self.argv)
        self.restarts = 0
        self.tools: list[Any] = []  # mcp Tool objects (name, description, input_schema)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving = None  # concurrent Future of _serve
        self._client = None
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        import mcp.client.stdio  # noqa: F401 - imported here, not on the clock of the start timeout

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
        from mcp.client.stdio import StdioServerParameters, stdio_client

        self._stop_event = asyncio.Event()
        if self.url:  # Streamable HTTP
            transport: Any = self.url
        else:  # the stdio transport with the server's stderr into our log (Client's default is our stderr)
            params = StdioServerParameters(command=self.argv[0], args=self.argv[1:], cwd=self.cwd)
            transport = stdio_client(params, errlog=self._log)
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
        """-> (result text, is_error). Restarts a dead server once (module docstring)."""
        client, loop = self._client, self._loop
        if client is None or loop is None or self._serving is None or self._serving.done():
            return self._died(f"MCP server exited before the call to {name}")
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(client.call_tool(name, arguments), timeout_s), loop)
        try:
            result = future.result(timeout_s + 10)
        except (TimeoutError, asyncio.TimeoutError):
            future.cancel()
            return f"Error: {name} timed out after {timeout_s:g} s", True
        except Exception as err:  # noqa: BLE001 - a broken connection: the server is gone
            return self._died(f"MCP server failed during the call to {name} ({type(err).__name__}: {err})")
        return result_text(result), bool(result.is_error)

    def _died(self, what: str) -> tuple[str, bool]:
        tail = self._tail()
        if self.restarts >= 1:
            self.stop()
            again = "reconnect" if self.url else "restart"
            raise ToolServerError(f"MCP server `{self.label}` died again after its one {again}: {what}{tail}")
        self.restarts += 1
        self.stop()
        self.start()
        return f"Error: {what}; the server was {'connected to again' if self.url else 'restarted'}", True


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
