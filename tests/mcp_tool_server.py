"""An MCP server over stdio for tests/test_tools_mcp.py, built on the real `mcp` SDK's MCPServer:

    python tests/mcp_tool_server.py [DEATH_FILE]
    python tests/mcp_tool_server.py --http PORT      (Streamable HTTP at http://127.0.0.1:PORT/mcp)

Tools: `multiply(a, b)`, `lookup(key)` (a small table), `fail(reason)` (raises ToolError: an error result),
`nap(seconds)` (sleeps: for timeouts) and `crash()`, which ends the process without answering (a
server that dies). With DEATH_FILE, each start appends a line to it, so a test can count starts.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("ragen-test-tools")
TABLE = {"apple": 3, "pear": 5, "plum": 8}


@app.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers."""
    return a * b


@app.tool()
def lookup(key: str) -> int:
    """The value of a fruit in the table."""
    return TABLE[key]


@app.tool()
def fail(reason: str) -> str:
    """Fail with the given reason (the SDK's ToolError: an error result that carries the message)."""
    raise ToolError(reason)


@app.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "awake"


@app.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        app.run("streamable-http", port=int(sys.argv[2]))
    elif len(sys.argv) > 1:
        with open(sys.argv[1], "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        app.run("stdio")
    else:
        app.run("stdio")
