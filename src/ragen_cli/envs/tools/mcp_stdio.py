"""The stdio transport of an MCP server ragen starts: the `mcp` SDK's `stdio_client`, with a
limit on the length of a line.

The SDK's transport reads the server's stdout into a buffer until a newline, without a bound, so a
server that writes one giant line (a tool dumping a file, a bug) fills ragen's memory. Here a line
longer than `max_line_bytes` ends the connection: the server process is stopped, a note goes to its
log, and the session sees a closed connection, which `mcp_server.McpServer` treats as a dead server
(restart, error result). Otherwise this is the SDK's transport: the same environment whitelist
(`get_default_environment`), the server in its own process group, and its shutdown (stdin closed,
a grace period, then the whole group terminated and killed).
"""

from __future__ import annotations

import subprocess
from contextlib import asynccontextmanager, suppress
from typing import Any, AsyncIterator, Callable, TextIO

MAX_LINE_BYTES = 8 << 20  # one JSON-RPC message from a server: 8 MiB
GRACE_S = 2.0  # as the SDK's PROCESS_TERMINATION_TIMEOUT: time to exit after stdin closes


@asynccontextmanager
async def stdio_transport(argv: list[str], cwd: str, errlog: TextIO, max_line_bytes: int = MAX_LINE_BYTES,
                          on_break: Callable[[str], None] = lambda why: None) -> AsyncIterator[tuple[Any, Any]]:
    """Start `argv` in `cwd` (stderr to `errlog`) and yield the (read, write) streams of its
    newline-delimited JSON-RPC messages, as the SDK's `stdio_client` does. `on_break(why)` hears
    why the transport closed the connection itself."""
    import anyio
    import mcp_types as types
    from mcp.client.stdio import get_default_environment
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, cwd=cwd,
                                       env=get_default_environment(), start_new_session=True)
    read_send, read_stream = anyio.create_memory_object_stream(0)
    write_stream, write_recv = anyio.create_memory_object_stream(0)

    def message(line: bytes) -> Any:
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as err:  # the SDK's rule: a bad line is handed to the session as an error
            return err

    async def too_long() -> None:
        why = f"the server wrote a line of more than {max_line_bytes} bytes (the limit of one message)"
        on_break(why)
        errlog.write(f"\n[ragen] {why}; its connection was closed\n")
        errlog.flush()
        with suppress(ProcessLookupError):
            process.kill()

    async def reader() -> None:
        buffer = bytearray()
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with read_send:
                while True:
                    buffer += await process.stdout.receive(1 << 16)
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[:end + 1]
                        if len(line) > max_line_bytes:
                            return await too_long()
                        await read_send.send(message(line))
                    if len(buffer) > max_line_bytes:
                        return await too_long()

    async def writer() -> None:
        try:
            async with write_recv:
                async for session_message in write_recv:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()  # the session sees the connection end instead of waiting forever

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.aclose()
                with anyio.move_on_after(GRACE_S):
                    while process.returncode is None:
                        await anyio.sleep(0.01)
                if process.returncode is None:
                    await terminate_posix_process_tree(process, GRACE_S)
                for stream in (process.stdout, read_stream, write_stream, read_send, write_recv):
                    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await stream.aclose()
            tg.cancel_scope.cancel()
