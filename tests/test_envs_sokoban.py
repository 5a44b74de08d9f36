"""Sokoban: seeded levels, gym_sokoban rewards, invalid actions, solvability of generated levels."""

import numpy as np
import pytest

from ragen_cli.envs.registry import make_env
from ragen_cli.envs.sokoban_gen import Level, generate_level, solve

SEED0 = "######\n######\n######\n#__P_#\n##_XO#\n######"


def test_seed0_first_observation_and_scripted_solution():
    env = make_env("sokoban")
    obs, _ = env.reset(seed=0)
    # hand-read: player (3,3), box (4,3), target (4,4); floor (3,1..4), (4,2..4)
    assert obs == SEED0
    # Up: (2,3) is wall -> no move, still the -0.1 step penalty
    obs, r, term, trunc, info = env.step("Up")
    assert (obs, r, term, info["action_is_valid"], info["action_is_effective"]) == (SEED0, -0.1, False, True, False)
    assert env.step(" left")[1] == pytest.approx(-0.1)        # player (3,2)
    assert env.step("DOWN")[1] == pytest.approx(-0.1)         # player (4,2)
    assert env.step("Move right!")[4]["action_is_valid"] is False  # action_match exact: a sentence is no action
    obs, r, term, trunc, info = env.step("Right")             # push box (4,3) -> target (4,4)
    assert r == pytest.approx(-0.1 + 1.0 + 10.0)              # step + box on target + solved
    assert (term, trunc, info["success"]) == (True, False, True)
    assert obs == "######\n######\n######\n#____#\n##_P√#\n######"


def _set_level(env, level):
    env.level, env.player, env.boxes = level, level.player, set(level.boxes)


def test_box_on_then_off_target_and_blocked_push():
    env = make_env("sokoban", {"num_boxes": 2})
    env.reset(seed=0)
    floor = frozenset((r, c) for r in (1, 2) for c in (1, 2, 3, 4))
    # row 1: P X O _ ; row 2: _ X _ O   (two boxes so one placement does not solve)
    _set_level(env, Level(6, 4, floor, frozenset({(1, 3), (2, 4)}), frozenset({(1, 2), (2, 2)}), (1, 1)))
    assert env._render() == "######\n#PXO_#\n#_X_O#\n######"
    obs, r, term, _, _ = env.step("right")
    assert (obs.split("\n")[1], r, term) == ("#_P√_#", pytest.approx(0.9), False)   # -0.1 + 1
    obs, r, term, _, _ = env.step("right")
    assert (obs.split("\n")[1], r, term) == ("#__SX#", pytest.approx(-1.1), False)  # -0.1 - 1; player now on the target (S)
    _, r, _, _, info = env.step("right")  # box against the wall: no push
    assert (r, info["action_is_effective"]) == (pytest.approx(-0.1), False)


def test_invalid_actions_and_budget_truncation():
    env = make_env("sokoban")  # the budget also bounds generation, so keep the default 10
    env.reset(seed=0)
    for action in ["", "upp", "Up Down", "push", "4"] * 2:
        obs, r, term, trunc, info = env.step(action)
        assert (obs, r, term, info["action_is_valid"]) == (SEED0, 0.0, False, False)
        if trunc:
            break
    assert trunc and env.actions_left == 0


def test_random_strings_never_raise():
    rng = np.random.default_rng(1)
    words = ["up", "Down", " left ", "RIGHT", "x", "||", "<answer>", "上", "\x00", "right right"]
    env = make_env("sokoban-large", {"max_actions": 1000})
    env.reset(seed=3)
    for _ in range(1000):
        action = "".join(rng.choice(words, size=rng.integers(0, 3)))
        _, _, term, trunc, _ = env.step(action)
        if term or trunc:
            env.reset(seed=int(rng.integers(100)))


def test_vocab_variant_uses_other_symbols_same_level():
    env = make_env("sokoban-vocab")
    obs, _ = env.reset(seed=0)
    assert obs == "WWWWWW\nWWWWWW\nWWWWWW\nW..A.W\nWW.BGW\nWWWWWW"
    assert "W: wall" in env.instruction() and "@: player on target" in env.instruction()


def test_same_seed_same_level_different_seeds_differ():
    env = make_env("sokoban-large")
    first = [env.reset(seed=s)[0] for s in range(20)]
    assert first == [env.reset(seed=s)[0] for s in range(20)]
    assert len(set(first)) > 15


