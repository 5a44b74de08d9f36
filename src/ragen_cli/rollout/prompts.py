"""The texts of an episode's messages (as RAGEN's reference code writes them; the layout is in
rollout/context.py's module doc): the system prompt, the first user message, each turn's
block with its reply format and answer example, and the reward line of later turns."""

from __future__ import annotations

import math
import random

from ragen_cli.rollout.parse import PAPER_TAGS, ReplyTags


SYSTEM_PROMPT = "You're a helpful assistant. "


def reply_format(think: bool, tags: ReplyTags = PAPER_TAGS) -> str:
    """The format line's reply shape: `<think> [Your thoughts] </think> <answer> [your answer] </answer>`
    (thinking on) or the answer block alone."""
    answer = f"{tags.answer[0]} [your answer] {tags.answer[1]}"
    return f"{tags.think[0]} [Your thoughts] {tags.think[1]} {answer}" if think else answer


def prefill(think: bool, tags: ReplyTags = PAPER_TAGS) -> str:
    """What follows the generation prompt: the opening reasoning tag, or with thinking off the
    opening answer tag (the reply starts inside the answer block)."""
    return tags.think[0] if think else tags.answer[0]


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


def turn_text(turn: int, obs: str, actions_left: int, think: bool, max_tokens: int, example: str | None = None,
              tags: ReplyTags = PAPER_TAGS) -> str:
    """The per-turn block: state, action budget and the required format; `example` replaces the
    `[your answer]` placeholder."""
    fmt = reply_format(think, tags)
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
