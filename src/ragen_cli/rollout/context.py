"""Turn an episode into token ids with the model's own chat template, token-exactly.

Messages follow the reference code (RAGEN's `ctx_manager`; their texts: rollout/prompts.py):

    system:    "You're a helpful assistant. "
    user:      {env instruction}
               You can take up to {m} actions per turn, separated by the action separator "{sep}".
               Turn 1:
               State:
               {obs}
               You have {n} actions left. Always output: {format} with no extra text. ...
    assistant: <think>{sampled reply}
    user:      Reward:
               {r}
               Turn 2: ...

`<think>` is pre-filled after the generation prompt when thinking is on; those tokens are
prompt (mask 0). The token sequence is the source of truth: the prompt of turn k is the exact
token list of turns 1..k-1 (sampled ids never re-tokenised) plus the tokens of the new template
text. That new text is found by rendering the chat template with and without the new user
message and tokenising only the suffix (`ChatFormat.user_delta`). With `context_window=w` the
sampler's prompt is rebuilt from the first message plus the last w turns' token segments
(`window_prompt`).

That needs a template that renders earlier turns as a prefix of later ones (`prefix_stable`,
found by rendering a probe conversation). One that re-renders them (Qwen3 drops the reasoning of
earlier replies) gets, each turn, its own rendering of the history: the sampler's prompt is the
template's text of all messages so far, re-tokenised (`window_prompt` returns it), and the
update trains one row per turn on exactly that prompt (train/turn_rows.py), so every trained
token's log-prob is the sampler's. The episode's own token list then only lays the turns out
in order (each new piece read off a rendering after a marked reply, `ChatFormat.user_delta`).

A template without a system role (Gemma's raises on one) gets the system prompt at the start of
the first user message. The template's extra variables (`model.chat_template_kwargs`) ride on
the tokenizer (`models.load.TEMPLATE_KWARGS`); the reply's tags come from the spec
(`parse.ReplyTags`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragen_cli.rollout.parse import PAPER_TAGS, ParsedReply, ReplyTags, parse_reply
from ragen_cli.rollout.prompts import SYSTEM_PROMPT, first_user_text, prefill, reward_text

_MARK = "\u2063ragen-marker\u2063"  # never produced by a template; locates message content


def trains_per_turn(update_context: str, prefix_stable: bool | None) -> bool:
    """Whether the update trains one row per turn on the prompt it was sampled from: asked for
    (`rollout.update_context: window`), or needed (a template that re-renders history; None: not
    known, taken as stable). The one rule the Plan (`Plan.turn_rows`) and the driver read."""
    return update_context == "window" or prefix_stable is False


class ChatFormat:
    """The pieces of one tokenizer's chat template that the driver needs, found by rendering."""

    def __init__(self, tokenizer: Any, think: bool, tags: ReplyTags = PAPER_TAGS):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the tokenizer has no chat template; ragen needs a chat (instruct) model "
                             "(or set model.chat_template)")
        from ragen_cli.models.load import TEMPLATE_KWARGS

        self.tokenizer = tokenizer
        self.kwargs = dict(getattr(tokenizer, TEMPLATE_KWARGS, None) or {})
        self.tags = tags
        self.think = think
        self.prefill = prefill(think, tags)
        self.system_role = self._takes_system()
        probe = self.opening("s", "u") + [{"role": "assistant", "content": _MARK}]
        rendered = self.render(probe, generation_prompt=False)
        after = rendered[rendered.index(_MARK) + len(_MARK):]  # ChatML: "<|im_end|>\n"
        self.stop_ids = stop_token_ids(tokenizer)
        stop_texts = [tokenizer.convert_ids_to_tokens(i) for i in self.stop_ids]
        self.eot_text = next((t for t in stop_texts if after.startswith(t)), after)  # "<|im_end|>"
        self.after_eot = after[len(self.eot_text):]  # ChatML: "\n"
        # tokens that end a turn as the template's own closing does: Llama 3.1's <|eom_id|> ends a
        # tool call in its ipython mode, and the tool's turn follows it directly
        self.turn_ends = [self.eot_text] + [t for t in stop_texts if t in MESSAGE_ENDS and t != self.eot_text]
        self._plain = probe  # a history with a marked reply: where the layout's user block is read
        self.prefix_stable = self._renders_as_prefix(self._sample_history())

    def render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **self.kwargs
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _takes_system(self) -> bool:
        """Whether the template renders a system message (Gemma's raises on one; some drop it)."""
        try:
            text = self.render([{"role": "system", "content": _MARK}, {"role": "user", "content": "u"}], False)
        except Exception:  # jinja2's TemplateError from raise_exception, or the template's own
            return False
        return _MARK in text

    def opening(self, system: str, user: str) -> list[dict]:
        """The first messages: system then user, or one user message starting with the system
        prompt where the template has no system role."""
        if self.system_role:
            return [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return [{"role": "user", "content": system + user}]

    def _sample_history(self) -> list[dict]:
        """One exchange as the driver records it: a reply with the protocol's tags."""
        t, a = self.tags.think, self.tags.answer
        reply = f"{t[0]} reasons {t[1]} {a[0]} A {a[1]}" if self.think else f"{a[0]} A {a[1]}"
        return self.opening("s", "u") + [{"role": "assistant", "content": reply}]

    def _renders_as_prefix(self, history: list[dict]) -> bool:
        before = self.render(history, generation_prompt=False)
        after = self.render(history + [{"role": "user", "content": "v"}], generation_prompt=True)
        return after.startswith(before) and before.endswith(self.eot_text + self.after_eot)

    def first_prompt(self, system: str, user: str) -> list[int]:
        """Tokens of [system, user] + generation prompt + prefill."""
        return self.encode(self.render(self.opening(system, user), generation_prompt=True) + self.prefill)

    def history_prompt(self, messages: list[dict]) -> list[int]:
        """The template's own rendering of `messages` (ending with a user message) + generation
        prompt + prefill: a re-rendering template's sampler prompt."""
        return self.encode(self.render(messages, generation_prompt=True) + self.prefill)

    def strip_end(self, reply: str) -> str:
        """A reply without the token that ended its turn (`<|im_end|>`, `<|eom_id|>`), if any."""
        end = next((t for t in self.turn_ends if reply.endswith(t)), "")
        return reply[: len(reply) - len(end)]

    def end_tokens(self, stopped: bool) -> list[int]:
        """Template tokens that close a reply: none when the model sampled the stop token,
        else the end-of-turn tokens (mask 0)."""
        return [] if stopped else self.encode(self.eot_text)

    def user_delta(self, history: list[dict], user: str) -> list[int]:
        """Tokens between the end-of-turn token of the last assistant message in `history` and
        the next generation: e.g. "\\n<|im_start|>user\\n{user}<|im_end|>\\n<|im_start|>assistant\\n<think>"
        (`messages_delta` for one user message)."""
        return self.messages_delta(history, [{"role": "user", "content": user}])

    def messages_delta(self, history: list[dict], new: list[dict]) -> list[int]:
        """Tokens between the end-of-turn token of the last reply in `history` and the next
        generation when `new` messages (of any roles: user, tool) follow it. A template that
        re-renders history gets the piece as it follows a marked reply in the template's
        rendering: the episode's layout, not what the sampler reads (`history_prompt`)."""
        closing = self.eot_text + self.after_eot
        if self.prefix_stable:
            before = self.render(history, generation_prompt=False)
            after = self.render(history + new, generation_prompt=True)
            if not after.startswith(before) or not before.endswith(closing):
                raise ValueError("the chat template does not render this episode's earlier turns as a prefix of later "
                                 "ones, although it did for the probe conversation")
            return self.encode(self.after_eot + after[len(before):] + self.prefill)
        after = self.render(self._plain + new, generation_prompt=True)
        tail = after[after.index(_MARK) + len(_MARK):]
        if not tail.startswith(closing):
            raise ValueError("the chat template does not close a reply the same way in every position; ragen cannot "
                             "lay its turns out (set model.chat_template to one that does)")
        return self.encode(self.after_eot + tail[len(closing):] + self.prefill)


MESSAGE_ENDS = ("<|eom_id|>",)  # end a reply in place of the end-of-turn token (Llama 3.1's end of message)


def stop_token_ids(tokenizer: Any) -> list[int]:
    """Token ids that end a reply: the tokenizer's eos, ChatML's `<|im_end|>`, Llama 3's
    `<|eot_id|>` and Llama 3.1's `<|eom_id|>` (its generation_config's eos ids, so vLLM stops on
    it anyway), Gemma's `<end_of_turn>`."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    for token in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", *MESSAGE_ENDS):
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in ids:
            ids.append(tid)
    if not ids:
        raise ValueError("the tokenizer has no eos token; cannot tell where a reply ends")
    return ids


@dataclass
class Segment:
    """The tokens one turn added: prompt part (mask 0), reply (mask 1), closing tokens (mask 0)."""

    prompt_ids: list[int]
    reply_ids: list[int] = field(default_factory=list)
    end_ids: list[int] = field(default_factory=list)


class EpisodeContext:
    """Messages and per-turn token segments of one episode."""

    def __init__(self, fmt: ChatFormat, instruction: str, sep: str, max_actions_per_turn: int):
        self.fmt = fmt
        self.instruction = instruction
        self.sep = sep
        self.max_actions_per_turn = max_actions_per_turn
        self.messages: list[dict] = []
        self.turn_blocks: list[str] = []  # turn_text of each turn
        self.segments: list[Segment] = []

    def next_prompt_ids(self, block: str, prev_reward: float | None) -> list[int]:
        """Tokens to append before the next reply (not yet committed)."""
        if not self.segments:
            user = first_user_text(self.instruction, self.sep, self.max_actions_per_turn, block)
            return self.fmt.first_prompt(SYSTEM_PROMPT, user)
        return self.fmt.user_delta(self.messages, reward_text(prev_reward or 0.0, block))

    def commit_prompt(self, block: str, prev_reward: float | None, ids: list[int]) -> None:
        if not self.segments:
            user = first_user_text(self.instruction, self.sep, self.max_actions_per_turn, block)
            self.messages = self.fmt.opening(SYSTEM_PROMPT, user)
        else:
            self.messages.append({"role": "user", "content": reward_text(prev_reward or 0.0, block)})
        self.turn_blocks.append(block)
        self.segments.append(Segment(prompt_ids=list(ids)))

    def parse(self, reply: str, rollout) -> ParsedReply:
        """A reply (pre-fill included, end-of-turn token removed) in the spec's reply protocol."""
        return parse_reply(reply, rollout.think, rollout.action_sep, rollout.max_actions_per_turn, self.fmt.tags)

    def uncommit_prompt(self) -> None:
        """Undo the last `commit_prompt` (the turn did not fit the context)."""
        self.segments.pop()
        self.turn_blocks.pop()
        self.messages = self.messages[:-1] if self.segments else []

    def commit_reply(self, reply_ids: list[int], reply_text: str) -> list[int]:
        """Record the sampled reply; returns the closing tokens to append (mask 0): none when
        the model sampled the template's end-of-turn token itself."""
        seg = self.segments[-1]
        last = self.fmt.tokenizer.convert_ids_to_tokens(reply_ids[-1]) if reply_ids else None
        stopped = last in self.fmt.turn_ends
        seg.reply_ids = list(reply_ids)
        seg.end_ids = self.fmt.end_tokens(stopped)
        content = self.fmt.prefill + reply_text
        if stopped:
            content = self.fmt.strip_end(content)
        self.messages.append({"role": "assistant", "content": content})
        return seg.end_ids

    def window_prompt(self, window: int | None) -> list[int] | None:
        """The sampler's prompt when only the last `window` turns are kept, or None when the
        window covers every turn (then the prompt is the full trajectory). Called after
        `commit_prompt` of the current turn. A template that re-renders history gets its own
        rendering of the kept messages from turn 2 on (module doc)."""
        k = len(self.segments)
        if (window is None or k <= window) and (self.fmt.prefix_stable or k == 1):
            return None
        first = 0 if window is None else max(0, k - window)  # 0-based index of the first kept turn
        user = first_user_text(self.instruction, self.sep, self.max_actions_per_turn, self.turn_blocks[first])
        if not self.fmt.prefix_stable:  # messages: opening (1 or 2), then (assistant, user) per later turn
            start = len(self.messages) - 2 * (k - 1 - first)
            return self.fmt.history_prompt(self.fmt.opening(SYSTEM_PROMPT, user) + self.messages[start:])
        ids = self.fmt.first_prompt(SYSTEM_PROMPT, user)
        for seg, nxt in zip(self.segments[first:-1], self.segments[first + 1:]):
            ids += seg.reply_ids + seg.end_ids + nxt.prompt_ids
        return ids
