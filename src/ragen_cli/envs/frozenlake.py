"""FrozenLake as a text env, on Gymnasium's own FrozenLake dynamics and map generator.

Maps come from `gymnasium.envs.toy_text.frozen_lake.generate_random_map`; as in the reference
(`ragen/env/frozen_lake`), the start and goal are then moved to random distinct cells and the
map is re-drawn until the goal is reachable from the start. Moves are Gymnasium's: slippery
means the intended direction with probability `success_rate` (1/3) and each perpendicular
direction with (1 - success_rate) / 2; reward 1 on reaching the goal, episode ends in a hole
or at the goal."""

from __future__ import annotations

import copy
import functools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from ragen_cli.envs.base import (TextEnv, check_action_match, check_observation, coordinate_rule, coordinate_text,
                                 named_action, observation_text, offset_words)

ACTION_NAMES = ("Left", "Down", "Right", "Up")  # gymnasium's action ids 0..3
_ACTION_IDS = {name.lower(): i for i, name in enumerate(ACTION_NAMES)}
_MOVES = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
SYMBOLS = {"player": "P", "frozen": "_", "hole": "O", "goal": "G", "player_in_hole": "X",
           "player_on_goal": "√"}


@dataclass(frozen=True)
class FrozenLakeConfig:
    size: int = 4
    """Side of the square map."""
    p: float = 0.8
    """Probability that a tile is frozen (else a hole)."""
    is_slippery: bool = True
    """Slippery ice: the move may go perpendicular to the intended direction."""
    success_rate: float = 1.0 / 3.0
    """Probability of moving in the intended direction when slippery."""
    max_actions: int = 10
    """Actions per episode; the episode is truncated after that many."""
    action_match: str = "exact"
    """How an answer names an action: `exact` (the name alone, any case; as the reference) or
    `word` (also a text naming exactly one action as a whole word). Exact by default: Left and Up
    are common words, and "You have 9 actions left." would be Left."""
    observation: str = "grid"
    """What the model sees of the state: `grid` (the symbol map, as the reference's FrozenLake),
    `coord` (zero-indexed coordinates of the goal, the player and the holes) or `grid_coord`
    (both; RAGEN-2's `CoordFrozenLake`). None of them names a move."""
    move_hint: bool = False
    """A hint, not an observation: follow the map with a sentence that names the moves toward
    the goal and what each move leads into ("The goal is 2 Down and 1 Right of you. Left: edge,
    Down: hole, Right: ice, Up: ice."). A policy that plays the named moves scores 0.86 on the
    shipped maps without reading anything else, so no shipped spec uses it (docs/envs.md)."""
    progress_reward: float = 0.0
    """Potential-based shaping (Ng, Harada & Russell 1999): each move also earns this times the
    drop in the walking distance to the goal (`goal_distance`; a hole counts as one move
    farther than the farthest cell). Over
    an episode it adds this times (start distance - final distance), so within a GRPO group (one
    map) it ranks the trajectories that miss the goal by how close they end. 0 (off) in the
    reference; success is unaffected."""

    def __post_init__(self):
        check_action_match(self.action_match)
        check_observation(self.observation)
        if not 2 <= self.size <= 32:
            raise ValueError(f"size must be in 2..32, got {self.size}")
        if not 0.2 <= self.p <= 1.0:
            raise ValueError(f"p must be in [0.2, 1], got {self.p}")
        if self.size > 8 and self.p < 0.6:  # below site percolation (~0.59) a path is too rare
            raise ValueError(f"maps larger than 8 need p >= 0.6 (else a path is too rare), got {self.p}")
        if not 0.0 <= self.success_rate <= 1.0:
            raise ValueError(f"success_rate must be in [0, 1], got {self.success_rate}")
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")
        if self.progress_reward < 0:
            raise ValueError(f"progress_reward must be >= 0, got {self.progress_reward}")


def has_path(board: list[str]) -> bool:
    """Breadth-first: is 'G' reachable from 'S' over non-hole cells (4-neighbour moves)?"""
    size = len(board)
    start = next((r, c) for r in range(size) for c in range(size) if board[r][c] == "S")
    seen, queue = {start}, deque([start])
    while queue:
        r, c = queue.popleft()
        if board[r][c] == "G":
            return True
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and (nr, nc) not in seen and board[nr][nc] != "H":
                seen.add((nr, nc))
                queue.append((nr, nc))
    return False


