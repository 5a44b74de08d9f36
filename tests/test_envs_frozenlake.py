"""FrozenLake on Gymnasium's dynamics: seeded map, scripted moves, solvability, slip rates."""

import numpy as np
import pytest

from ragen_cli.envs.frozenlake import goal_distance, has_path, random_map
from ragen_cli.envs.registry import make_env

SEED0 = "__O_\n____\nPG_O\n____"  # player (2,0), goal (2,1), holes (0,2), (2,3)


def test_seed0_first_observation_and_goal():
    env = make_env("frozenlake", {"is_slippery": False})
    obs, info = env.reset(seed=0)
    assert obs == SEED0
    assert info["map"] == ["FFHF", "FFFF", "SGFH", "FFFF"]
    obs, r, term, trunc, info = env.step("Left")  # edge: gymnasium keeps the player in place
    assert (obs, r, term, info["action_is_valid"], info["action_is_effective"]) == (SEED0, 0.0, False, True, False)
    # action_match exact (the default here): a sentence is no action, even one naming a single one
    obs, r, term, trunc, info = env.step("I move right.")
    assert (obs, r, term, info["action_is_valid"]) == (SEED0, 0.0, False, False)
    obs, r, term, trunc, info = env.step(" RIGHT ")
    assert (obs, r, term, trunc, info["success"]) == ("__O_\n____\n_√_O\n____", 1.0, True, False, True)


def test_action_match_word_takes_a_sentence_naming_one_action():
    env = make_env("frozenlake", {"is_slippery": False, "action_match": "word"})
    env.reset(seed=0)
    assert env.step("You have 9 actions left.")[4]["action_is_valid"]  # Left, as prose: why exact is the default
    assert env.step("I move right.")[4]["success"]
    with pytest.raises(ValueError, match="action_match must be one of exact, word, got 'loose'"):
        make_env("frozenlake", {"action_match": "loose"})


def test_hole_ends_episode_without_reward():
    env = make_env("frozenlake", {"is_slippery": False})
    env.reset(seed=0)
    for action in ["Up", "Right", "Right"]:  # (1,0) -> (1,1) -> (1,2)
        assert env.step(action)[1:3] == (0.0, False)
    obs, r, term, _, info = env.step("Up")  # (0,2) is a hole
    assert (obs.split("\n")[0], r, term, info["success"]) == ("__X_", 0.0, True, False)


def test_goal_distance_walks_around_holes():
    # seed 0's map, goal (2,1); (0,3) must go round the hole at (0,2): 4 moves, the farthest
    # cell, so the holes count 5
    assert goal_distance(["FFHF", "FFFF", "SGFH", "FFFF"]) == [3, 2, 5, 4,
                                                             2, 1, 2, 3,
                                                             1, 0, 1, 5,
                                                             2, 1, 2, 3]


def test_progress_reward_pays_each_move_its_drop_in_goal_distance():
    env = make_env("frozenlake", {"is_slippery": False, "progress_reward": 0.1})
    env.reset(seed=0)  # player (2,0): distance 1
    rewards = [env.step(a)[1] for a in ["Up", "Right", "Right", "Up"]]  # distances 2, 1, 2, hole (5)
    assert rewards == pytest.approx([-0.1, 0.1, -0.1, -0.3])
    assert sum(rewards) == pytest.approx(0.1 * (1 - 5))  # the sum telescopes: start minus end
    env.reset(seed=0)
    assert env.step("Right")[1] == pytest.approx(1.0 + 0.1)  # the goal's reward plus one move closer
    with pytest.raises(ValueError, match="progress_reward must be >= 0"):
        make_env("frozenlake", {"progress_reward": -0.1})


def test_invalid_actions_leave_state_and_truncate_at_budget():
    env = make_env("frozenlake", {"max_actions": 2})
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step("Left or Right")  # two actions named: neither
    assert (obs, r, term, trunc, info["action_is_valid"]) == (SEED0, 0.0, False, False, False)
    assert env.step("")[3] is True


def test_random_strings_never_raise():
    rng = np.random.default_rng(2)
    env = make_env("frozenlake", {"max_actions": 1000})
    env.reset(seed=1)
    for _ in range(1000):
        action = "".join(rng.choice(list("LeftDownRightUp \n|x"), size=rng.integers(0, 12)))
        _, _, term, trunc, _ = env.step(action)
        if term or trunc:
            env.reset(seed=int(rng.integers(1000)))


def test_every_generated_map_has_a_path_and_moved_start_goal():
    starts = set()
    for seed in range(300):
        board = random_map(4, 0.8, np.random.default_rng(seed))
        assert has_path(board)
        flat = "".join(board)
        assert flat.count("S") == 1 and flat.count("G") == 1
        starts.add(flat.index("S"))
    assert len(starts) > 8  # start is not pinned to the corner
    assert not has_path(["SH", "HG"])


