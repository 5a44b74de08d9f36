"""The reward functions ragen ships for dataset tasks (envs/rewards.py), by hand."""

from __future__ import annotations

from ragen_cli.envs.rewards import exact_match, first_number, normalise_answer


def test_normalise_answer():
    assert [normalise_answer(x) for x in ("83.", " 83 ", "83.0", "'Paris'", "A  b", "-2.50")] == \
        ["83", "83", "83", "paris", "a b", "-2.5"]


def test_exact_match():
    assert exact_match(["q"] * 4, ["83", "83.", "84", "Paris "], answer=["83", "83", "83", "paris"]) == [1.0, 1.0, 0.0, 1.0]
    assert exact_match(["q"], ["83"]) == [None]  # no answer column


def test_first_number():
    # the first number decides: "83\n83\n8" -> 83; "You have 1 actions left." -> 1; none -> 0
    got = first_number(["q"] * 4, ["83\n83\n8", "You have 1 actions left.", "no idea", "It is 47, not 83"],
                       answer=["83", "83", "83", "83"])
    assert got == [1.0, 0.0, 0.0, 0.0]
    assert first_number(["q"], ["5"], answer=[None]) == [None]
