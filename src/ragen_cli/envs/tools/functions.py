"""Python functions as tools: `module:function`, imported like the dataset adapter's reward
functions (`envs.base.import_ref`: also from the directory ragen runs in). The JSON schema comes
from the function's type hints and Google-style docstring through transformers'
`get_json_schema` (the schema `apply_chat_template(tools=[fn])` renders); a function it cannot
describe (no docstring, an argument without a type hint or a description) is a spec error.

Calls run in a `ToolPool`: at most `workers` daemon threads (the env's `max_concurrent_calls`),
each call with a time limit. Past `timeout_s` the model gets an error result and the episode goes
on; the call keeps its thread until it returns (Python cannot stop a thread), so threads never
outnumber the workers, and while every worker holds a call that timed out, further calls fail at
once (`ToolBusy`) instead of queueing behind them. A tool that can hang belongs in an MCP server,
whose process ragen controls. A tool's `SystemExit` is raised back to the caller like any error
(the toolset turns it into an error result), never in the rollout thread.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable

from ragen_cli.envs.base import import_ref


class ToolTimeout(TimeoutError):
    """A tool ran past its time limit."""


class ToolBusy(RuntimeError):
    """Every worker of the pool holds a call that timed out and has not returned."""


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


class ToolPool:
    """At most `workers` daemon threads running tool calls (module docstring)."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError("a tool pool needs at least one worker")
        self.workers = workers
        self.stuck = 0  # calls that timed out and still hold their worker
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def run(self, fn: Callable, arguments: dict[str, Any], timeout_s: float) -> Any:
        """`fn(**arguments)` on a worker: its value, its exception re-raised, `ToolTimeout` or `ToolBusy`."""
        future: Future = Future()
        with self._lock:
            if self.stuck >= self.workers:
                raise ToolBusy(f"not run: all {self.workers} tool workers still hold calls that timed out")
            if len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name=f"ragen-tool-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._jobs.put((future, fn, arguments))
        try:
            return future.result(timeout_s)
        except TimeoutError:
            if future.done():  # it finished just now, or raised a TimeoutError of its own
                return future.result()
            if future.cancel():  # still queued behind other calls: it never runs
                raise ToolTimeout(f"timed out after {timeout_s:g} s (waiting for a free worker)") from None
            with self._lock:
                self.stuck += 1
            future.add_done_callback(self._unstick)
            raise ToolTimeout(f"timed out after {timeout_s:g} s") from None

    def _unstick(self, _: Future) -> None:
        with self._lock:
            self.stuck -= 1

    def _work(self) -> None:
        while True:
            future, fn, arguments = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(**arguments))
            except BaseException as err:  # noqa: BLE001 - SystemExit included: handed back to the caller
                future.set_exception(err)
