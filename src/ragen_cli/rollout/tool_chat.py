"""The rollout side of tool envs: tools through the chat template's `tools=`, results back as
`tool` messages, and every trained token the token the model sampled (rollout/context.py's rules).

A tool env (one with `tool_schemas()` and `chat_messages()`, `envs/adapters/tools_env.py`) gets a
`ToolEpisodeContext` instead of the paper's per-turn user block:

    system:    {env instruction}                     (+ the tools and the call format, for a
                                                      template without tool support)
    user:      {the row's prompt}                    tools= {the tools' JSON schemas}
    assistant: {sampled reply: a call in the model's format, or the final answer}
    tool:      {result of call 1}   (one message per call; an error text for a failed or invalid one)
    assistant: ...

No answer tag is pre-filled (the model writes its calls where it was trained to); with
`rollout.think` on the reasoning's opening tag is, and the env reads what follows its closing tag.

Token exactness is rollout/context.py's: the tool-turn piece between two replies is read off the
template's rendering of the messages with and without the new `tool` messages. Whether the
template renders earlier turns as a prefix of later ones is probed on a tool conversation (a call,
its result, a reply, another result); a template that re-renders (Qwen3's reasoning) makes the
sampler read the template's own rendering of the history and the update train one row per turn on
it. The Plan decides per-turn rows from the plain probe (compile/template.py), so a template that
is stable there but re-renders tool turns is refused here, by name, rather than trained on tokens
the sampler did not see.
"""

from __future__ import annotations

import json
from typing import Any

from ragen_cli.rollout.context import ChatFormat, EpisodeContext, Segment
from ragen_cli.rollout.parse import PAPER_TAGS, ParsedReply, ReplyTags
from ragen_cli.envs.tools.formats import Call, call_text, tool_prompt

_PROBE_TOOL = {"type": "function", "function": {"name": "ragen_probe_tool", "description": "probe",
                                                 "parameters": {"type": "object", "properties": {}}}}


class ToolChatFormat(ChatFormat):
    """A `ChatFormat` whose renderings carry the tools (`tools=`, or the system-prompt text when the
    template ignores them) and whose replies start with no answer tag."""

    def __init__(self, tokenizer: Any, think: bool, schemas: list[dict], parser: str, tags: ReplyTags = PAPER_TAGS):
        super().__init__(tokenizer, think, tags)
        plain_stable = self.prefix_stable
        self.parser = parser
        self.prefill = tags.think[0] if think else ""
        self.native = self._renders_tools()
        self.tools_text = "" if self.native else tool_prompt(schemas, parser)
        if self.native:
            self.kwargs["tools"] = list(schemas)
        self.prefix_stable = self._tool_turns_stable()
        if plain_stable and not self.prefix_stable:
            raise ValueError("the chat template renders plain turns as a prefix of later ones but re-renders tool "
                             "turns; the Plan would train one sequence per episode on tokens the sampler did not see "
                             "(give model.chat_template a template that renders tool turns the same way)")

    def _renders_tools(self) -> bool:
        try:
            text = self.tokenizer.apply_chat_template([{"role": "user", "content": "u"}], tools=[_PROBE_TOOL],
                                                      tokenize=False, add_generation_prompt=True, **self.kwargs)
        except Exception:  # a template that raises on tools= has no tool support either
            return False
        return "ragen_probe_tool" in text

    def system(self, instruction: str) -> str:
        return f"{instruction.rstrip()}\n\n{self.tools_text}" if self.tools_text else instruction

    def _tool_turns_stable(self) -> bool:
        """Render tool conversations and check each turn renders the earlier ones as its prefix.
        With thinking on, once with reasoning and once with an empty reasoning block: Qwen3's
        template keeps a reply's reasoning while it is the last message or non-empty
        (`loop.last or reasoning_content`), so an empty `<think></think>` before a call
        disappears once the call's result follows, and RL shortens reasoning until replies
        carry empty blocks."""
        opening, closing = self.tags.think
        thoughts = [f"{opening} reasons {closing} ", f"{opening}{closing}\n"] if self.think else [""]
        return all(self._stable_with(think) for think in thoughts)

    def _stable_with(self, think: str) -> bool:
        history = self.opening(self.system("s"), "u")
        closing = self.eot_text + self.after_eot
        for reply, result in ((call_text(Call("ragen_probe_tool", {}), self.parser), "r1"), ("done", "r2")):
            history = history + [{"role": "assistant", "content": think + reply}]
            before = self.render(history, generation_prompt=False)
            history = history + [{"role": "tool", "name": "ragen_probe_tool", "content": result}]
            after = self.render(history, generation_prompt=True)
            if not after.startswith(before) or not before.endswith(closing):
                return False
        return True


