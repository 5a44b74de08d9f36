"""Countdown: safe equation scoring, generated puzzles are solvable, env episode."""

from fractions import Fraction

import numpy as np
import pytest

from ragen_cli.envs.countdown_math import NotAnEquation, generate_puzzle, parse_equation, score
from ragen_cli.envs.registry import make_env


def test_parse_equation_values_and_numbers():
    assert parse_equation("(3 + 5) * 2") == (Fraction(16), [3, 5, 2])
    assert parse_equation("7 / 2 = 3.5") == (Fraction(7, 2), [7, 2])
    assert parse_equation("4 / (2 - 2)") == (None, [4, 2, 2])
    for bad in ["__import__('os')", "2 ** 3", "x + 1", "3 +", "", "1 = 2 = 3", "-3 + 4",
                "(" * 150 + "1" + ")" * 150, "1" * 300]:
        with pytest.raises(NotAnEquation):
            parse_equation(bad)


def test_score_rules():
    nums = [3, 5, 2]
    assert score("(3 + 5) * 2", nums, 16) == (1.0, True)
    assert score("3 + 5 + 2", nums, 16) == (0.1, True)     # well-formed, value 10 != 16
    assert score("(3 + 5) * 2 * 1", nums, 16) == (0.1, True)  # extra number 1
    assert score("(3 + 5) * 2", nums, 16, format_score=0.0) == (1.0, True)
    assert score("sixteen", nums, 16) == (0.0, False)


def test_generated_puzzles_are_solved_by_their_solution():
    rng = np.random.default_rng(0)
    for _ in range(300):
        numbers, target, solution = generate_puzzle(rng, int(rng.integers(3, 5)), 99, 1, 100)
        assert 1 <= target <= 100 and all(1 <= n <= 99 for n in numbers)
        assert score(solution, numbers, target) == (1.0, True)


def test_env_seed1_observation_and_rewards():
    env = make_env("countdown")
    obs, info = env.reset(seed=1)
    assert obs == "Target: 31, nums: [51, 75, 95]"
    assert score("75 - (95 - 51)", [51, 75, 95], 31)[0] == 1.0  # 75 - 44 = 31, by hand
    obs, r, term, trunc, info = env.step("75 - (95 - 51)")
    assert (r, term, info["success"]) == (1.0, True, True)
    env.reset(seed=1)
    obs, r, term, trunc, info = env.step("51 + 75 + 95")
    assert (r, term, info["success"], info["action_is_valid"]) == (0.1, True, False, True)
    env.reset(seed=1)
    obs, r, term, trunc, info = env.step("import os")
    assert (obs, r, term, trunc, info["action_is_valid"]) == ("Target: 31, nums: [51, 75, 95]", 0.0, False, True, False)


def test_random_strings_never_raise():
    rng = np.random.default_rng(3)
    env = make_env("countdown", {"max_actions": 1000})
    env.reset(seed=0)
    for _ in range(1000):
        action = "".join(rng.choice(list("0123456789+-*/()= .eax_'"), size=rng.integers(0, 30)))
        _, r, term, _, _ = env.step(action)
        assert r in (0.0, 0.1, 1.0)
        if term:
            env.reset(seed=0)
