"""The tools of one env config by name: Python functions and the tools of MCP servers, their
JSON schemas (what the chat template renders), the check of a call against its tool's schema, and
the call itself, whose failures become error results for the model.

A call is run with exactly the arguments the model wrote, after `jsonschema` checked them against
the tool's schema: an unknown tool or arguments that do not fit (a missing required argument, an
unknown one where the schema allows none, a wrong type) make the call invalid, and it is not run.
A tool's schema that is not a valid JSON schema is refused when the toolset is built (a spec error
for a Python tool, `ToolServerError` naming an MCP server's tool), never met mid-run.

Python tools run in the toolset's `ToolPool` (`functions.py`): a tool that raises, even
`SystemExit`, or runs past its time limit gives an error result.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ragen_cli.envs.tools.formats import Call, ToolCallError
from ragen_cli.envs.tools.functions import PyTool, ToolBusy, ToolPool, ToolTimeout, load_py_tool

_NAME = re.compile(r"[A-Za-z0-9_.:\-]+")  # also the metric name's rule (episode/tool_calls/<fn>)


@dataclass
class Toolset:
    schemas: list[dict] = field(default_factory=list)
    py: dict[str, PyTool] = field(default_factory=dict)
    mcp: dict[str, Any] = field(default_factory=dict)  # tool name -> McpServer
    pool: ToolPool = field(default_factory=lambda: ToolPool(8))  # runs the Python tools

    def add(self, schema: dict, where: str) -> None:
        name = schema["function"]["name"]
        if not _NAME.fullmatch(name):
            raise ValueError(f"tool name {name!r} ({where}) may only hold letters, digits and _ . : -")
        if name in self.py or name in self.mcp:
            raise ValueError(f"two tools are named {name!r} (the second from {where})")
        check_schema(schema["function"].get("parameters"), f"tool {name!r} ({where})")
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
        except Exception as err:  # noqa: BLE001 - e.g. a $ref that does not resolve: the call cannot be checked
            raise ToolCallError(f"arguments of {call.name} could not be checked against its schema "
                                f"({type(err).__name__}: {err})") from None

    def call(self, call: Call, timeout_s: float) -> tuple[str, bool]:
        """Run a checked call -> (result text for the model, whether it failed)."""
        if call.name in self.mcp:
            return self.mcp[call.name].call(call.name, call.arguments, timeout_s)
        try:
            value = self.pool.run(self.py[call.name].fn, call.arguments, timeout_s)
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str), False
        except (ToolTimeout, ToolBusy) as err:
            return f"Error: {call.name} {err}", True
        except (Exception, SystemExit) as err:  # noqa: BLE001 - a tool's own error is the model's to read
            return f"Error: {call.name} raised {type(err).__name__}: {err}", True


def check_schema(parameters: Any, where: str) -> None:
    """ValueError naming `where` when a tool's parameters are not a valid JSON schema object."""
    import jsonschema

    if parameters is None:
        return
    if not isinstance(parameters, dict):
        raise ValueError(f"{where}: its input schema is not a JSON object: {parameters!r:.80}")
    try:
        jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator).check_schema(parameters)
    except jsonschema.SchemaError as err:
        at = "/".join(str(p) for p in err.absolute_path)
        raise ValueError(f"{where}: its input schema is not a valid JSON schema ({at or 'top'}: {err.message})") from None


def mcp_schema(tool: Any) -> dict:
    """An MCP tool listing as the function schema a chat template renders."""
    parameters = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {"type": "object"}
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": parameters}}


_TOOLSETS: dict[tuple, Toolset] = {}


def toolset(tools: tuple[str, ...] | list[str], mcp_servers: tuple | list, start_timeout_s: float = 120.0,
            workers: int = 8) -> Toolset:
    """The toolset of an env config, built once per process and directory (the driver makes one
    env per episode); starts the MCP servers. `workers`: the Python tools' threads."""
    key = (tuple(tools), tuple(str(c) for c in mcp_servers), os.getcwd(), workers)
    if key not in _TOOLSETS:
        from ragen_cli.envs.tools.mcp_server import ToolServerError, server_for

        ts = Toolset(pool=ToolPool(workers))
        for ref in tools:
            tool = load_py_tool(ref)
            ts.add(tool.schema, ref)
            ts.py[tool.name] = tool
        for command in mcp_servers:
            server = server_for(command, start_timeout_s)
            for listed in server.tools:
                try:
                    ts.add(mcp_schema(listed), f"MCP server `{server.label}`")
                except ValueError as err:  # a server's listing that cannot be used: it cannot start
                    raise ToolServerError(str(err)) from None
                ts.mcp[listed.name] = server
        if not ts.schemas:
            raise ValueError("the tools env has no tools (tools and mcp_servers gave none)")
        _TOOLSETS[key] = ts
    return _TOOLSETS[key]
