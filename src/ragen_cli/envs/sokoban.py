"""Sokoban as a text env (the paper's main testbed; rewards as in gym_sokoban: -0.1 per step,
+1 box onto target, -1 box off target, +10 when every box is on a target)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ragen_cli.envs.base import (TextEnv, check_action_match, check_observation, coordinate_rule, coordinate_text,
                                 named_action, observation_text, offset_words)
from ragen_cli.envs.sokoban_gen import DIRS, Level, Pos, generate_level

ROLES = ("wall", "floor", "target", "box_on_target", "box", "player", "player_on_target")
DEFAULT_SYMBOLS = {"wall": "#", "floor": "_", "target": "O", "box_on_target": "√", "box": "X",
                   "player": "P", "player_on_target": "S"}
ACTION_NAMES = ("Up", "Down", "Left", "Right")

STEP_PENALTY, BOX_ON_REWARD, BOX_OFF_PENALTY, SOLVED_REWARD = -0.1, 1.0, -1.0, 10.0


@dataclass(frozen=True)
class SokobanConfig:
    dim_x: int = 6
    """Room width in cells, border walls included."""
    dim_y: int = 6
    """Room height in cells, border walls included."""
    num_boxes: int = 1
    """Boxes (and targets) in the room."""
    search_depth: int = 10
    """Reverse-play depth bound; levels are solvable in <= min(search_depth, max_actions) moves."""
    max_actions: int = 10
    """Actions per episode; the episode is truncated after that many."""
    action_match: str = "exact"
    """How an answer names an action: `exact` (the name alone, any case; as the reference) or
    `word` (also a text naming exactly one action as a whole word). Exact by default: Left and Up
    are common words, and "You have 9 actions left." would be Left."""
    observation: str = "grid"
    """What the model sees of the state: `grid` (the symbol grid, as the reference's Sokoban),
    `coord` (zero-indexed coordinates of the targets, boxes and player) or `grid_coord` (both;
    RAGEN-2's `CoordSokoban`). None of them names a move."""
    move_hint: bool = False
    """A hint, not an observation: follow the grid with a sentence that names the moves (each
    box's offset from the player, the way it must go to the nearest target and what each move
    leads into: "The box is 1 Up of you; it must go 2 Left. Up: box, Down: wall, Left: floor,
    Right: floor."). Playing the named moves scores 0.75 on the shipped levels without reading
    anything else, so no shipped spec uses it (docs/envs.md)."""
    progress_reward: float = 0.0
    """Potential-based shaping (Ng, Harada & Russell 1999): each move also earns this times the
    drop in `push_distance` (boxes' distances to their nearest targets plus the player's walk to
    a box). Over an episode it adds this times (start distance - final distance), so within a
    GRPO group (one level) it ranks the trajectories that do not solve it by how close they end.
    0 (off) in the reference; success is unaffected."""
    symbols: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SYMBOLS))
    """Symbol of each role: wall, floor, target, box_on_target, box, player, player_on_target."""

    def __post_init__(self):
        check_action_match(self.action_match)
        check_observation(self.observation)
        if min(self.dim_x, self.dim_y) < 4:
            raise ValueError(f"dim_x and dim_y must be >= 4, got {self.dim_x}x{self.dim_y}")
        if not 1 <= self.num_boxes <= 4:
            raise ValueError(f"num_boxes must be in 1..4, got {self.num_boxes}")
        if self.search_depth < 1 or self.max_actions < 1:
            raise ValueError("search_depth and max_actions must be >= 1")
        if self.progress_reward < 0:
            raise ValueError(f"progress_reward must be >= 0, got {self.progress_reward}")
        symbols = dict(self.symbols)
        if set(symbols) != set(ROLES):
            raise ValueError(f"symbols must give exactly the roles {', '.join(ROLES)}; got {', '.join(symbols)}")
        values = list(symbols.values())
        if any(not isinstance(s, str) or len(s) != 1 for s in values) or len(set(values)) != len(values):
            raise ValueError(f"symbols must be distinct single characters, got {symbols}")


def _manhattan(a: Pos, b: Pos) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def push_distance(level: Level, player: Pos, boxes: frozenset[Pos] | set[Pos]) -> int:
    """Moves still needed, estimated on an open floor (config `progress_reward`): each box's
    Manhattan distance to its nearest target, plus the player's to the nearest box off target
    less one (the push starts next to it); 0 when every box is on a target."""
    off = boxes - level.targets
    if not off:
        return 0
    boxes_to_go = sum(min(_manhattan(box, t) for t in level.targets) for box in boxes)
    return boxes_to_go + min(_manhattan(player, box) for box in off) - 1


