"""parse_reply against the reference's regular expressions (the specification), on random
replies built from the tags, white space and words; and in linear time on replies that repeat a
tag (issue 21: the regex took seconds on 100 KB)."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_cli.rollout.parse import parse_reply, split_actions

THINK_ANSWER = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.DOTALL)
ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL)
PIECES = ["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "\t", "Up", "Left", "||", "x", "<", ">",
          "think", "</", "\u2003"]

replies = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def reference(text: str, think: bool):
    m = (THINK_ANSWER if think else ANSWER).search(text)
    if m is None:
        return [], False, "", ""
    thought, answer = (m.group(1).strip(), m.group(2).strip()) if think else ("", m.group(1).strip())
    actions = split_actions(answer, "||", 3)
    return actions, bool(actions), thought, answer


@settings(max_examples=600, deadline=None)
@given(replies, st.booleans())
def test_parse_reply_is_the_reference_regex(text, think):
    p = parse_reply(text, think, "||", 3)
    assert (p.actions, p.format_ok, p.think, p.answer) == reference(text, think)


def test_repeated_tags_parse_in_linear_time():
    for text in ["<think>" * 20000 + "x", "<think>a</think>" * 8000, "<answer>" * 20000,
                 "<think>" * 20000 + "</think> <answer>Up</answer>"]:
        start = time.perf_counter()
        parse_reply(text, True, "||", 3)
        parse_reply(text, False, "||", 3)
        # linear: under 3 ms here; a quadratic scan of 20000 tags is ~4e8 steps (tens of seconds),
        # so 0.5 s leaves 150x for a loaded shared machine and still catches it
        assert time.perf_counter() - start < 0.5, len(text)
    assert parse_reply("<think>" * 20000 + "</think> <answer>Up</answer>", True, "||", 3).actions == ["Up"]
