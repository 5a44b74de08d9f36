"""A hand-written MCP server over stdio (no SDK: every byte it sends is chosen here), for the
failure cases of tests/test_tools_limits.py:

    python tests/mcp_raw_server.py MODE STARTS_FILE

Each start appends a line to STARTS_FILE. Tools by MODE:
- `errors`: `lookup(key)` answers its first two calls with a JSON-RPC error response (-32602,
  InvalidParams), then the result `8`; `shaped()` returns structured content that fails its own
  outputSchema.
- `hang`: `hang()` never answers and the server reads nothing more (a hung server); `echo(text)`.
- `giant`: `dump(mib)` answers with a line of `mib` MiB; `echo(text)`.
- `badschema`: lists `broken`, whose inputSchema is not a valid JSON schema.
"""

from __future__ import annotations

import json
import os
import sys
import time

MODE, STARTS = sys.argv[1], sys.argv[2]
OBJECT = {"type": "object", "properties": {}}
TOOLS = {
    "errors": [{"name": "lookup", "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}},
               {"name": "shaped", "inputSchema": OBJECT,
                "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}],
    "hang": [{"name": "hang", "inputSchema": OBJECT},
             {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}],
    "giant": [{"name": "dump", "inputSchema": {"type": "object", "properties": {"mib": {"type": "integer"}}}},
              {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}],
    "badschema": [{"name": "broken", "inputSchema": {"type": "object", "properties": {"a": {"type": "integr"}}}}],
}[MODE]
calls = {"lookup": 0}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def answer(method: str, params: dict) -> dict:
    """The result of a request, or {"error": ...}."""
    if method == "initialize":
        return {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method != "tools/call":
        return {"error": {"code": -32601, "message": f"no method {method}"}}
    name, args = params["name"], params.get("arguments") or {}
    if name == "lookup":
        calls["lookup"] += 1
        if calls["lookup"] <= 2:
            return {"error": {"code": -32602, "message": f"no such key: {args.get('key')}"}}
        return text("8")
    if name == "shaped":
        return {"content": [{"type": "text", "text": "{\"n\": \"x\"}"}], "structuredContent": {"n": "x"}, "isError": False}
    if name == "hang":
        time.sleep(3600)
    if name == "dump":
        return text("x" * (args["mib"] << 20))
    return text(args.get("text", ""))


with open(STARTS, "a", encoding="utf-8") as f:
    f.write(f"{os.getpid()}\n")
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:  # a notification
        continue
    result = answer(message["method"], message.get("params") or {})
    if "error" in result:
        send({"jsonrpc": "2.0", "id": message["id"], "error": result["error"]})
    else:
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})
