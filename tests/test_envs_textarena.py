"""The TextArena adapter (`env.train.name: textarena`) against real textarena 0.7.4 games, all
offline: GuessTheNumber-v0 (1 player), TicTacToe-v0 and ConnectFour-v0 (2 players, against the
random opponent).

GuessTheNumber-v0's rules (textarena/envs/GuessTheNumber/env.py, registered with min 1, max 20,
max_turns 10): a guess is a number in brackets; a right guess ends the game with reward 1; a
wrong one gets "The target number is higher/lower."; an unparsable, out-of-range or repeated
guess is invalid: the first gets a retry, a second in a row ends the game with the completion
reward 1 - |last guess - target| / 19 (0 without a guess). The turn limit is checked before the
turn counter moves, so it ends the game on the 11th valid guess, with the completion reward.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from ragen_cli.envs.adapters.textarena_env import listed_moves
from ragen_cli.envs.config import EnvConfigError
from ragen_cli.envs.registry import check_env, make_env
from ragen_cli.rollout.driver import run_rollouts
from ragen_cli.spec.models import EnvRef, RolloutSpec
from rollout_scripted import ScriptedBackend

GUESS = {"game": "GuessTheNumber-v0"}


def secret(env) -> int:
    return env.state.game_state["game_number"]


def bisect(env) -> list[tuple[int, float, bool]]:
    """Play by bisection on the hints; -> (guess, reward, terminated) per move."""
    lo, hi, moves = 1, 20, []
    for _ in range(10):
        guess = (lo + hi) // 2
        obs, reward, term, trunc, info = env.step(f"[{guess}]")
        moves.append((guess, reward, term))
        if term or trunc:
            return moves
        lo, hi = (guess + 1, hi) if "higher" in obs else (lo, guess - 1)
    return moves


# ----------------------------------------------------------------- single player
def test_first_observation_and_instruction():
    env = make_env("textarena", GUESS)
    obs, info = env.reset(seed=0)
    assert obs == "Your move."  # the game's only message so far is its prompt: the instruction
    assert env.instruction().startswith("You are Player 0. You are playing Guess The Number.\n"
                                        "You have to guess the number between 1 and 20 within 10 turns.")
    assert env.valid_actions() == [] and info["success"] is False


def test_bisection_wins_with_reward_one():
    for seed in (0, 1, 2):
        env = make_env("textarena", GUESS)
        env.reset(seed=seed)
        target = secret(env)
        moves = bisect(env)
        # bisection over 1..20 needs at most 5 guesses (2^5 > 20); only the last one pays
        assert len(moves) <= 5 and moves[-1] == (target, 1.0, True)
        assert all(r == 0.0 and not t for _, r, t in moves[:-1])
        assert env.step("[1]")[4]["action_is_valid"] is False  # the game is over


def test_hints_follow_the_target():
    env = make_env("textarena", GUESS)
    env.reset(seed=4)
    target = secret(env)
    wrong = 1 if target != 1 else 20
    obs, reward, term, _, info = env.step(f"[{wrong}]")
    assert obs == f"[GAME] The target number is {'higher' if wrong < target else 'lower'}."
    assert (reward, term, info["action_is_valid"]) == (0.0, False, True)


def test_two_invalid_moves_end_the_game_with_no_reward():
    env = make_env("textarena", GUESS)
    env.reset(seed=0)
    obs, reward, term, _, info = env.step("seven")  # the action wrapper makes it [seven]: no number
    assert obs.startswith("[GAME] You attempted an invalid move.") and not term and info["action_is_valid"] is False
    obs, reward, term, trunc, info = env.step("[abc]")
    assert (reward, term, trunc, info["action_is_valid"], info["success"]) == (0.0, True, False, False, False)
    assert "Invalid Move" in info["reason"]


def test_turn_limit_pays_the_completion_reward():
    env = make_env("textarena", GUESS)
    env.reset(seed=3)
    target = secret(env)
    guesses = [n for n in range(1, 21) if n != target][:11]
    steps = [env.step(f"[{g}]") for g in guesses]
    assert [s[2] for s in steps] == [False] * 10 + [True]
    assert steps[-1][1] == pytest.approx(1 - abs(guesses[-1] - target) / 19)
    assert steps[-1][4]["success"] is False  # below success_reward 1


def test_max_actions_truncates_before_the_game_ends():
    env = make_env("textarena", {**GUESS, "max_actions": 2})
    env.reset(seed=0)
    wrong = [n for n in (1, 2, 3) if n != secret(env)]
    steps = [env.step(f"[{g}]") for g in wrong[:2]]
    assert [(s[1], s[2], s[3]) for s in steps] == [(0.0, False, False), (0.0, False, True)]


def test_same_seed_same_game_and_the_global_generators_are_left_alone():
    random.seed(99)
    np.random.seed(99)
    expected_py, expected_np = random.Random(99).random(), np.random.RandomState(99).random_sample()
    a, b, c = (make_env("textarena", GUESS) for _ in range(3))
    a.reset(seed=7)
    b.reset(seed=8)
    a.step("[10]")  # steps of other episodes in between change nothing
    c.reset(seed=7)
    assert secret(a) == secret(c)
    # TextArena calls random.seed(seed) on every reset: inside the adapter, that is the episode's own state
    assert random.random() == expected_py and np.random.random_sample() == expected_np


def test_full_observation_is_the_games_own_text():
    env = make_env("textarena", {**GUESS, "observation": "full"})
    obs, _ = env.reset(seed=0)
    assert obs.startswith("\n[GAME] You are Player 0. You are playing Guess The Number.")
    obs = env.step("[10]")[0]
    assert re.search(r"Enter your guess\.\n\[Player\] \[10\]\n\[GAME\] The target number is (higher|lower)\.$", obs)
    assert env.instruction().startswith("You are playing the TextArena game GuessTheNumber-v0.")


# ----------------------------------------------------------------- two players
def board(obs: str) -> list[str]:
    """The last TicTacToe board in a text: cells 0..8, '' where empty."""
    rows = re.findall(r"^ (.) \| (.) \| (.) $", obs.split("Current Board:")[-1], re.MULTILINE)
    return ["" if c.isdigit() else c for row in rows for c in row]


def three_in_a_row(cells: list[str], mark: str) -> bool:
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    return any(all(cells[i] == mark for i in line) for line in lines)


def test_listed_moves_parses_the_games_lists():
    assert listed_moves("Available Moves: '[0]', '[4]'") == ["[0]", "[4]"]
    assert listed_moves("Valid moves: '[2, 3]', '[3, 2]'\nCurren Scores") == ["[2, 3]", "[3, 2]"]
    assert listed_moves("[GAME] Your available actions are: '[check]', '[bet]'") == ["[check]", "[bet]"]
    assert listed_moves("Available Moves: up, down") == ["up", "down"]
    assert listed_moves("Available Moves: '[0]'\n...\nAvailable Moves: '[8]'") == ["[8]"]  # the latest
    assert listed_moves("no list here") == []


def test_tictactoe_against_the_random_opponent_to_the_end():
    # The model is Player 0 ('O', moves first) and always takes the first listed cell.
    env = make_env("textarena", {"game": "TicTacToe-v0"})
    obs, _ = env.reset(seed=5)
    assert board(obs) == [""] * 9 and env.valid_actions() == [f"[{i}]" for i in range(9)]
    for _ in range(5):
        before = board(obs)
        move = env.valid_actions()[0]
        obs, reward, term, trunc, info = env.step(move)
        after = board(obs)
        assert info["action_is_valid"] is True and after[int(move[1])] == "O"
        # the opponent answered in a cell that was free (one X more) unless the game ended first
        placed = [i for i in range(9) if after[i] != before[i]]
        assert len(placed) == (1 if term and (three_in_a_row(after, "O") or all(after)) else 2)
        if term:
            break
    assert term and not trunc
    # TextArena's rewards: win 1, loss -1, draw 0, read off the final board
    expected = 1.0 if three_in_a_row(after, "O") else -1.0 if three_in_a_row(after, "X") else 0.0
    assert reward == expected and info["success"] is (expected == 1.0)


def test_tictactoe_same_seed_same_opponent_and_player_one_waits_for_it():
    def opening(seed):
        env = make_env("textarena", {"game": "TicTacToe-v0"})
        env.reset(seed=seed)
        return env.step("[4]")[0]

    assert opening(3) == opening(3)
    second = make_env("textarena", {"game": "TicTacToe-v0", "player": 1})
    obs, _ = second.reset(seed=3)
    cells = board(obs)  # Player 0 (the opponent, 'O') has moved in the reset: one mark, the model's turn
    assert cells.count("O") == 1 and cells.count("X") == 0 and len(second.valid_actions()) == 8
    # the model's first view: the empty board dealt at reset, then the opponent's move and the new board
    assert obs.startswith("[GAME] Current Board:") and "\n[Player 0] [" in obs


def test_tictactoe_occupied_cell_is_invalid_and_the_turn_stays():
    env = make_env("textarena", {"game": "TicTacToe-v0"})
    env.reset(seed=1)
    obs = env.step("[4]")[0]
    taken = [i for i, c in enumerate(board(obs)) if c][-1]  # the opponent's cell
    obs, reward, term, _, info = env.step(f"[{taken}]")
    assert "cell " + str(taken) + " is already occupied" in obs and info["action_is_valid"] is False and not term


def test_connectfour_opponent_draws_from_the_given_moves():
    cfg = {"game": "ConnectFour-v0", "opponent_moves": [f"[col {i}]" for i in range(7)]}
    env = make_env("textarena", cfg)
    env.reset(seed=0)
    obs, reward, term, _, info = env.step("[col 3]")
    grid = obs.split("-------------\n")[-1].splitlines()[:6]
    # after the model's disc (X, column 3) and the opponent's (O), the bottom rows hold two discs
    assert info["action_is_valid"] and not term
    assert "".join(grid).count("X") == 1 and "".join(grid).count("O") == 1 and grid[-1][6] == "X"


# ----------------------------------------------------------------- failure cases
@pytest.mark.parametrize("config, message", [
    ({"game": "GuessTheNumbr-v0"}, "unknown TextArena game 'GuessTheNumbr-v0' (textarena 0.7.4)"),
    ({}, "game must name a TextArena env id"),
    ({"game": "ConnectFour-v0"}, "TextArena game 'ConnectFour-v0' lists no moves in its observation, so the random "
                                 "opponent has none to draw from: give opponent_moves"),
    ({"game": "TicTacToe-v0", "player": 2}, "player must be 0 or 1 in the 2-player game 'TicTacToe-v0', got 2"),
    ({"game": "GuessTheNumber-v0", "player": 1}, "player must be 0 in the 1-player game 'GuessTheNumber-v0', got 1"),
    ({"game": "TicTacToe-v0", "opponent": "gpt-4o"}, "opponent must be 'random'"),
    ({"game": "GuessTheNumber-v0", "players": 2}, "TextArena game 'GuessTheNumber-v0' does not start with 2 player(s)"),
    ({"game": "ThreePlayerTicTacToe-v0"}, "does not start with 1 or 2 player(s)"),
    ({"game": "GuessTheNumber-v0", "observation": "board"}, "observation must be one of new, full, got 'board'"),
])
def test_bad_configs_are_reported_by_validation_and_construction(config, message):
    [problem] = check_env("textarena", config)
    assert problem.startswith("env 'textarena': ") and message in problem
    with pytest.raises(EnvConfigError) as err:
        make_env("textarena", config)
    assert message in str(err.value)


# ----------------------------------------------------------------- behind the rollout driver
@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from ragen_cli.models.load import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def test_scripted_rollout_guesses_the_number_through_the_driver(tok):
    probe = make_env("textarena", GUESS)
    probe.reset(seed=12)
    target = secret(probe)  # the same seed gives the same target (test above)
    wrong = 1 if target != 1 else 2
    rollout = RolloutSpec(max_turns=3, max_actions_per_turn=1, max_tokens_per_turn=12, think=False)
    backend = ScriptedBackend(tok, [f"[{wrong}]<|im_end|>", f"[{target}]<|im_end|>"])
    [traj] = run_rollouts(backend, tok, EnvRef(name="textarena", config=GUESS), [12], 1, rollout, 4096, 0)
    first, second = tok.decode(backend.calls[0][0]), tok.decode(backend.calls[1][0])
    assert "You are playing Guess The Number." in first and "State:\nYour move." in first
    assert f"The target number is {'higher' if wrong < target else 'lower'}." in second
    assert traj.turn_rewards == [0.0, 1.0] and traj.success is True and traj.truncated is False


def test_hf_rollout_on_the_tiny_model(tok, tiny_model_dir):
    # A random 2-layer model. A turn whose move the game rejects earns the format penalty; two in
    # a row end the game (TextArena's rule) with reward 1 - |last valid guess - target| / 19, or
    # 0 without one. Nothing here depends on what the model happens to write.
    from ragen_cli.rollout.backend import make_backend
    from ragen_cli.spec.models import RunSpec

    spec = RunSpec(name="t", env={"train": {"name": "textarena", "config": GUESS}}, deepspeed={"precision": "fp32"})
    backend = make_backend("hf", tiny_model_dir, spec)
    rollout = RolloutSpec(max_turns=3, max_actions_per_turn=1, max_tokens_per_turn=6, think=False, format_penalty=-0.1)
    trajs = run_rollouts(backend, tok, EnvRef(name="textarena", config=GUESS), [0, 1], 1, rollout, 2048, 0)
    assert len(trajs) == 2
    for traj in trajs:
        assert "You are playing Guess The Number." in tok.decode(traj.input_ids)
        penalised = [not t.format_ok or t.valid < t.executed for t in traj.turns]
        for bad, turn_reward, turn in zip(penalised, traj.turn_rewards, traj.turns):
            env_part = turn_reward - (-0.1 if bad else 0.0)
            assert env_part == pytest.approx(0.0) or turn is traj.turns[-1]  # the game pays at its end only
        moves = [t.valid == 1 for t in traj.turns if t.executed]  # a format error sends the game no move
        ended_by_rule = any(not a and not b for a, b in zip(moves, moves[1:]))
        assert traj.truncated is (not ended_by_rule and not traj.success)
