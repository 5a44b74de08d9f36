"""Scripted experts (envs/experts.py): each solves every seeded episode of its game under the
shipped spec's env config, plays hand-checked shortest solutions, and only reads the env."""

import copy

import numpy as np
import pytest

from ragen_cli.envs import experts
from ragen_cli.envs.registry import make_env

# the env configs of specs/frozenlake.yaml and specs/sokoban.yaml (webshop.yaml sets none)
LAKE = {"size": 4, "p": 0.8, "is_slippery": False, "max_actions": 10, "observation": "grid_coord",
        "progress_reward": 0.1}
BOXES = {"dim_x": 6, "dim_y": 6, "num_boxes": 1, "search_depth": 4, "max_actions": 10,
         "observation": "grid_coord", "progress_reward": 0.2}


def play(env, expert, seed: int) -> tuple[list[str], float, bool]:
    """(actions taken, summed reward, success) of one episode, the expert called once per turn
    until the episode ends; every action must be valid."""
    obs, info = env.reset(seed=seed)
    actions, total, turn, over = [], 0.0, 0, False
    while not over:
        turn += 1
        for action in expert(env, obs, turn):
            obs, reward, terminated, truncated, info = env.step(action)
            assert info["action_is_valid"], (seed, turn, action)
            actions.append(action)
            total += reward
            over = terminated or truncated
            if over:
                break
    return actions, total, info["success"]


@pytest.mark.parametrize("name, config, expert", [
    ("frozenlake", LAKE, experts.frozenlake),
    ("sokoban", BOXES, experts.sokoban),
    ("webshop", {}, experts.webshop),
    ("webshop", {"split": "val"}, experts.webshop),
    ("runmax", {"turns": 2}, experts.runmax),
    ("runmax", {"turns": 3, "twins": True}, experts.runmax),
])
def test_expert_solves_every_seed(name, config, expert):
    # measured by bench/experts.py: 1.0 on the specs' validation seeds and on 200 training seeds;
    # the ice does not slip here, and every generated level is solvable within the budget
    env = make_env(name, config)
    solved = [play(env, expert, seed)[2] for seed in range(10000, 10020)]
    assert sum(solved) == 20


def test_frozenlake_detour_around_a_hole():
    env = make_env("frozenlake", {**LAKE, "observation": "grid"})
    obs, _ = env.reset(seed=5)
    assert obs == "G_O_\nO_O_\n____\nP___"
    # the player (3, 0) is 3 Up of the goal (0, 0), but (1, 0) is a hole: go up column 1.
    # Both Up-Right-Up-Up-Left and Right-Up-Up-Up-Left take 5 moves; ties go Left, Down, Right, Up,
    # so from (3, 0) Right (Left and Down are the edge)
    assert experts.frozenlake_plan(env) == ["Right", "Up", "Up", "Up", "Left"]
    actions, total, success = play(env, experts.frozenlake, seed=5)
    assert actions == ["Right", "Up", "Up", "Up", "Left"]
    # reward 1 at the goal; shaping 0.1 x (start distance 5 - final distance 0)
    assert (total, success) == (pytest.approx(1.5), True)


def test_sokoban_walk_round_then_push_twice():
    env = make_env("sokoban", {**BOXES, "observation": "grid", "progress_reward": 0.0})
    obs, _ = env.reset(seed=3)
    assert obs == "######\n###_P#\n#__X_#\n#____#\n#__O_#\n######"
    # box (2, 3) goes 2 Down to the target (4, 3): the player (1, 4) steps Left above it, then
    # pushes Down twice; no shorter sequence (two pushes plus one step to get behind the box)
    actions, total, success = play(env, experts.sokoban, seed=3)
    assert actions == ["Left", "Down", "Down"]
    assert (total, success) == (pytest.approx(3 * -0.1 + 1.0 + 10.0), True)  # steps, box on target, solved


def test_webshop_search_product_options_buy():
    env = make_env("webshop", {"split": "val"})
    env.reset(seed=125)
    assert env.goal["instruction_text"] == ("i want to buy height adjustable and ergonomic desk chair in black, "
                                            "and price lower than 280.00 dollars")
    actions, total, success = play(env, experts.webshop, seed=125)
    # the instruction without its price clause, the goal's product (first on the results page),
    # its one goal option (colour: black), buy
    assert actions == ["search[i want to buy height adjustable and ergonomic desk chair in black]",
                       "click[b0qu82c8jh]", "click[black]", "click[buy now]"]
    assert (total, success) == (1.0, True)


def test_webshop_pages_to_the_goal_product():
    env = make_env("webshop", {"split": "val"})
    env.reset(seed=152)
    query = experts.webshop_query(env.goal)
    ranks = [p["asin"] for p in env.catalogue.search(query)]
    assert 10 <= ranks.index(env.goal["asin"]) < 20  # on the second results page
    actions, total, success = play(env, experts.webshop, seed=152)
    assert actions == [f"search[{query}]", "click[next >]", "click[b0vupzv15s]", "click[blue]", "click[buy now]"]
    assert success


def snapshot(env) -> dict:
    """A deep copy of the env's attributes, generators as their states (a Generator compares by
    identity); FrozenLake's Gymnasium env as its state and generator, the shared catalogue left out."""
    out = {}
    for key, value in vars(env).items():
        if isinstance(value, np.random.Generator):
            out[key] = copy.deepcopy(value.bit_generator.state)
        elif key == "gym":
            out[key] = (value.s, copy.deepcopy(value.np_random.bit_generator.state))
        elif key != "catalogue":
            out[key] = copy.deepcopy(value)
    return out


@pytest.mark.parametrize("name, config, expert, moves", [
    ("frozenlake", {**LAKE, "is_slippery": True}, experts.frozenlake, ["Right", "Up"]),
    ("sokoban", BOXES, experts.sokoban, ["Left"]),
    ("webshop", {}, experts.webshop, []),
])
def test_expert_only_reads_the_env(name, config, expert, moves):
    env = make_env(name, config)
    obs, _ = env.reset(seed=7)
    for move in moves:  # FrozenLake slips: the expert plans from wherever the player is now
        obs = env.step(move)[0]
    for turn in range(1, 4):  # an item page for WebShop: search, then its product
        before = snapshot(env)
        action = expert(env, obs, turn)
        assert expert(env, obs, turn) == action and len(action) >= 1
        assert snapshot(env) == before
        obs = env.step(action[0])[0]


def test_runmax_expert_answers_the_largest_card_so_far():
    env = make_env("runmax", {"turns": 3})
    obs, _ = env.reset(seed=0)
    assert obs.startswith("Which number is larger: 48 or 71?")
    assert experts.runmax(env, obs, 1) == ["71"]
    obs, *_ = env.step("0")                  # a wrong reply does not change what was shown
    assert obs.startswith("Next card: 74.")
    assert experts.runmax(env, obs, 2) == ["74"]   # a record
    obs, *_ = env.step("74")
    assert obs.startswith("Next card: 73.")
    assert experts.runmax(env, obs, 3) == ["74"]   # not a record: remember 74
