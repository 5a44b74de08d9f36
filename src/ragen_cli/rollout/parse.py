"""Parse a model reply into actions.

The reply format follows the reference code (REFERENCE.md section 1): with thinking on, the
reply must contain `<think>...</think>` followed by `<answer>...</answer>`; with thinking off,
only `<answer>...</answer>` is required. The answer is split on the action separator, each
piece stripped, empty pieces dropped, and at most `max_actions` kept (extra actions are
dropped, not an error). A reply without a usable answer block is a format error: the driver
takes no action and adds the format penalty for that turn.

Deviations from the reference: with thinking off, `<answer>` is pre-filled (as the reference
pre-fills `<think>`) and a missing `</answer>` at the very end of the reply is accepted, so
`<answer>Left || Up` parses; whatever the answer holds is then judged by the env (an action the
env does not know is invalid, not a format error). Also, a `<answer>` block that contains no action at all (empty or
only separators) is a format error here; the reference passes an empty action list on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_THINK_ANSWER = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.DOTALL)
# Answer-only mode: `<answer>` is pre-filled, so a reply that ends (end of turn) before writing
# `</answer>` still has a complete answer block; small models often stop right after the action.
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ParsedReply:
    """The result of parsing one reply."""

    actions: list[str] = field(default_factory=list)  # at most max_actions, in order
    format_ok: bool = False  # False: no usable <answer> block (format error)
    think: str = ""  # the reasoning text ('' when thinking is off or missing)
    answer: str = ""  # the raw answer text, stripped


def split_actions(answer: str, sep: str, max_actions: int) -> list[str]:
    """Split an answer on `sep`, strip each piece, drop empties, keep the first `max_actions`."""
    if not sep:
        raise ValueError("action separator must not be empty")
    pieces = [piece.strip() for piece in answer.split(sep)]
    return [piece for piece in pieces if piece][: max(0, max_actions)]


def parse_reply(text: str, think: bool, sep: str, max_actions: int) -> ParsedReply:
    """Parse `text` (the full reply, including any pre-filled `<think>`) into actions.

    The first match of the pattern wins; text before or after it is ignored (the reference
    code does the same with `re.search`)."""
    if think:
        match = _THINK_ANSWER.search(text)
        if match is None:
            return ParsedReply()
        thought, answer = match.group(1).strip(), match.group(2).strip()
    else:
        match = _ANSWER.search(text)
        if match is None:
            return ParsedReply()
        thought, answer = "", match.group(1).strip()
    actions = split_actions(answer, sep, max_actions)
    return ParsedReply(actions=actions, format_ok=bool(actions), think=thought, answer=answer)
