"""Distinct-n and identical-reply share, hand-counted."""

import pytest

from ragen_cli.monitor.diversity import distinct_n, identical_share, tokens


def test_tokens_split_words_and_punctuation():
    assert tokens("Go LEFT!! now") == ["go", "left", "!", "!", "now"]


def test_distinct_bigrams():
    # "a b c" -> (a,b),(b,c); "a b d" -> (a,b),(b,d): 4 bigrams, 3 distinct -> 0.75
    assert distinct_n(["a b c", "a b d"], 2) == 0.75
    # Identical replies: "x y" x 4 -> 4 bigrams, 1 distinct -> 0.25
    assert distinct_n(["x y"] * 4) == 0.25
    # "!!!!" -> 4 tokens, 3 bigrams all ("!","!") -> 1/3
    assert distinct_n(["!!!!"]) == pytest.approx(1 / 3)
    # bigrams do not cross texts: "a" and "b" hold none
    assert distinct_n(["a", "b"]) is None
    assert distinct_n(["a b", "b a"], 1) == 0.5  # 4 unigrams, 2 distinct
    with pytest.raises(ValueError):
        distinct_n(["a"], 0)


def test_identical_share():
    # "up" twice and " up " (stripped) -> 3 of 5 repeat another reply
    assert identical_share(["up", "up", " up ", "down", "left"]) == 0.6
    assert identical_share(["a", "b"]) == 0.0
    assert identical_share([]) is None
