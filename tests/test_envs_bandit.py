"""Bandit env and the registry. Seeded draws come from numpy's PCG64 via gymnasium's
`np_random(seed)` = `np.random.default_rng(seed)`; the first two `random()` draws are
seed 0: 0.637, 0.270; seed 3: 0.0856, 0.2368 (printed once with numpy, stable across machines)."""

import numpy as np
import pytest

from ragen_cli.envs.config import EnvConfigError
from ragen_cli.envs.registry import check_env, list_envs, make_env


def test_seed0_first_observation_and_losing_risky_pull():
    env = make_env("bandit")
    obs, info = env.reset(seed=0)
    # draw 0.637 >= 0.5 -> risky arm (Dragon) listed first
    assert obs == "There are 2 arms, named Dragon and Phoenix. Choose between Dragon and Phoenix."
    assert env.valid_actions() == ["Dragon", "Phoenix"]
    obs, reward, terminated, truncated, info = env.step("  dragon ")
    # second draw 0.270 >= 0.25 -> the risky arm pays 0 this time, still the better-EV choice
    assert (obs, reward, terminated, truncated) == ("Dragon: 0 points", 0.0, True, False)
    assert info["success"] and info["chose_high_ev"] and info["action_is_valid"]


def test_seed3_risky_arm_pays_and_safe_arm_pays_low_score():
    env = make_env("bandit")
    obs, _ = env.reset(seed=3)
    # draw 0.0856 < 0.5 -> safe arm (Phoenix) listed first
    assert obs.startswith("There are 2 arms, named Phoenix and Dragon.")
    # second draw 0.2368 < 0.25 -> risky pays 1.0
    assert env.step("DRAGON")[1] == 1.0
    env.reset(seed=3)
    obs, reward, terminated, _, info = env.step("Phoenix")
    assert (obs, reward, terminated) == ("Phoenix: 0.1 points", 0.1, True)
    assert not info["success"] and not info["chose_high_ev"]


def test_success_follows_expected_value_not_name():
    # safe EV 0.5 > risky EV 1.0 * 0.25 -> the safe arm is the better choice
    env = make_env("bandit", {"low_arm_score": 0.5})
    env.reset(seed=0)
    assert env.step("phoenix")[4]["success"]


def test_invalid_action_changes_nothing_and_uses_budget():
    env = make_env("bandit-test", {"max_actions": 2})
    obs0, _ = env.reset(seed=1)
    assert "Trader" in obs0 and "Librarian" in obs0
    obs, reward, terminated, truncated, info = env.step("Dragon")
    assert (obs, reward, terminated, truncated) == (obs0, 0.0, False, False)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    _, _, terminated, truncated, _ = env.step("pull lever")
    assert (terminated, truncated) == (False, True)


def test_random_strings_never_raise():
    rng = np.random.default_rng(7)
    alphabet = list("abcdefghijklmnopqrstuvwxyz DRAGONphoenix[]<>|\n\t0123456789")
    env = make_env("bandit", {"max_actions": 1000})
    env.reset(seed=5)
    for _ in range(1000):
        action = "".join(rng.choice(alphabet, size=rng.integers(0, 20)))
        _, _, terminated, _, info = env.step(action)
        assert isinstance(info["action_is_valid"], bool)
        if terminated:
            env.reset(seed=5)
    env.step(None)  # not even a string


def test_same_seed_same_episode_and_payout_rate():
    a, b = make_env("bandit"), make_env("bandit")
    runs = [[(env.reset(seed=s)[0], env.step("dragon")[1]) for s in range(400)] for env in (a, b)]
    assert runs[0] == runs[1]
    # risky arm pays 1.0 w.p. 0.25: 400 draws -> std sqrt(0.25 * 0.75 / 400) = 0.0217; 4 std
    rate = sum(r for _, r in runs[0]) / 400
    assert abs(rate - 0.25) < 4 * 0.0217


def test_config_errors_name_valid_keys_and_types():
    problems = check_env("bandit", {"foo": 1, "high_arm_prob": "high"})
    assert any("unknown key 'foo'" in p and "valid keys: action_match, arm_names, high_arm_prob" in p for p in problems)
    assert any("'high_arm_prob' must be float" in p for p in problems)
    assert check_env("bandit", {"high_arm_prob": 1.5}) == ["env 'bandit': high_arm_prob must be in [0, 1], got 1.5"]
    assert check_env("bandit", {"arm_names": ["A", "a"]}) == ["env 'bandit': arm_names must differ, got ('A', 'a')"]
    assert "'arm_names' must have 2 elements, got 3" in check_env("bandit", {"arm_names": ["A", "B", "C"]})[0]
    assert "'max_actions' must be int, got 1.5" in check_env("bandit", {"max_actions": 1.5})[0]
    assert "'max_actions' must be int, got True" in check_env("bandit", {"max_actions": True})[0]
    assert check_env("bandit", {"high_arm_prob": 1}) == []
    with pytest.raises(EnvConfigError):
        make_env("bandit", {"nope": 0})


def test_registry_names_and_custom_class_path():
    names = [n for n, _ in list_envs()]
    assert names[:2] == ["bandit", "bandit-test"] and "webshop" in names
    assert "unknown env 'sokobann'" in check_env("sokobann", {})[0]
    env = make_env("ragen_cli.envs.bandit:BanditEnv", {"arm_names": ["Cat", "Tiger"]})
    assert "Cat" in env.reset(seed=0)[0]
    assert "not a subclass" in check_env("ragen_cli.envs.registry:make_env")[0]
    assert "cannot import" in check_env("no_such_module:Env")[0]


def test_answer_naming_exactly_one_arm_picks_it():
    from ragen_cli.envs.base import named_action

    arms = ("Phoenix", "Dragon")
    assert named_action(" dragon ", arms) == "Dragon"  # the bare name, any case
    assert named_action("I choose to pull the arm named Phoenix.", arms) == "Phoenix"
    assert named_action("Phoenix and Dragon", arms) is None  # both named: no choice
    assert named_action("Dragonfly", arms) is None  # whole words only
    assert named_action("Your answer is:", arms) is None
    # Through the env: a sentence naming the risky arm is a valid, effective pull of it.
    env = make_env("bandit")
    env.reset(seed=3)
    _, _, terminated, _, info = env.step("The answer is Dragon")
    assert terminated and info["action_is_valid"] and info["arm"] == "Dragon" and info["chose_high_ev"]


def test_a_wrong_element_is_named_not_the_whole_value():
    from ragen_cli.envs.registry import check_env

    assert "'arm_names[1]' must be str, got 7" in check_env("bandit", {"arm_names": ["Phoenix", 7]})[0]
    assert "'arm_names' must have 2 elements, got 1" in check_env("bandit", {"arm_names": ["Phoenix"]})[0]
    symbols = {"wall": 5, "floor": "_", "target": "O", "box_on_target": "v", "box": "X", "player": "P", "player_on_target": "S"}
    assert "'symbols.wall' must be str, got 5" in check_env("sokoban", {"symbols": symbols})[0]