def _pos(obs):
    rows = obs.split("\n")
    return next((r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch in "PX√")


def test_slippery_transition_frequencies():
    # gymnasium's slippery rule: action a goes to directions (a-1)%4, a, (a+1)%4 with 1/3 each.
    # Count only moves whose three destination cells are inside the map (no clipping), so the
    # three outcomes are distinct. n samples -> std of a frequency sqrt(2/9 / n); allow 4 std.
    moves = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
    names = list(moves)  # gymnasium's order 0..3
    # p = 1: no holes, so episodes end only at the goal and resets stay rare
    env = make_env("frozenlake", {"size": 6, "p": 1.0, "max_actions": 10**6})
    rng = np.random.default_rng(4)
    counts, n, seed = {"intended": 0, "minus": 0, "plus": 0}, 0, 0
    obs, _ = env.reset(seed=seed)
    while n < 10000:
        a = int(rng.integers(4))
        (r, c) = _pos(obs)
        outcomes = {k: moves[names[(a + off) % 4]] for k, off in (("minus", -1), ("intended", 0), ("plus", 1))}
        inside = all(0 <= r + dr < 6 and 0 <= c + dc < 6 for dr, dc in outcomes.values())
        obs, _, term, _, _ = env.step(names[a])
        if inside:
            r2, c2 = _pos(obs)
            counts[next(k for k, d in outcomes.items() if d == (r2 - r, c2 - c))] += 1
            n += 1
        if term:
            seed += 1
            obs, _ = env.reset(seed=seed)
    tol = 4 * np.sqrt(2 / 9 / n)
    for k, v in counts.items():
        assert v / n == pytest.approx(1 / 3, abs=tol), (k, v, n)


def test_offset_words_names_moves():
    from ragen_cli.envs.base import offset_words
    assert offset_words(2, -1) == "2 Down and 1 Left"
    assert (offset_words(0, 1), offset_words(-3, 0), offset_words(0, 0)) == ("1 Right", "3 Up", "0 steps")


def test_move_hint_names_goal_offset_and_neighbours():
    from ragen_cli.envs.frozenlake import move_hint
    board = ["SFH", "FFF", "HFG"]  # goal (2,2), holes (0,2) and (2,0); the start is ice
    assert move_hint(board, 0) == "The goal is 2 Down and 2 Right of you. Left: edge, Down: ice, Right: ice, Up: edge."
    assert move_hint(board, 1) == "The goal is 2 Down and 1 Right of you. Left: ice, Down: ice, Right: hole, Up: edge."
    assert move_hint(board, 5) == "The goal is 1 Down of you. Left: ice, Down: goal, Right: edge, Up: hole."
    assert (move_hint(board, 6), move_hint(board, 8)) == ("You fell into a hole.", "You are on the goal.")


def test_move_hint_option_appends_the_words_to_each_observation():
    env = make_env("frozenlake", {"is_slippery": False, "move_hint": True})
    obs, _ = env.reset(seed=0)  # SEED0: player (2,0), goal (2,1)
    assert obs == SEED0 + "\nThe goal is 1 Right of you. Left: edge, Down: ice, Right: goal, Up: ice."
    assert env.step("Right")[0] == "__O_\n____\n_√_O\n____\nYou are on the goal."


def test_coordinate_observation_lists_goal_player_and_holes():
    # SEED0: holes (0,2) and (2,3), player (2,0), goal (2,1); zero-indexed (row, column)
    coords = ("Board size: 4 rows x 4 cols (zero-indexed).\n"
              "Goal: (2, 1)\nPlayer: (2, 0)\nHoles: (0, 2), (2, 3)")
    env = make_env("frozenlake", {"is_slippery": False, "observation": "coord"})
    assert env.reset(seed=0)[0] == coords
    assert env.step("Right")[0].splitlines()[2] == "Player on goal: (2, 1)"
    both = make_env("frozenlake", {"is_slippery": False, "observation": "grid_coord"})
    assert both.reset(seed=0)[0] == f"Coordinates:\n{coords}\nGrid map:\n{SEED0}"
    assert make_env("frozenlake", {"is_slippery": False}).reset(seed=0)[0] == SEED0  # grid is the default


def test_coordinate_instruction_states_the_axes_and_names_no_move_for_this_state():
    env = make_env("frozenlake", {"is_slippery": False, "observation": "grid_coord"})
    text = env.instruction()
    assert "(0, 0) to the bottom-right corner (3, 3): Down adds 1 to the row" in text
    assert "The meaning of each symbol" in text
    coord_only = make_env("frozenlake", {"observation": "coord"}).instruction()
    assert "symbol" not in coord_only and "Down adds 1 to the row" in coord_only
    assert "Down adds" not in make_env("frozenlake", {}).instruction()


def test_unknown_observation_is_a_config_error():
    with pytest.raises(ValueError, match="observation must be one of grid, coord, grid_coord, got 'map'"):
        make_env("frozenlake", {"observation": "map"})
