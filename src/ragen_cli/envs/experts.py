"""Scripted experts: players that solve the built-in games, for warm-start demonstrations.

An expert is a plain function

    expert(env, obs: str, turn: int) -> list[str]

called once per turn with the live env (after `reset` and the steps so far), the current
observation and the 1-based turn number. It returns the env's own action names for this turn
(`["Down", "Down"]`, `["search[red shoes]"]`, `["click[b0123]"]`). The grid experts return the
whole plan made from the env's current state (the warm start writes the first
`rollout.max_actions_per_turn` of them into the reply, rollout/demos.py) and re-plan every turn,
so a slip on FrozenLake's ice is planned from; the WebShop expert returns one action a turn; the
runmax expert answers the running maximum.

Experts only read the env, and read its internal state where it has no public accessor
(FrozenLake's `board` and `state`, Sokoban's `level`, `player` and `boxes`, WebShop's `goal`,
`page`, `results`, `page_no`, `product` and `chosen`; runmax has the public `running_max()`);
they never change it. The WebShop expert also reads the goal's target product, which the agent
is not shown.

    spec: warm_start: {policy: ragen_cli.envs.experts:frozenlake}
    measured: .venv/bin/python bench/experts.py
"""

from __future__ import annotations

import dataclasses
import re

from ragen_cli.envs.frozenlake import ACTION_NAMES as LAKE_ACTIONS
from ragen_cli.envs.frozenlake import goal_distance
from ragen_cli.envs.sokoban_gen import solve
from ragen_cli.envs.webshop.pages import PRODUCT_WINDOW
from ragen_cli.envs.webshop.reward import get_reward, option_matches

_LAKE_MOVES = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
_PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars$")


# ----------------------------------------------------------------------------- FrozenLake
def frozenlake_plan(env) -> list[str]:
    """A shortest walk from the player's cell to the goal over non-hole cells (breadth-first:
    `goal_distance` is a BFS from the goal), ties broken in the order Left, Down, Right, Up; empty
    when the player is on the goal or in a hole. Reads `env.board` and `env.state`."""
    board, size = env.board, len(env.board)
    dist = goal_distance(board)
    state, plan = env.state, []
    while board[state // size][state % size] not in "GH":
        row, col = divmod(state, size)
        for name in LAKE_ACTIONS:
            r, c = row + _LAKE_MOVES[name][0], col + _LAKE_MOVES[name][1]
            if 0 <= r < size and 0 <= c < size and dist[r * size + c] == dist[state] - 1:
                plan.append(name)
                state = r * size + c
                break
        else:  # a cell the goal cannot be reached from (not on a generated map: start and goal connect)
            return plan
    return plan


def frozenlake(env, obs: str, turn: int) -> list[str]:
    """A shortest walk to the goal from where the player stands now (`frozenlake_plan`). On
    slippery ice the walk is re-planned each turn from wherever the player slid; it is the
    shortest walk, not the one most likely to reach the goal. When the episode is over (no
    plan), ["Left"]: the driver does not call it then."""
    return frozenlake_plan(env) or [LAKE_ACTIONS[0]]


# -------------------------------------------------------------------------------- Sokoban
def sokoban_plan(env) -> list[str] | None:
    """A shortest action sequence (breadth-first over (player, boxes) states, `sokoban_gen.solve`,
    ties in the order Up, Down, Left, Right) from the current state to every box on a target;
    [] when solved, None when no sequence exists (a box stuck in a corner). Unbounded by the
    action budget, so the plan may be longer than `env.actions_left`. Reads `env.level`,
    `env.player` and `env.boxes`."""
    now = dataclasses.replace(env.level, player=env.player, boxes=frozenset(env.boxes))
    states = len(now.floor) ** (len(now.boxes) + 1)  # more than there are states: the depth bound never cuts
    plan = solve(now, max_depth=states)
    return None if plan is None else [name.capitalize() for name in plan]


def sokoban(env, obs: str, turn: int) -> list[str]:
    """A shortest solution from the current state (`sokoban_plan`). On a level with no solution
    left (only after other moves pushed a box into a corner), ["Up"]."""
    return sokoban_plan(env) or ["Up"]


# -------------------------------------------------------------------------------- WebShop
def webshop_query(goal: dict) -> str:
    """The search query: the instruction the agent is shown, without its price clause (the
    catalogue's BM25 index holds no prices)."""
    return _PRICE_CLAUSE.sub("", goal["instruction_text"])


def webshop_options(product: dict, goal: dict) -> dict[str, str]:
    """The options to click on `product` for `goal`, option name -> value, in the product's
    order: per option the value equal to a goal option, else the first value the reward counts
    as matching (`reward.option_matches`: fuzzy, colours normalised, or named in the product's
    text); options with no matching value stay unchosen."""
    goal_options = list(goal["goal_options"].values()) if isinstance(goal["goal_options"], dict) \
        else list(goal["goal_options"])
    wanted = {o.lower() for o in goal_options}
    chosen = {}
    for name, values in product["options"].items():
        exact = [v for v in values if v in wanted]
        fuzzy = [v for v in values if option_matches(product, goal_options, {name: v})]
        if exact or fuzzy:
            chosen[name] = (exact or fuzzy)[0]
    return chosen


def webshop_score(product: dict, goal: dict) -> float:
    """WebShop's reward for buying `product` with `webshop_options` chosen."""
    return get_reward(product, goal, product["_price"], webshop_options(product, goal))[0]


def _results_action(env) -> str:
    """On a results page: the goal's product when it is on this page, else the page it is on,
    else this page's product with the highest score (the first of equals)."""
    asins = [p["asin"] for p in env.results]
    target = env.goal["asin"]
    if target in asins:
        page = asins.index(target) // PRODUCT_WINDOW + 1
        if page == env.page_no:
            return f"click[{target.lower()}]"
        return "click[next >]" if page > env.page_no else "click[< prev]"
    shown = env.results[(env.page_no - 1) * PRODUCT_WINDOW: env.page_no * PRODUCT_WINDOW]
    if not shown:
        return "click[back to search]"
    best = max(shown, key=lambda p: webshop_score(p, env.goal))  # max keeps the first of equals
    return f"click[{best['asin'].lower()}]"


def webshop(env, obs: str, turn: int) -> list[str]:
    """One action toward buying the goal's product: search[`webshop_query`] on the search page;
    on a results page the goal's product (`_results_action`); on an item page each option of
    `webshop_options` not yet chosen, then buy now, unless the goal's product is among the
    results and this is another one (then back to them); from a sub-page, back. Reads the env's
    `goal` (which names the target product), `page`, `results`, `page_no`, `product` and
    `chosen`."""
    if env.page == "search":
        return [f"search[{webshop_query(env.goal)}]"]
    if env.page == "results":
        return [_results_action(env)]
    if env.page == "sub":
        return ["click[< prev]"]
    target = env.goal["asin"]
    if env.product["asin"] != target and any(p["asin"] == target for p in env.results):
        return ["click[< prev]"]
    for name, value in webshop_options(env.product, env.goal).items():
        if env.chosen.get(name) != value:
            return [f"click[{value}]"]
    return ["click[buy now]"]  # also after the purchase (page "done"): the driver does not call it then


# --------------------------------------------------------------------------------- runmax
def runmax(env, obs: str, turn: int) -> list[str]:
    """The largest card shown so far (envs/runmax.py `running_max`): right on every turn."""
    return [str(env.running_max())]
