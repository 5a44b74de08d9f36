"""Running-maximum env (envs/runmax.py). Seeded deals come from numpy's PCG64 via gymnasium's
`np_random(seed)`; seed 0 deals 48, 71 (turn 1), then 74, 73 (printed once with numpy)."""

import numpy as np
import pytest

from ragen_cli.envs.config import EnvConfigError
from ragen_cli.envs.registry import make_env
from ragen_cli.envs.runmax import deal, deal_twin, first_number

NEXT = "Next card: {}. What is the largest number shown so far? Reply with that number only."


def test_seed0_first_observation_and_a_perfect_episode():
    env = make_env("runmax")
    obs, info = env.reset(seed=0)
    assert obs == "Which number is larger: 48 or 71? Reply with that number only."
    assert not info["success"] and env.valid_actions() == []
    # turn 1: max(48, 71) = 71
    obs, reward, terminated, truncated, info = env.step("71")
    assert (obs, reward, terminated, truncated) == (NEXT.format(74), 1.0, False, False)
    assert info["action_is_valid"] and info["right"] and "record" not in info
    # turn 2: card 74 > 71, a record; the reply may wrap the number in words
    obs, reward, terminated, _, info = env.step("The largest is 74.")
    assert (obs, reward, terminated, info["record"]) == (NEXT.format(73), 1.0, False, True)
    # turn 3: card 73 < 74, not a record: the answer is still 74. The episode ends here.
    obs, reward, terminated, truncated, info = env.step("74")
    assert (obs, reward, terminated, truncated) == ("Game over: 3 of 3 right.", 1.0, True, False)
    assert info["success"] and info["record"] is False and info["turn"] == 3
    # past the end: nothing more is paid
    assert env.step("74")[1:3] == (0.0, True)


def test_echoing_the_card_fails_on_a_non_record():
    env = make_env("runmax")
    env.reset(seed=0)
    rewards = [env.step(a)[1] for a in ("71", "74")]
    obs, reward, terminated, _, info = env.step("73")  # the card shown, not the maximum (74)
    assert rewards + [reward] == [1.0, 1.0, 0.0]
    assert terminated and not info["success"] and not info["right"]
    assert obs == "Game over: 2 of 3 right."


def test_wrong_and_unparsable_replies_score_0_and_the_game_moves_on():
    env = make_env("runmax")
    env.reset(seed=0)
    obs, reward, _, _, info = env.step("48")  # the smaller number
    assert (obs, reward, info["action_is_valid"], info["right"]) == (NEXT.format(74), 0.0, True, False)
    obs, reward, terminated, _, info = env.step("I do not remember")  # no number: invalid, 0
    assert (obs, reward, terminated) == (NEXT.format(73), 0.0, False)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    _, reward, terminated, _, info = env.step("74")  # right again, but success needs all three
    assert (reward, terminated, info["success"]) == (1.0, True, False)


def test_first_number_reads_the_reply():
    assert first_number("74") == 74.0 and first_number(" 74.0\n") == 74.0
    assert first_number("73 or 74") == 73.0  # the first number decides
    assert first_number("-74") == -74.0 and first_number("none") is None


def test_turns_and_config_checks():
    env = make_env("runmax", {"turns": 2, "max_actions": 2})
    env.reset(seed=0)
    assert env.step("71")[2] is False
    _, _, terminated, _, info = env.step("74")
    assert terminated and info["success"]
    for bad in ({"turns": 0}, {"max_delta": 0}, {"max_delta": 20}, {"turns": 4}):  # turns 4 > max_actions 3
        with pytest.raises(EnvConfigError):
            make_env("runmax", bad)


def test_deal_follows_the_design():
    records = later = 0
    for seed in range(2000):
        cards = deal(np.random.default_rng(seed))
        hi, lo = max(cards[:2]), min(cards[:2])
        assert 20 <= hi <= 80 and 10 <= lo < hi and len(set(cards)) == 4
        for t in (2, 3):
            top = max(cards[:t])
            assert 1 <= abs(cards[t] - top) <= 9  # running max +- d, d in 1..9
            records += cards[t] > top
            later += 1
    # fair sign; the redraw (a card equal to one shown) only ever removes non-records, so slightly above 1/2
    assert 0.47 < records / later < 0.56
    assert {tuple(deal(np.random.default_rng(7))) for _ in range(3)} == {tuple(deal(np.random.default_rng(7)))}