class ToolEpisodeContext(EpisodeContext):
    """Messages and per-turn token segments of one tool episode (module docstring). The driver's
    per-turn `block` and reward are not shown: the env's `chat_messages()` are the new turn."""

    def __init__(self, fmt: ToolChatFormat, env: Any):
        super().__init__(fmt, env.instruction(), "", 1)
        self.env = env
        self.added: list[int] = []  # messages each committed turn added

    def _opening(self, new: list[dict]) -> list[dict]:
        first, rest = new[0], new[1:]
        return self.fmt.opening(self.fmt.system(self.instruction), first["content"]) + rest

    def next_prompt_ids(self, block: str, prev_reward: float | None) -> list[int]:
        new = self.env.chat_messages()
        if not self.segments:
            return self.fmt.encode(self.fmt.render(self._opening(new), generation_prompt=True) + self.fmt.prefill)
        return self.fmt.messages_delta(self.messages, new)

    def commit_prompt(self, block: str, prev_reward: float | None, ids: list[int]) -> None:
        new = self.env.chat_messages()
        before = len(self.messages)
        self.messages = self._opening(new) if not self.segments else self.messages + new
        self.added.append(len(self.messages) - before)
        self.turn_blocks.append(block)
        self.segments.append(Segment(prompt_ids=list(ids)))

    def uncommit_prompt(self) -> None:
        self.segments.pop()
        self.turn_blocks.pop()
        self.messages = self.messages[: len(self.messages) - self.added.pop()]

    def window_prompt(self, window: int | None) -> list[int] | None:
        if window is not None:
            raise ValueError("rollout.context_window does not apply to tool envs: every turn keeps its tool results "
                             "(remove context_window)")
        if self.fmt.prefix_stable or len(self.segments) == 1:
            return None
        return self.fmt.history_prompt(self.messages)

    def parse(self, reply: str, rollout: Any) -> ParsedReply:
        """The whole reply after the reasoning is the env's action (it parses calls itself); with
        thinking on, a reply whose reasoning does not close is a format error."""
        if rollout.think:
            close = self.fmt.tags.think[1]
            head, found, answer = reply.partition(close)
            if not found:
                return ParsedReply()
            thought = head.removeprefix(self.fmt.tags.think[0]).strip()
        else:
            thought, answer = "", reply
        return ParsedReply(actions=[answer], format_ok=True, think=thought, answer=answer.strip())


_FORMATS: dict[tuple, ToolChatFormat] = {}


def tool_context(env: Any, tokenizer: Any, rollout: Any) -> ToolEpisodeContext:
    """The context of one episode of a tool env (its `ToolChatFormat` built once per tokenizer,
    tools and reply settings)."""
    schemas = env.tool_schemas()
    tags = ReplyTags.of(rollout)
    key = (id(tokenizer), json.dumps(schemas, sort_keys=True), env.config.parser, rollout.think, tags)
    if key not in _FORMATS:
        _FORMATS[key] = ToolChatFormat(tokenizer, rollout.think, schemas, env.config.parser, tags)
    return ToolEpisodeContext(_FORMATS[key], env)


def episode_context(env: Any, tokenizer: Any, rollout: Any, fmt: ChatFormat) -> EpisodeContext:
    """The context of one episode of `env`: a tool env's (`tool_context`), else the paper's
    per-turn user block in `fmt` (rollout/context.py). The driver and the demonstrations use it."""
    if hasattr(env, "tool_schemas"):
        return tool_context(env, tokenizer, rollout)
    return EpisodeContext(fmt, env.instruction(), rollout.action_sep, rollout.max_actions_per_turn)


def tool_metrics(trajs: list) -> dict[str, float]:
    """The tool metrics of a step (docs/metrics.md), over the episodes of tool envs (their
    `info["tool_stats"]`); {} when there is none."""
    from ragen_cli.monitor.metrics import env_metric

    stats = [t.info["tool_stats"] for t in trajs if isinstance(t.info.get("tool_stats"), dict)]
    if not stats:
        return {}
    calls, invalid, errors = (sum(s[k] for s in stats) for k in ("calls", "invalid", "errors"))
    per_tool: dict[str, int] = {}
    for s in stats:
        for name, count in s["per_tool"].items():
            per_tool[name] = per_tool.get(name, 0) + count
    return {"episode/tool_calls": calls / len(stats),
            "episode/invalid_call_ratio": invalid / max(1, calls + invalid),
            "episode/tool_error_ratio": errors / max(1, calls),
            **{env_metric("episode/tool_calls/<fn>", name): n / len(stats) for name, n in per_tool.items()}}
