"""Reply parsing edge cases (issue 4): missing tags, extra text, too many actions, empty
answer, unicode, answer-only mode."""

from __future__ import annotations

import pytest

from ragen_cli.rollout.parse import parse_reply, split_actions


def test_think_and_answer_split_on_separator():
    reply = "<think>box is left</think> <answer>Left || Up</answer>"
    parsed = parse_reply(reply, think=True, sep="||", max_actions=5)
    assert parsed.format_ok
    assert parsed.actions == ["Left", "Up"]
    assert parsed.think == "box is left"
    assert parsed.answer == "Left || Up"


def test_extra_text_around_the_blocks_is_ignored():
    reply = "Sure!<think>x</think>\n\n<answer> Down </answer> trailing words<|im_end|>"
    assert parse_reply(reply, think=True, sep="||", max_actions=5).actions == ["Down"]


def test_more_actions_than_allowed_keeps_the_first_ones():
    # 4 actions, max 2 -> the first two in order.
    reply = "<think>t</think><answer>Up || Down || Left || Right</answer>"
    parsed = parse_reply(reply, think=True, sep="||", max_actions=2)
    assert parsed.actions == ["Up", "Down"] and parsed.format_ok


@pytest.mark.parametrize("reply", [
    "<think>t</think>",                               # no answer
    "<answer>Up</answer>",                            # think mode needs <think>
    "<think>t</think><answer>Up",                     # unclosed answer
    "<think>t<answer>Up</answer>",                    # unclosed think
    "plain text Up",                                  # no tags at all
    "<think>t</think> words <answer>Up</answer>",     # text between the blocks
])
def test_missing_or_broken_tags_are_format_errors(reply):
    parsed = parse_reply(reply, think=True, sep="||", max_actions=5)
    assert not parsed.format_ok and parsed.actions == []


@pytest.mark.parametrize("answer", ["", "   ", "|| ||", "\n"])
def test_empty_answer_is_a_format_error(answer):
    parsed = parse_reply(f"<think>t</think><answer>{answer}</answer>", think=True, sep="||", max_actions=5)
    assert not parsed.format_ok and parsed.actions == []


def test_empty_pieces_are_dropped():
    # "Up ||  || Left ||" -> pieces "Up", "", "Left", "" -> ["Up", "Left"].
    parsed = parse_reply("<think></think><answer>Up ||  || Left ||</answer>", think=True, sep="||", max_actions=5)
    assert parsed.actions == ["Up", "Left"]


def test_unicode_is_kept_verbatim():
    reply = "<think>箱子在左边 ✓</think><answer>Gauche || Größe√ || 上</answer>"
    parsed = parse_reply(reply, think=True, sep="||", max_actions=5)
    assert parsed.actions == ["Gauche", "Größe√", "上"]
    assert parsed.think == "箱子在左边 ✓"


def test_answer_only_mode_needs_no_think_block():
    assert parse_reply("<answer>Phoenix</answer>", think=False, sep="||", max_actions=1).actions == ["Phoenix"]
    assert parse_reply("<think>x</think><answer>A || B</answer>", think=False, sep="||", max_actions=1).actions == ["A"]
    assert not parse_reply("Phoenix", think=False, sep="||", max_actions=1).format_ok
    # "<answer>" is pre-filled in answer-only mode: an answer cut by the end of the reply counts,
    # a closing tag ends it early, and an empty unclosed answer is still a format error.
    assert parse_reply("<answer>Phoenix", think=False, sep="||", max_actions=2).actions == ["Phoenix"]
    assert parse_reply("<answer>Up || Left</answer> more", think=False, sep="||", max_actions=2).actions == ["Up", "Left"]
    assert not parse_reply("<answer>  ", think=False, sep="||", max_actions=1).format_ok


def test_first_match_wins_and_multiline_content():
    reply = "<think>a\nb</think>\n<answer>Up\n||\nDown</answer><think>c</think><answer>Left</answer>"
    assert parse_reply(reply, think=True, sep="||", max_actions=5).actions == ["Up", "Down"]


def test_other_separator():
    assert split_actions("a, b,,c", ",", 5) == ["a", "b", "c"]
    with pytest.raises(ValueError):
        split_actions("a", "", 5)