def coordinates(level: Level, player: Pos, boxes: frozenset[Pos] | set[Pos]) -> str:
    """The state as coordinates (config `observation: coord`), as RAGEN-2's `CoordSokoban`
    lists them: targets, boxes, boxes on target, the player (on a target); no walls."""
    on = boxes & level.targets
    where = "Player on target" if player in level.targets else "Player"
    return coordinate_text(level.dim_y, level.dim_x, [("Targets", level.targets), ("Boxes", boxes - on),
                                                      ("Boxes on target", on), (where, [player])])


def move_hint(level: Level, player: Pos, boxes: frozenset[Pos] | set[Pos]) -> str:
    """The moves in words (config `move_hint`): for each box off target its offset from the
    player and its offset to the nearest target, then the cell each move leads into."""
    off = sorted(boxes - level.targets)
    if not off:
        return "Every box is on a target."
    sentences = []
    for i, box in enumerate(off, 1):
        target = min(level.targets, key=lambda t: (abs(t[0] - box[0]) + abs(t[1] - box[1]), t))
        name = f"Box {i}" if len(off) > 1 else "The box"
        sentences.append(f"{name} is {offset_words(box[0] - player[0], box[1] - player[1])} of you; "
                         f"it must go {offset_words(target[0] - box[0], target[1] - box[1])}.")
    around = []
    for name in ACTION_NAMES:
        dr, dc = DIRS[name.lower()]
        cell = (player[0] + dr, player[1] + dc)
        what = ("box" if cell in boxes else "target" if cell in level.targets else "floor"
                if cell in level.floor else "wall")
        around.append(f"{name}: {what}")
    return " ".join(sentences) + f" {', '.join(around)}."


class SokobanEnv(TextEnv):
    name = "sokoban"
    description = "Sokoban: push every box onto a target."
    config_class = SokobanConfig

    def _reset(self, rng: np.random.Generator) -> dict:
        cfg = self.config
        depth = min(cfg.search_depth, cfg.max_actions)
        self.level: Level = generate_level(cfg.dim_x, cfg.dim_y, cfg.num_boxes, depth, rng)
        self.player = self.level.player
        self.boxes = set(self.level.boxes)
        return {}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        name = named_action(action, ACTION_NAMES, self.config.action_match)
        move = DIRS.get(name.lower()) if name else None
        if move is None:
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False}
        floor, targets = self.level.floor, self.level.targets
        before = len(self.boxes & targets)
        distance = push_distance(self.level, self.player, self.boxes) if self.config.progress_reward else 0
        nxt = (self.player[0] + move[0], self.player[1] + move[1])
        moved = False
        if nxt in self.boxes:
            beyond = (nxt[0] + move[0], nxt[1] + move[1])
            if beyond in floor and beyond not in self.boxes:
                self.boxes.remove(nxt)
                self.boxes.add(beyond)
                self.player, moved = nxt, True
        elif nxt in floor:
            self.player, moved = nxt, True
        after = len(self.boxes & targets)
        reward = STEP_PENALTY + BOX_ON_REWARD * max(after - before, 0) + BOX_OFF_PENALTY * max(before - after, 0)
        solved = after == len(targets)
        if solved:
            reward += SOLVED_REWARD
        shaping = 0.0
        if self.config.progress_reward:
            shaping = self.config.progress_reward * (distance - push_distance(self.level, self.player, self.boxes))
        return reward + shaping, solved, {"action_is_valid": True, "action_is_effective": moved, "shaping": shaping}

    def _success(self) -> bool:
        return self.boxes == self.level.targets

    def _render(self) -> str:
        sym, lv = self.config.symbols, self.level
        rows = []
        for r in range(lv.dim_y):
            row = []
            for c in range(lv.dim_x):
                p, on_target = (r, c), (r, c) in lv.targets
                if p == self.player:
                    role = "player_on_target" if on_target else "player"
                elif p in self.boxes:
                    role = "box_on_target" if on_target else "box"
                elif p in lv.floor:
                    role = "target" if on_target else "floor"
                else:
                    role = "wall"
                row.append(sym[role])
            rows.append("".join(row))
        text = observation_text(self.config.observation, "\n".join(rows), coordinates(lv, self.player, self.boxes))
        return text + "\n" + move_hint(lv, self.player, self.boxes) if self.config.move_hint else text

    def instruction(self) -> str:
        s = self.config.symbols
        legend = ", ".join(f"{s[role]}: {role.replace('_', ' ')}" for role in ROLES)
        obs = self.config.observation
        return (
            "You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets. "
            "When you are right next to a box, you can push it by moving in the same direction. "
            "You cannot push a box through a wall, and you cannot pull a box.\n"
            + (f"The meaning of each symbol in the state is:\n{legend}\n" if obs != "coord" else "")
            + (coordinate_rule(self.config.dim_y, self.config.dim_x) + "\n" if obs != "grid" else "")
            + f"Your available actions are:\n{', '.join(ACTION_NAMES)}"
        )

    def valid_actions(self) -> list[str]:
        return list(ACTION_NAMES)
