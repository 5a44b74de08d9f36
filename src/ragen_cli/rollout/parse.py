"""Parse a model reply into actions.

The reply format follows RAGEN's reference code: with thinking on, the
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

The tags are the paper's by default; a model with reasoning tags of its own uses them
(`rollout.think_tags`, `rollout.answer_tags` -> `ReplyTags`), and parsing, the pre-fill and
the format line follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReplyTags:
    """The reply protocol's tags: (open, close) for the reasoning and for the answer."""

    think: tuple[str, str] = ("<think>", "</think>")
    answer: tuple[str, str] = ("<answer>", "</answer>")

    @classmethod
    def of(cls, rollout) -> ReplyTags:
        """The tags a spec's `RolloutSpec` names."""
        return cls(think=tuple(rollout.think_tags), answer=tuple(rollout.answer_tags))


PAPER_TAGS = ReplyTags()


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


def _think_answer(text: str, tags: ReplyTags = PAPER_TAGS) -> tuple[str, str] | None:
    """(think, answer) of the leftmost, laziest match of `<think>(.*?)</think>\\s*<answer>(.*?)</answer>`
    (the reference's `re.search`; `tags` name the four tags), found in linear time: the regex
    backtracks once per `<think>` and takes seconds on a reply that repeats the tag.

    Why this is the regex's match: a `</think>` that completes a match after some `<think>` also
    completes one after any earlier `<think>`, so the leftmost match starts at the first
    `<think>`; its lazy first group ends at the first `</think>` after it that is followed by
    white space, `<answer>` and, somewhere later, `</answer>`; the lazy second group ends at the
    first `</answer>` after that `<answer>`."""
    (t_open, t_close), (a_open, a_close) = tags.think, tags.answer
    start = text.find(t_open)
    if start < 0:
        return None
    last_close = text.rfind(a_close)
    j = text.find(t_close, start + len(t_open))
    while j >= 0:
        k = j + len(t_close)
        while k < len(text) and text[k].isspace():
            k += 1
        if text.startswith(a_open, k):
            if last_close < k + len(a_open):
                return None  # no `</answer>` after this `<answer>`, nor after any later one
            return text[start + len(t_open): j], text[k + len(a_open): text.find(a_close, k + len(a_open))]
        j = text.find(t_close, j + 1)
    return None


def _answer_only(text: str, tags: ReplyTags = PAPER_TAGS) -> str | None:
    """The first `<answer>` block: up to the next `</answer>`, else to the end (`_ANSWER`)."""
    a_open, a_close = tags.answer
    start = text.find(a_open)
    if start < 0:
        return None
    end = text.find(a_close, start + len(a_open))
    return text[start + len(a_open): end if end >= 0 else len(text)]


def parse_reply(text: str, think: bool, sep: str, max_actions: int, tags: ReplyTags = PAPER_TAGS) -> ParsedReply:
    """Parse `text` (the full reply, including any pre-filled `<think>`) into actions, in time
    linear in its length.

    The first match of the pattern wins; text before or after it is ignored (the reference
    code does the same with `re.search`)."""
    if think:
        found = _think_answer(text, tags)
        if found is None:
            return ParsedReply()
        thought, answer = found[0].strip(), found[1].strip()
    else:
        found_answer = _answer_only(text, tags)
        if found_answer is None:
            return ParsedReply()
        thought, answer = "", found_answer.strip()
    actions = split_actions(answer, sep, max_actions)
    return ParsedReply(actions=actions, format_ok=bool(actions), think=thought, answer=answer)