def test_twins_share_the_turn2_card_one_record_one_not():
    env = make_env("runmax", {"twins": True})
    echo_right = 0
    for odd in range(123, 323, 2):  # validation seeds 123..322: 100 whole pairs
        a, b = deal_twin(odd, np.random.default_rng(odd)), deal_twin(odd + 1, np.random.default_rng(odd + 1))
        d = a[2] - max(a[:2])
        assert a[2] == b[2]  # the same turn-2 card
        assert 1 <= d <= 9 and max(b[:2]) == b[2] + d  # odd twin: a record by d; even twin: d below
        for seed in (odd, odd + 1):
            obs, _ = env.reset(seed=seed)
            env.step(obs.split()[4])  # turn 1: the first number shown (either)
            card = env.render().split()[2].rstrip(".")
            echo_right += env.step(card)[1]
    assert echo_right == 100  # echoing the card is right in exactly one twin of each pair


def _bench(name: str):
    import importlib
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    return importlib.import_module(name)


def test_thresholds_on_both_scored_by_hand():
    """bench/runmax_shortcuts.py: echo the card when (card >= a) and/or (previous < b), else repeat.
    Two 2-turn deals with the same turn-1 maximum 50: card 55 (a record: right = 55) and card 45
    (not: right = 50)."""
    sc = _bench("runmax_shortcuts")
    deals = [[30, 50, 55], [30, 50, 45]]
    grid = np.array([50, 56])
    both = sc.both_success(deals, grid, np.array([60]), "and")
    assert both[:, 0].tolist() == [1.0, 0.5]  # a=50: echo 55, repeat on 45 (both right); a=56: repeat twice
    assert sc.both_success(deals, np.array([100]), np.array([0]), "or")[0, 0] == 0.5  # never echo: repeat
    assert sc.both_success(deals, np.array([0]), np.array([0]), "or")[0, 0] == 0.5  # always echo
    # the vectorised grid agrees with the rule played turn by turn on 3-turn deals
    deals3 = [deal(np.random.default_rng(s)) for s in range(300)]
    for a, b, join in [(40, 60, "and"), (55, 45, "or"), (70, 30, "and")]:
        ok = 0
        for cards in deals3:
            prev, right = max(cards[:2]), True
            for t in (2, 3):
                prev = sc.both_policy(a, b, join)(t, [cards[t]], prev)
                right &= prev == max(cards[: t + 1])
            ok += right
        assert sc.both_success(deals3, np.array([a]), np.array([b]), join)[0, 0] == ok / 300


def test_replies_classified_against_the_dealt_cards():
    """bench/runmax_replies.py reads each seed's cards from the env and names the turn-2 reply."""
    rp = _bench("runmax_replies")
    env = make_env("runmax", {"turns": 2, "twins": True})
    env.reset(seed=123)  # odd twin: the turn-2 card is a record
    lo, hi, card = sorted(env._cards[:2]) + [env._cards[2]]
    assert card > hi
    turns = lambda r1, r2: [{"reply": r1, "reward": 1.0}, {"reply": r2}]  # noqa: E731
    assert rp.classify(env, {"seed": 123, "turns": turns(str(hi), f"{card}")}) == [(2, True, "right")]
    assert rp.classify(env, {"seed": 123, "turns": turns(str(hi), f"It is {hi}.")}) == [(2, True, "repeat")]
    assert rp.classify(env, {"seed": 123, "turns": turns(str(hi), "none")}) == [(2, True, "other")]
    env.reset(seed=124)  # even twin: the same card, not a record
    hi2 = max(env._cards[:2])
    assert env._cards[2] == card and hi2 > card
    assert rp.classify(env, {"seed": 124, "turns": turns(str(hi2), str(card))}) == [(2, False, "echo")]
    assert rp.classify(env, {"seed": 124, "turns": turns(str(hi2), str(hi2))}) == [(2, False, "right")]
