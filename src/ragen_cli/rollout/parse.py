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

from dataclasses import dataclass, field


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


def _think_answer(text: str) -> tuple[str, str] | None:
    """(think, answer) of the leftmost, laziest match of `<think>(.*?)</think>\\s*<answer>(.*?)</answer>`
    (the reference's `re.search`), found in linear time: the regex backtracks once per `<think>`
    and takes seconds on a reply that repeats the tag (issue 21).

    Why this is the regex's match: a `</think>` that completes a match after some `<think>` also
    completes one after any earlier `<think>`, so the leftmost match starts at the first
    `<think>`; its lazy first group ends at the first `</think>` after it that is followed by
    white space, `<answer>` and, somewhere later, `</answer>`; the lazy second group ends at the
    first `</answer>` after that `<answer>`."""
    start = text.find("<think>")
    if start < 0:
        return None
    last_close = text.rfind("</answer>")
    j = text.find("</think>", start + 7)
    while j >= 0:
        k = j + 8
        while k < len(text) and text[k].isspace():
            k += 1
        if text.startswith("<answer>", k):
            if last_close < k + 8:
                return None  # no `</answer>` after this `<answer>`, nor after any later one
            return text[start + 7: j], text[k + 8: text.find("</answer>", k + 8)]
        j = text.find("</think>", j + 1)
    return None


def _answer_only(text: str) -> str | None:
    """The first `<answer>` block: up to the next `</answer>`, else to the end (`_ANSWER`)."""
    start = text.find("<answer>")
    if start < 0:
        return None
    end = text.find("</answer>", start + 8)
    return text[start + 8: end if end >= 0 else len(text)]


def parse_reply(text: str, think: bool, sep: str, max_actions: int) -> ParsedReply:
    """Parse `text` (the full reply, including any pre-filled `<think>`) into actions, in time
    linear in its length.

    The first match of the pattern wins; text before or after it is ignored (the reference
    code does the same with `re.search`)."""
    if think:
        found = _think_answer(text)
        if found is None:
            return ParsedReply()
        thought, answer = found[0].strip(), found[1].strip()
    else:
        found_answer = _answer_only(text)
        if found_answer is None:
            return ParsedReply()
        thought, answer = "", found_answer.strip()
    actions = split_actions(answer, sep, max_actions)
    return ParsedReply(actions=actions, format_ok=bool(actions), think=thought, answer=answer)