@pytest.mark.parametrize("dim,boxes", [(6, 1), (8, 2)])
def test_500_levels_solvable_within_budget(dim, boxes):
    # budget = max_actions = 10 (default); the generator bounds reverse play by it
    lengths = []
    for seed in range(500):
        level = generate_level(dim, dim, boxes, 10, np.random.default_rng(seed))
        assert not level.boxes & level.targets
        path = solve(level, 10)
        assert path is not None, f"seed {seed} unsolvable within 10"
        lengths.append(len(path))
    assert 1 <= min(lengths) and max(lengths) <= 10 and np.mean(lengths) > 3


def test_solver_finds_the_hand_solution_and_reports_unsolvable():
    env = make_env("sokoban")
    env.reset(seed=0)
    assert solve(env.level, 10) == ["left", "down", "right"]
    assert solve(env.level, 2) is None
    stuck = Level(6, 4, frozenset({(1, 1), (1, 2), (1, 3), (1, 4)}), frozenset({(1, 4)}), frozenset({(1, 1)}), (1, 2))
    assert solve(stuck, 20) is None  # box in a corner, target on the other side


def test_move_hint_names_box_offsets_push_direction_and_neighbours():
    from ragen_cli.envs.sokoban import move_hint
    floor = frozenset((r, c) for r in range(1, 4) for c in range(1, 4))  # 5x5 room, 3x3 floor
    level = Level(5, 5, floor, frozenset({(1, 3)}), frozenset({(2, 2)}), (3, 2))
    # box (2,2) is 1 Up of the player (3,2); target (1,3) is 1 Up and 1 Right of the box; below the player is wall
    assert move_hint(level, (3, 2), {(2, 2)}) == (
        "The box is 1 Up of you; it must go 1 Up and 1 Right. Up: box, Down: wall, Left: floor, Right: floor.")
    two = Level(5, 5, floor, frozenset({(1, 1), (1, 3)}), frozenset({(2, 1), (3, 3)}), (2, 2))
    assert move_hint(two, (2, 2), {(2, 1), (3, 3)}) == (
        "Box 1 is 1 Left of you; it must go 1 Up. Box 2 is 1 Down and 1 Right of you; it must go 2 Up. "
        "Up: floor, Down: floor, Left: box, Right: floor.")
    assert move_hint(two, (2, 2), {(1, 1), (1, 3)}) == "Every box is on a target."


def test_move_hint_option_on_seed0():
    env = make_env("sokoban", {"move_hint": True})
    obs, _ = env.reset(seed=0)  # player (3,3), box (4,3), target (4,4): walk round and push Right
    assert obs.splitlines()[-1] == ("The box is 1 Down of you; it must go 1 Right. "
                                    "Up: wall, Down: box, Left: floor, Right: floor.")
    for action in ["Left", "Down", "Right"]:
        obs = env.step(action)[0]
    assert obs.splitlines()[-1] == "Every box is on a target."


def test_push_distance_and_progress_reward_on_seed0():
    from ragen_cli.envs.sokoban import push_distance
    env = make_env("sokoban", {"progress_reward": 0.1})
    env.reset(seed=0)  # player (3,3), box (4,3), target (4,4): box 1 from target, player next to it
    assert push_distance(env.level, env.player, env.boxes) == 1 + (1 - 1)
    rewards = [env.step(a)[1] for a in ["Up", "Left", "Down", "Right"]]
    # Up hits the wall (distance 1 -> 1); Left walks off (2: the Manhattan estimate does not see
    # that the way round is the only way); Down comes back beside the box (1); Right pushes it home (0)
    assert rewards == pytest.approx([-0.1, -0.1 - 0.1, -0.1 + 0.1, -0.1 + 1.0 + 10.0 + 0.1])
    assert push_distance(env.level, env.player, env.boxes) == 0
    with pytest.raises(ValueError, match="progress_reward must be >= 0"):
        make_env("sokoban", {"progress_reward": -1.0})


def test_coordinate_observation_on_seed0():
    # seed 0: player (3,3), box (4,3), target (4,4); solved by Left, Down, Right
    env = make_env("sokoban", {"observation": "grid_coord"})
    obs, _ = env.reset(seed=0)
    coords = "Board size: 6 rows x 6 cols (zero-indexed).\nTargets: (4, 4)\nBoxes: (4, 3)\nPlayer: (3, 3)"
    assert obs == f"Coordinates:\n{coords}\nGrid map:\n######\n######\n######\n#__P_#\n##_XO#\n######"
    for action in ["Left", "Down", "Right"]:
        obs = env.step(action)[0]
    assert obs.splitlines()[2:5] == ["Targets: (4, 4)", "Boxes on target: (4, 4)", "Player: (4, 3)"]
    assert "(5, 5): Down adds 1 to the row" in env.instruction()
