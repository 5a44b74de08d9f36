"""Python functions as tools: `module:function`, imported like the dataset adapter's reward
functions (`envs.base.import_ref`: also from the directory ragen runs in). The JSON schema comes
from the function's type hints and Google-style docstring through transformers'
`get_json_schema` (the schema `apply_chat_template(tools=[fn])` renders); a function it cannot
describe (no docstring, an argument without a type hint or a description) is a spec error.

A call runs in a daemon thread with a time limit: past `timeout_s` the model gets an error result
and the episode goes on; the thread is left to finish on its own (Python cannot stop a thread), so a
tool that can hang should be an MCP server, whose process ragen controls.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from ragen_cli.envs.base import import_ref


class ToolTimeout(TimeoutError):
    """A tool ran past its time limit."""


@dataclass(frozen=True)
class PyTool:
    ref: str  # module:function as the spec names it
    fn: Callable
    schema: dict  # {"type": "function", "function": {"name", "description", "parameters"}}

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]


def load_py_tool(ref: str) -> PyTool:
    """The tool `module:function` with its schema; ValueError naming `ref` when it does not import
    or cannot be described."""
    fn = import_ref(ref, "tool")
    if not callable(fn):
        raise ValueError(f"tool '{ref}' is not callable")
    from transformers.utils import get_json_schema

    try:
        schema = get_json_schema(fn)
    except Exception as err:  # transformers' TypeHintParsingException / DocstringParsingException
        raise ValueError(f"tool '{ref}': no JSON schema from its type hints and docstring: {err}") from None
    return PyTool(ref, fn, schema)


def run_with_timeout(fn: Callable, arguments: dict[str, Any], timeout_s: float) -> Any:
    """`fn(**arguments)` in a daemon thread; its value, or its exception re-raised, or `ToolTimeout`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(**arguments)
        except BaseException as err:  # noqa: BLE001 - handed back to the caller
            box["error"] = err

    thread = threading.Thread(target=run, name=f"ragen-tool-{getattr(fn, '__name__', 'tool')}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ToolTimeout(f"timed out after {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
