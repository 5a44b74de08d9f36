"""Reward functions for dataset tasks, in TRL's signature `fn(prompts, completions, **columns)
-> list[float | None]` (envs/adapters/dataset_env.py). Name one in a spec as
`ragen_cli.envs.rewards:exact_match`."""

from __future__ import annotations

import re


def normalise_answer(text: str) -> str:
    """Lower case, whitespace collapsed, surrounding punctuation and quotes dropped, and a number
    written as a number ("83.", " 83 ", "83.0" -> "83")."""
    t = " ".join(str(text).split()).lower().strip(" .,:;!?\"'`")
    if re.fullmatch(r"[-+]?\d+(\.\d+)?", t):
        value = float(t)
        return str(int(value)) if value.is_integer() else str(value)
    return t


def exact_match(prompts, completions, answer=None, **columns) -> list[float | None]:
    """1.0 when the completion is the row's `answer` column (normalise_answer on both), else 0.0;
    None for rows without an answer."""
    if answer is None:
        return [None] * len(completions)
    return [None if a is None else float(normalise_answer(c) == normalise_answer(a))
            for c, a in zip(completions, answer)]


def first_number(prompts, completions, answer=None, **columns) -> list[float | None]:
    """1.0 when the first number in the completion is the row's `answer` (a small model wraps its
    answer in words or repeats it: "83\n83\n8" names 83), else 0.0; None for rows without an
    answer. A completion without a number scores 0.0."""
    if answer is None:
        return [None] * len(completions)
    out: list[float | None] = []
    for c, a in zip(completions, answer):
        m = re.search(r"[-+]?\d+(?:\.\d+)?", str(c))
        out.append(None if a is None else float(m is not None and normalise_answer(m.group()) == normalise_answer(a)))
    return out
