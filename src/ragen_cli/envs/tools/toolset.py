"""The tools of one env config by name: Python functions and the tools of MCP servers, their
JSON schemas (what the chat template renders), the check of a call against its tool's schema, and
the call itself, whose failures become error results for the model.

A call is run with exactly the arguments the model wrote, after `jsonschema` checked them against
the tool's schema: an unknown tool or arguments that do not fit (a missing required argument, an
unknown one where the schema allows none, a wrong type) make the call invalid, and it is not run.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ragen_cli.envs.tools.formats import Call, ToolCallError
from ragen_cli.envs.tools.functions import PyTool, ToolTimeout, load_py_tool, run_with_timeout

_NAME = re.compile(r"[A-Za-z0-9_.:\-]+")  # also the metric name's rule (episode/tool_calls/<fn>)


@dataclass
class Toolset:
    schemas: list[dict] = field(default_factory=list)
    py: dict[str, PyTool] = field(default_factory=dict)
    mcp: dict[str, Any] = field(default_factory=dict)  # tool name -> McpServer

    def add(self, schema: dict, where: str) -> None:
        name = schema["function"]["name"]
        if not _NAME.fullmatch(name):
            raise ValueError(f"tool name {name!r} ({where}) may only hold letters, digits and _ . : -")
        if name in self.py or name in self.mcp:
            raise ValueError(f"two tools are named {name!r} (the second from {where})")
        self.schemas.append(schema)

    @property
    def names(self) -> list[str]:
        return [s["function"]["name"] for s in self.schemas]

    def check(self, call: Call) -> None:
        """Raise `ToolCallError` when the call names no tool or its arguments do not fit the schema."""
        import jsonschema

        schema = next((s for s in self.schemas if s["function"]["name"] == call.name), None)
        if schema is None:
            raise ToolCallError(f"there is no tool named {call.name!r}; the tools are {', '.join(self.names)}")
        parameters = schema["function"].get("parameters") or {"type": "object"}
        try:
            jsonschema.validate(call.arguments, parameters)
        except jsonschema.ValidationError as err:
            where = "/".join(str(p) for p in err.absolute_path)
            raise ToolCallError(f"arguments of {call.name}{f' ({where})' if where else ''}: {err.message}") from None

    def call(self, call: Call, timeout_s: float, max_chars: int) -> tuple[str, bool]:
        """Run a checked call -> (result text for the model, whether it failed)."""
        if call.name in self.mcp:
            text, failed = self.mcp[call.name].call(call.name, call.arguments, timeout_s)
        else:
            try:
                value = run_with_timeout(self.py[call.name].fn, call.arguments, timeout_s)
                text, failed = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str), False
            except ToolTimeout as err:
                text, failed = f"Error: {call.name} {err}", True
            except Exception as err:  # noqa: BLE001 - a tool's own error is the model's to read
                text, failed = f"Error: {call.name} raised {type(err).__name__}: {err}", True
        if len(text) > max_chars:
            text = text[:max_chars] + f"... [{len(text) - max_chars} more characters]"
        return text, failed


def mcp_schema(tool: Any) -> dict:
    """An MCP tool listing as the function schema a chat template renders."""
    parameters = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {"type": "object"}
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": parameters}}


_TOOLSETS: dict[tuple, Toolset] = {}


def toolset(tools: tuple[str, ...] | list[str], mcp_servers: tuple | list, start_timeout_s: float = 120.0) -> Toolset:
    """The toolset of an env config, built once per process and directory (the driver makes one
    env per episode); starts the MCP servers."""
    key = (tuple(tools), tuple(str(c) for c in mcp_servers), os.getcwd())
    if key not in _TOOLSETS:
        from ragen_cli.envs.tools.mcp_server import server_for

        ts = Toolset()
        for ref in tools:
            tool = load_py_tool(ref)
            ts.add(tool.schema, ref)
            ts.py[tool.name] = tool
        for command in mcp_servers:
            server = server_for(command, start_timeout_s)
            for listed in server.tools:
                ts.add(mcp_schema(listed), f"MCP server `{server.label}`")
                ts.mcp[listed.name] = server
        if not ts.schemas:
            raise ValueError("the tools env has no tools (tools and mcp_servers gave none)")
        _TOOLSETS[key] = ts
    return _TOOLSETS[key]
