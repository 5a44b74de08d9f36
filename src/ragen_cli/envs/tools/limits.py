"""The length limit of tool results: tokens per turn, shared fairly among a turn's results, cut on
one side (docs/tools.md, "Limits").

verl's tool agent loop cuts each response to `max_tool_response_length` characters on a
`tool_response_truncate_side`; here the limit is in tokens and per turn (what a turn adds to the
context), and the side keeps verl's meaning: `left` keeps the start of a result, `right` its end,
`middle` both ends (half each), with verl's `...(truncated)` where text was cut.

The budget of a turn is shared max-min fairly (`fair_shares`): a result shorter than an equal
share keeps all of it and leaves the rest to the others. Tokens are counted with the run's
tokenizer (the driver hands it to the env), each result's text on its own; without one
(`ragen envs play`, an env made by hand) a token is counted as `CHARS_PER_TOKEN` characters.
"""

from __future__ import annotations

import threading
from typing import Any

SIDES = ("left", "right", "middle")
MARK = "...(truncated)"
CHARS_PER_TOKEN = 4  # without the run's tokenizer
MAX_CHARS_PER_TOKEN = 32  # a result is cut to this many characters per token of its share before it is tokenized


class Chars:
    """Tokens of `CHARS_PER_TOKEN` characters: the count without a tokenizer."""

    def encode(self, text: str) -> list[str]:
        return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]

    def decode(self, pieces: list[str]) -> str:
        return "".join(pieces)


_TOKENIZER = threading.Lock()  # envs stepped at once share the run's tokenizer


class Tokens:
    """A Hugging Face tokenizer's tokens (no special tokens), one caller at a time."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        with _TOKENIZER:
            return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        with _TOKENIZER:
            return self.tokenizer.decode(ids)


def fair_shares(lengths: list[int], budget: int) -> list[int]:
    """How many tokens each result keeps: max-min fair shares of `budget` (shortest first, each
    takes its length or an equal share of what is left, whichever is smaller)."""
    keep = [0] * len(lengths)
    left = budget
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    for done, i in enumerate(order):
        keep[i] = min(lengths[i], left // (len(order) - done))
        left -= keep[i]
    return keep


def cut(pieces: list, keep: int, side: str, counter: Any) -> str:
    """The text of `keep` of `pieces` (tokens) on `side` (module docstring), marked where cut."""
    if side == "left":
        return counter.decode(pieces[:keep]) + MARK
    if side == "right":
        return MARK + counter.decode(pieces[len(pieces) - keep:])
    head, tail = (keep + 1) // 2, keep // 2
    return counter.decode(pieces[:head]) + MARK + counter.decode(pieces[len(pieces) - tail:])


def fit_results(texts: list[str], budget: int, side: str, counter: Any) -> list[str]:
    """A turn's result texts cut to `budget` tokens in all (module docstring)."""
    if side not in SIDES:
        raise ValueError(f"truncate side must be one of {', '.join(SIDES)}, got {side!r}")
    most = budget * MAX_CHARS_PER_TOKEN  # a result of megabytes is not tokenized whole
    long = [len(t) > most for t in texts]
    texts = [_chars(t, most, side) if big else t for t, big in zip(texts, long)]
    pieces = [counter.encode(t) for t in texts]
    shares = fair_shares([len(p) for p in pieces], budget)
    return [cut(p, share, side, counter) if big or len(p) > share else t
            for t, p, share, big in zip(texts, pieces, shares, long)]


def _chars(text: str, most: int, side: str) -> str:
    """`most` characters of `text` on `side`."""
    if side == "left":
        return text[:most]
    if side == "right":
        return text[-most:]
    return text[:(most + 1) // 2] + text[len(text) - most // 2:]
