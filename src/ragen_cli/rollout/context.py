"""Turn an episode into token ids with the model's own chat template, token-exactly.

Messages follow the reference code (REFERENCE.md section 1, "How turns become tokens"):

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
message and tokenising only the suffix (`ChatFormat.user_delta`), which also checks that the
template renders the history as a prefix. With `context_window=w` the sampler's prompt is
rebuilt from the first message plus the last w turns' token segments (`window_prompt`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

SYSTEM_PROMPT = "You're a helpful assistant. "
THINK_FORMAT = "<think> [Your thoughts] </think> <answer> [your answer] </answer>"
ANSWER_FORMAT = "<answer> [your answer] </answer>"
PREFILL = "<think>"
ANSWER_PREFILL = "<answer>"  # think off: the reply starts inside the answer block
_MARK = "\u2063ragen-marker\u2063"  # never produced by a template; locates message content


def answer_example(mode: str, actions: list[str], sep: str, max_actions_per_turn: int, seed: int,
                   turn: int, copy: int = 0) -> str | None:
    """The answer the format line shows (spec `rollout.answer_example`): None for `none`; else as
    many action names as a turn allows, at most two: the env's first ones for `first`
    (["Left", "Down", ...], "||", 5 -> "Left || Down"), or drawn uniformly with replacement by a
    generator seeded with the initial state's seed and the turn for `random` (so a group's N
    copies share their turn-1 prompt and a run repeats), and also with the copy's index in its
    group for `random-per-rollout` (the N copies see different examples)."""
    if mode == "none":
        return None
    k = min(2, max_actions_per_turn)
    if mode in ("random", "random-per-rollout"):
        key = f"{seed}:{turn}" if mode == "random" else f"{seed}:{copy}:{turn}"
        rng = random.Random(f"answer-example:{key}")
        return f" {sep} ".join(rng.choice(actions) for _ in range(k))
    return f" {sep} ".join(actions[:k])


def example_groups(step: int, groups: int, fade_steps: int | None) -> int:
    """How many of training step `step`'s groups (the first ones, 1-based step) show the answer
    example (spec `rollout.answer_example_steps`): all when it is None; else ceil(P x (1 -
    (s-1)/steps)) while s <= steps, then 0. E.g. P=8, steps=10: 8, 8, 7, 6, 5, 4, 4, 3, 2, 1, 0..."""
    if fade_steps is None:
        return groups
    if step > fade_steps:
        return 0
    return math.ceil(groups * (fade_steps - step + 1) / fade_steps)


def eval_answer_example(mode: str, fade_steps: int | None) -> str:
    """The answer example validation and `ragen eval` show: none when it is a fading training
    scaffold (`rollout.answer_example_steps` set), else the spec's `rollout.answer_example`."""
    return mode if fade_steps is None else "none"


def turn_text(turn: int, obs: str, actions_left: int, think: bool, max_tokens: int, example: str | None = None) -> str:
    """The per-turn block: state, action budget and the required format; `example` replaces the
    `[your answer]` placeholder."""
    fmt = THINK_FORMAT if think else ANSWER_FORMAT
    if example:
        fmt = fmt.replace("[your answer]", example)
    return (
        f"Turn {turn}:\nState:\n{obs}\nYou have {actions_left} actions left. "
        f"Always output: {fmt} with no extra text. Strictly follow this format. "
        f"Max response length: {max_tokens} words (tokens).\n"
    )


def first_user_text(instruction: str, sep: str, max_actions_per_turn: int, first_turn: str) -> str:
    """The first user message: env instruction, the action separator, then the first turn."""
    return (
        f"{instruction.rstrip()}\nYou can take up to {max_actions_per_turn} actions per turn, "
        f'separated by the action separator "{sep}".\n{first_turn}'
    )


def reward_text(reward: float, next_turn: str) -> str:
    """A later user message: the previous turn's reward, then the next turn."""
    return f"Reward:\n{round(reward, 4):g}\n\n{next_turn}"


class ChatFormat:
    """The pieces of one tokenizer's chat template that the driver needs, found by rendering."""

    def __init__(self, tokenizer: Any, think: bool):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the tokenizer has no chat template; ragen needs a chat (instruct) model")
        self.tokenizer = tokenizer
        self.prefill = PREFILL if think else ANSWER_PREFILL
        probe = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                 {"role": "assistant", "content": _MARK}]
        rendered = self.render(probe, generation_prompt=False)
        after = rendered[rendered.index(_MARK) + len(_MARK):]  # ChatML: "<|im_end|>\n"
        self.stop_ids = stop_token_ids(tokenizer)
        stop_texts = [tokenizer.convert_ids_to_tokens(i) for i in self.stop_ids]
        self.eot_text = next((t for t in stop_texts if after.startswith(t)), after)  # "<|im_end|>"
        self.after_eot = after[len(self.eot_text):]  # ChatML: "\n"

    def render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def first_prompt(self, system: str, user: str) -> list[int]:
        """Tokens of [system, user] + generation prompt + prefill."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return self.encode(self.render(messages, generation_prompt=True) + self.prefill)

    def end_tokens(self, stopped: bool) -> list[int]:
        """Template tokens that close a reply: none when the model sampled the stop token,
        else the end-of-turn tokens (mask 0)."""
        return [] if stopped else self.encode(self.eot_text)

    def user_delta(self, history: list[dict], user: str) -> list[int]:
        """Tokens between the end-of-turn token of the last assistant message in `history` and
        the next generation: e.g. "\\n<|im_start|>user\\n{user}<|im_end|>\\n<|im_start|>assistant\\n<think>"."""
        before = self.render(history, generation_prompt=False)
        after = self.render(history + [{"role": "user", "content": user}], generation_prompt=True)
        if not after.startswith(before) or not before.endswith(self.eot_text + self.after_eot):
            raise ValueError("the chat template does not render earlier turns as a prefix of later ones; "
                             "token-exact multi-turn rollouts need a prefix-stable template")
        return self.encode(self.after_eot + after[len(before):] + self.prefill)


def stop_token_ids(tokenizer: Any) -> list[int]:
    """Token ids that end a reply: the tokenizer's eos and, for ChatML, `<|im_end|>`."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    for token in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>"):
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
            self.messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        else:
            self.messages.append({"role": "user", "content": reward_text(prev_reward or 0.0, block)})
        self.turn_blocks.append(block)
        self.segments.append(Segment(prompt_ids=list(ids)))

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
        stopped = last == self.fmt.eot_text
        seg.reply_ids = list(reply_ids)
        seg.end_ids = self.fmt.end_tokens(stopped)
        content = self.fmt.prefill + reply_text
        if stopped and content.endswith(self.fmt.eot_text):
            content = content[: -len(self.fmt.eot_text)]
        self.messages.append({"role": "assistant", "content": content})
        return seg.end_ids

    def window_prompt(self, window: int | None) -> list[int] | None:
        """The sampler's prompt when only the last `window` turns are kept, or None when the
        window covers every turn (then the prompt is the full trajectory). Called after
        `commit_prompt` of the current turn."""
        k = len(self.segments)
        if window is None or k <= window:
            return None
        first = k - window  # 0-based index of the first kept turn
        user = first_user_text(self.instruction, self.sep, self.max_actions_per_turn, self.turn_blocks[first])
        ids = self.fmt.first_prompt(SYSTEM_PROMPT, user)
        for seg, nxt in zip(self.segments[first:-1], self.segments[first + 1:]):
            ids += seg.reply_ids + seg.end_ids + nxt.prompt_ids
        return ids
