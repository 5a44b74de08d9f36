"""Tool-calling tasks: prompts from a data file, tools the model calls in its own format, and
reward functions at the final answer (`env.train.name: tools`; docs/tools.md).

    env:
      train:
        name: tools
        config:
          path: data/train.jsonl            # the dataset adapter's files and prompt column
          rewards: [my_rewards:correct]     # TRL's signature, called on the final answer
          tools: [my_tools:multiply]        # Python functions, module:function
          mcp_servers: ["{python} my_server.py"]   # and/or MCP servers: stdio commands or URLs
          parser: hermes                    # hermes (<tool_call>{json}</tool_call>) or llama3 (JSON)
          timeout_s: 10
          max_actions: 4                    # replies per episode: tool rounds and the final answer
          max_calls_per_turn: 8             # the limits: docs/tools.md, "Limits"
          max_result_tokens: 1024

An episode: the first observation is the row's prompt (a `user` message); each reply is parsed in
the parser's format. A reply with calls runs them (`tools/toolset.py`) and the results come back as
`tool` messages, one per call; a reply without a call is the final answer, scored by the reward
functions as the dataset adapter scores an answer (its weights, `None`, `reward/fn/<fn>`), and ends
the episode. A malformed call (`tools/formats.py`), an unknown tool or arguments that do not fit
the tool's schema is an invalid action: not run, an error message comes back as the `tool`
message, and the driver adds the format penalty. A tool that raises or runs past `timeout_s` gives
an error result and the episode goes on. Using up `max_actions` without a final answer ends the
episode with reward 0.

Limits (docs/tools.md, "Limits"): a reply's first `max_calls_per_turn` calls run; the rest are not
run, and one more `tool` message says so (an invalid action: counted as invalid calls, the format
penalty). A turn's results share `max_result_tokens` tokens, counted with the run's tokenizer
(`use_tokenizer`, called by the driver), cut on `result_truncate_side` (`tools/limits.py`). The
driver steps up to `max_concurrent_calls` episodes of a turn at once (their calls run
concurrently; a reply's own calls run in order); the final answers' reward functions run one at a
time.

The driver sees this env through two calls besides the text-env protocol: `tool_schemas()` (the
chat template's `tools=`) and `chat_messages()` (the messages the last reset or step added);
`rollout/tool_chat.py` builds the episode's context from them. `info["tool_stats"]` holds the episode's
counts so far (the metrics in docs/metrics.md); `info["tool_calls"]` lists a step's calls, each
`{"name", "arguments", "result", "status"}` (status `ok`, `error`, or `invalid` for a malformed
reply, whose name and arguments are None), which the rollout keeps in the turn's record.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragen_cli.envs.adapters.dataset_env import DatasetConfig, DatasetEnv


@dataclass
class ToolsConfig(DatasetConfig):
    tools: list[str] = field(default_factory=list)
    """Python functions as tools, `module:function`; the schema comes from type hints and the docstring (transformers' get_json_schema)."""
    mcp_servers: list[str] = field(default_factory=list)
    """MCP servers whose tools are listed and called through the mcp SDK: commands ragen starts and stops over stdio (a string split like a shell's; `{python}` is ragen's Python), or URLs of running servers (`http(s)://...`, Streamable HTTP)."""
    parser: str = "hermes"
    """The model's tool-call format: hermes (<tool_call>{"name", "arguments"}</tool_call>, Hermes / Qwen) or llama3 (a JSON object {"name", "parameters"}, Llama 3.1)."""
    timeout_s: float = 10.0
    """Time limit of one tool call; past it the model gets an error result."""
    start_timeout_s: float = 120.0
    """How long an MCP server may take to start and list its tools (a Python server imports the SDK first)."""
    max_calls_per_turn: int = 8
    """Calls of one reply that run; the rest are not run, and the reply is an invalid action (one error message says so)."""
    max_result_tokens: int = 1024
    """Tokens of tool results per turn (all of a reply's results together, counted with the run's tokenizer); longer results are cut."""
    result_truncate_side: str = "middle"
    """What a cut result keeps, as verl's tool_response_truncate_side: left (its start), right (its end) or middle (both ends)."""
    max_concurrent_calls: int = 8
    """Episodes of a turn whose tool calls run at once (and the Python tools' worker threads)."""
    max_result_chars: int | None = None
    """Removed: results are limited in tokens per turn (max_result_tokens); setting it is an error."""
    system_prompt: str = "Answer the question. Use the tools when they help, then give the final answer without a tool call."
    """The system message (templates without tool support also get the tools and the call format after it)."""
    max_actions: int = 4
    """Replies per episode: tool-calling rounds plus the final answer."""

    def __post_init__(self) -> None:
        from ragen_cli.envs.tools.formats import check_parser
        from ragen_cli.envs.tools.functions import load_py_tool
        from ragen_cli.envs.tools.limits import SIDES
        from ragen_cli.envs.tools.mcp_server import is_url, server_argv, server_url

        check_parser(self.parser)
        if not self.tools and not self.mcp_servers:
            raise ValueError("tools or mcp_servers is required: at least one module:function or MCP server (command or URL)")
        if self.feedback:
            raise ValueError("feedback is the dataset adapter's; a tools episode continues through its tool calls")
        if self.max_result_chars is not None:
            raise ValueError("max_result_chars was removed: tool results are limited in tokens per turn; set "
                             "max_result_tokens (e.g. 1024) and result_truncate_side instead (docs/tools.md)")
        if self.result_truncate_side not in SIDES:
            raise ValueError(f"result_truncate_side must be one of {', '.join(SIDES)}, got {self.result_truncate_side!r}")
        if not self.timeout_s > 0 or not self.start_timeout_s > 0 or min(
                self.max_actions, self.max_calls_per_turn, self.max_result_tokens, self.max_concurrent_calls) < 1:
            raise ValueError("timeout_s, start_timeout_s, max_actions, max_calls_per_turn, max_result_tokens and "
                             "max_concurrent_calls must be positive")
        budget, self.max_actions = self.max_actions, 1  # the dataset checks allow several answers only with feedback
        try:
            super().__post_init__()
        finally:
            self.max_actions = budget
        for ref in self.tools:
            load_py_tool(ref)
        for command in self.mcp_servers:
            server_url(command) if is_url(command) else server_argv(command)


def _zero_stats() -> dict[str, Any]:
    return {"calls": 0, "invalid": 0, "errors": 0, "per_tool": {}}


_REWARDS = threading.Lock()  # the driver steps episodes concurrently; a user's reward functions run one at a time


class ToolsEnv(DatasetEnv):
    name = "tools"
    description = "Prompts from a data file, tools (Python functions, MCP servers) called in the model's own format, rewards at the final answer."
    config_class = ToolsConfig

    def __init__(self, config: Any = None):
        from ragen_cli.envs.tools.limits import Chars
        from ragen_cli.envs.tools.toolset import toolset

        super().__init__(config)
        c = self.config
        self.toolset = toolset(c.tools, c.mcp_servers, c.start_timeout_s, c.max_concurrent_calls)
        self.messages: list[dict] = []
        self.stats = _zero_stats()
        self.counter: Any = Chars()  # tokens of the results: the run's tokenizer once `use_tokenizer` gave it

    def use_tokenizer(self, tokenizer: Any) -> None:
        """Count the results' tokens with the run's tokenizer (the driver calls this)."""
        from ragen_cli.envs.tools.limits import Tokens

        self.counter = Tokens(tokenizer)

    def tool_schemas(self) -> list[dict]:
        """The tools' JSON schemas, in the order of the config (Python tools, then MCP servers')."""
        return list(self.toolset.schemas)

    def chat_messages(self) -> list[dict]:
        """The messages the last reset (the prompt) or step (the tool results) added."""
        return [dict(m) for m in self.messages]

    def _stats(self) -> dict[str, Any]:
        return {**self.stats, "per_tool": dict(self.stats["per_tool"])}

    def _reset(self, rng: np.random.Generator) -> dict:
        info = super()._reset(rng)
        self.messages = [{"role": "user", "content": self.text}]
        self.stats = _zero_stats()
        return {**info, "tool_stats": self._stats()}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        from ragen_cli.envs.tools.formats import ToolCallError, parse_calls

        c = self.config
        try:
            calls = parse_calls(action, c.parser)
            for call in calls:
                self.toolset.check(call)
        except ToolCallError as err:
            self.stats["invalid"] += 1
            self.messages = [{"role": "tool", "content": f"Error: {err}"}]
            self.text = self.messages[0]["content"]
            called = [{"name": None, "arguments": None, "result": self.text, "status": "invalid"}]
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False, "tool_stats": self._stats(),
                                "tool_calls": called}
        if not calls:  # the final answer
            self.messages = []
            with _REWARDS:
                reward, terminated, info = super()._step(action.strip())
            return reward, terminated, {**info, "tool_stats": self._stats()}
        return 0.0, False, self._run(calls)

    def _run(self, calls: list) -> dict:
        """Run a reply's calls (the first `max_calls_per_turn`), results cut to the turn's tokens."""
        from ragen_cli.envs.tools.limits import fit_results

        c = self.config
        ran, extra = calls[:c.max_calls_per_turn], len(calls) - c.max_calls_per_turn
        results = [self.toolset.call(call, c.timeout_s) for call in ran]
        texts = fit_results([text for text, _ in results], c.max_result_tokens, c.result_truncate_side, self.counter)
        self.messages, called = [], []
        for call, text, (_, failed) in zip(ran, texts, results):
            self.stats["calls"] += 1
            self.stats["errors"] += failed
            self.stats["per_tool"][call.name] = self.stats["per_tool"].get(call.name, 0) + 1
            self.messages.append({"role": "tool", "name": call.name, "content": text})
            called.append({"name": call.name, "arguments": call.arguments, "result": text,
                           "status": "error" if failed else "ok"})
        if extra > 0:
            note = (f"Error: {len(calls)} calls in one reply; only the first {c.max_calls_per_turn} ran "
                    f"(max_calls_per_turn), the other {extra} were not run")
            self.stats["invalid"] += extra
            self.messages.append({"role": "tool", "content": note})
            called.append({"name": None, "arguments": None, "result": note, "status": "invalid"})
        self.text = "\n".join(m["content"] for m in self.messages)
        return {"action_is_valid": extra <= 0, "action_is_effective": True, "tool_stats": self._stats(),
                "tool_calls": called}