def random_map(size: int, p: float, rng: np.random.Generator) -> list[str]:
    """Gymnasium's random map with the start and goal moved to random distinct cells; re-drawn
    until the goal is reachable from the start."""
    while True:
        board = [list(row) for row in generate_random_map(size=size, p=p, seed=int(rng.integers(2**31)))]
        board[0][0] = board[size - 1][size - 1] = "F"
        start, goal = rng.choice(size * size, size=2, replace=False)
        board[start // size][start % size] = "S"
        board[goal // size][goal % size] = "G"
        rows = ["".join(row) for row in board]
        if has_path(rows):
            return rows


def goal_distance(board: Sequence[str]) -> list[int]:
    """Per cell (row-major), the fewest moves from it to the goal over non-hole cells; a hole,
    or a cell the goal cannot be reached from, counts one move farther than the farthest
    cell that can reach it."""
    size = len(board)
    far = size * size
    dist = [far] * far
    goal = next(i for i in range(far) if board[i // size][i % size] == "G")
    dist[goal], queue = 0, deque([goal])
    while queue:
        i = queue.popleft()
        r, c = divmod(i, size)
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nr, nc = r + dr, c + dc
            j = nr * size + nc
            if 0 <= nr < size and 0 <= nc < size and board[nr][nc] != "H" and dist[j] == far:
                dist[j] = dist[i] + 1
                queue.append(j)
    farthest = max(d for d in dist if d < far)
    return [d if d < far else farthest + 1 for d in dist]


def coordinates(board: Sequence[str], state: int) -> str:
    """The state as coordinates (config `observation: coord`): the goal, the player (on the
    goal, in a hole) and the holes, as RAGEN-2's `CoordFrozenLake` lists them (without its
    start cell, which the map does not show either)."""
    size = len(board)
    cells = {tile: [divmod(i, size) for i in range(size * size) if board[i // size][i % size] == tile] for tile in "GH"}
    player = divmod(state, size)
    where = {"H": "Player in hole", "G": "Player on goal"}.get(board[player[0]][player[1]], "Player")
    return coordinate_text(size, size, [("Goal", cells["G"]), (where, [player]), ("Holes", cells["H"])])


def move_hint(board: Sequence[str], state: int) -> str:
    """The moves in words (config `move_hint`): the goal's offset from the player and the tile
    each move leads into (edge, hole, goal or ice)."""
    size = len(board)
    row, col = divmod(state, size)
    tile = board[row][col]
    if tile in "HG":
        return "You fell into a hole." if tile == "H" else "You are on the goal."
    goal = next(divmod(i, size) for i in range(size * size) if board[i // size][i % size] == "G")
    around = []
    for name, (dr, dc) in _MOVES.items():
        r, c = row + dr, col + dc
        inside = 0 <= r < size and 0 <= c < size
        around.append(f"{name}: {'edge' if not inside else {'H': 'hole', 'G': 'goal'}.get(board[r][c], 'ice')}")
    return f"The goal is {offset_words(goal[0] - row, goal[1] - col)} of you. {', '.join(around)}."


@functools.lru_cache(maxsize=512)
def _goal_distance(board: tuple[str, ...]) -> list[int]:
    return goal_distance(board)


@functools.lru_cache(maxsize=512)
def _prototype(board: tuple[str, ...], is_slippery: bool, success_rate: float) -> GymFrozenLake:
    """Gymnasium's env for a map, built once: its transition table `P` takes most of a reset,
    and the N copies of a group share a map. Users get a shallow copy (P and desc are only read;
    each copy gets its own generator on reset)."""
    return GymFrozenLake(desc=list(board), is_slippery=is_slippery, success_rate=success_rate)


class FrozenLakeEnv(TextEnv):
    name = "frozenlake"
    description = "FrozenLake: walk on slippery ice to the goal without falling into a hole."
    config_class = FrozenLakeConfig

    def _reset(self, rng: np.random.Generator) -> dict:
        cfg = self.config
        self.board = random_map(cfg.size, cfg.p, rng)
        self.gym = copy.copy(_prototype(tuple(self.board), cfg.is_slippery, cfg.success_rate))
        self.state, _ = self.gym.reset(seed=int(rng.integers(2**31)))
        return {"map": list(self.board)}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        name = named_action(action, ACTION_NAMES, self.config.action_match)
        a = _ACTION_IDS[name.lower()] if name else None
        if a is None:
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False}
        before = self.state
        self.state, reward, terminated, _, _ = self.gym.step(a)
        shaping = 0.0
        if self.config.progress_reward:
            dist = _goal_distance(tuple(self.board))
            shaping = self.config.progress_reward * (dist[before] - dist[self.state])
        return float(reward) + shaping, bool(terminated), {"action_is_valid": True, "shaping": shaping,
                                                           "action_is_effective": self.state != before}

    def _cell(self) -> str:
        size = self.config.size
        return self.board[self.state // size][self.state % size]

    def _success(self) -> bool:
        return self._cell() == "G"

    def _render(self) -> str:
        size = self.config.size
        rows = []
        for r in range(size):
            row = []
            for c in range(size):
                tile = self.board[r][c]
                if r * size + c == self.state:
                    row.append(SYMBOLS[{"H": "player_in_hole", "G": "player_on_goal"}.get(tile, "player")])
                else:
                    row.append(SYMBOLS[{"H": "hole", "G": "goal"}.get(tile, "frozen")])
            rows.append("".join(row))
        text = observation_text(self.config.observation, "\n".join(rows), coordinates(self.board, self.state))
        return text + "\n" + move_hint(self.board, self.state) if self.config.move_hint else text

    def instruction(self) -> str:
        legend = ", ".join(f"{sym}: {role.replace('_', ' ')}" for role, sym in SYMBOLS.items())
        slip = (" The ice is slippery: you may move in a direction perpendicular to the one you chose."
                if self.config.is_slippery else "")
        obs = self.config.observation
        return (
            "You are solving the FrozenLake puzzle. Walk to the goal without falling into a hole; "
            "reaching the goal gives reward 1, a hole ends the episode." + slip + "\n"
            + (f"The meaning of each symbol in the state is:\n{legend}\n" if obs != "coord" else "")
            + (coordinate_rule(self.config.size, self.config.size) + "\n" if obs != "grid" else "")
            + f"Your available actions are:\n{', '.join(ACTION_NAMES)}"
        )

    def valid_actions(self) -> list[str]:
        return list(ACTION_NAMES)
