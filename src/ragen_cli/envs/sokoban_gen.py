"""Sokoban level generation and a breadth-first solver (pure functions, numpy Generator only).

Generation follows gym_sokoban's recipe as used by the reference (`ragen/env/sokoban`):
1. room topology by a random walk that carves small masks out of a walled room
   (`num_steps = int(1.7 * (dim_x + dim_y))`, direction change probability 0.35);
2. targets and the player on random floor cells, boxes starting on their targets;
3. reverse play: pull boxes away from the targets. Departure: instead of gym_sokoban's
   depth-first search scored by box swaps x displacement, we run a breadth-first search over
   reverse moves bounded by `depth` and pick, among states with every box off target, one with
   the largest box displacement (ties broken by the seeded generator). A state found at reverse
   depth d has a forward solution of length <= d, so every level is solvable within `depth`
   actions. Rooms where no such state exists are re-drawn (same generator, still deterministic).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import permutations

import numpy as np

Pos = tuple[int, int]
DIRS: dict[str, Pos] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_WALK_DIRS = list(DIRS.values())
# 3x3 carving masks of the random walk (offsets of the cells turned into floor)
_MASKS = [
    [(0, -1), (0, 0), (0, 1)],
    [(-1, 0), (0, 0), (1, 0)],
    [(0, -1), (0, 0), (1, 0)],
    [(0, -1), (0, 0), (1, -1), (1, 0)],
    [(0, 0), (0, 1), (1, 0)],
]


@dataclass(frozen=True)
class Level:
    """A Sokoban start state; `floor` excludes walls (the border is always wall)."""

    dim_x: int
    dim_y: int
    floor: frozenset[Pos]
    targets: frozenset[Pos]
    boxes: frozenset[Pos]
    player: Pos


def _add(a: Pos, b: Pos) -> Pos:
    return (a[0] + b[0], a[1] + b[1])


def room_topology(dim_y: int, dim_x: int, rng: np.random.Generator, p_change: float = 0.35) -> set[Pos]:
    """Floor cells carved by a random walk inside a (dim_y rows x dim_x cols) walled room."""
    pos = (int(rng.integers(1, dim_y - 1)), int(rng.integers(1, dim_x - 1)))
    direction = _WALK_DIRS[int(rng.integers(4))]
    floor: set[Pos] = set()
    for _ in range(int(1.7 * (dim_x + dim_y))):
        if rng.random() < p_change:
            direction = _WALK_DIRS[int(rng.integers(4))]
        pos = (min(max(pos[0] + direction[0], 1), dim_y - 2), min(max(pos[1] + direction[1], 1), dim_x - 2))
        for offset in _MASKS[int(rng.integers(len(_MASKS)))]:
            r, c = _add(pos, offset)
            if 1 <= r <= dim_y - 2 and 1 <= c <= dim_x - 2:
                floor.add((r, c))
    return floor


def displacement(boxes: frozenset[Pos], targets: frozenset[Pos]) -> int:
    """Smallest total Manhattan distance of a box-to-target matching (boxes are identical)."""
    bs, ts = sorted(boxes), sorted(targets)
    if len(bs) > 6:  # permutations get expensive: sum of nearest-target distances instead
        return sum(min(abs(b[0] - t[0]) + abs(b[1] - t[1]) for t in ts) for b in bs)
    return min(sum(abs(b[0] - t[0]) + abs(b[1] - t[1]) for b, t in zip(bs, perm)) for perm in permutations(ts))


def reverse_states(floor: frozenset[Pos], targets: frozenset[Pos], player: Pos, depth: int) -> dict:
    """All (player, boxes) states reachable from the solved room by <= depth reverse moves
    (a move, optionally pulling the box behind the player), mapped to their reverse depth."""
    start = (player, targets)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        d = seen[state]
        if d == depth:
            continue
        pos, boxes = state
        for move in _WALK_DIRS:
            nxt = _add(pos, move)
            if nxt not in floor or nxt in boxes:
                continue
            behind = (pos[0] - move[0], pos[1] - move[1])
            succ = [(nxt, boxes)]
            if behind in boxes:
                succ.append((nxt, (boxes - {behind}) | {pos}))
            for s in succ:
                if s not in seen:
                    seen[s] = d + 1
                    queue.append(s)
    return seen


def _try_level(dim_y: int, dim_x: int, num_boxes: int, depth: int, rng: np.random.Generator) -> Level | None:
    floor = frozenset(room_topology(dim_y, dim_x, rng))
    if len(floor) < num_boxes + 2:
        return None
    cells = sorted(floor)
    picks = rng.choice(len(cells), size=num_boxes + 1, replace=False)
    targets = frozenset(cells[i] for i in picks[:num_boxes])
    states = reverse_states(floor, targets, cells[picks[-1]], depth)
    scored = [(displacement(boxes, targets), pos, tuple(sorted(boxes)))
              for (pos, boxes) in states if not boxes & targets]
    if not scored:
        return None
    best = max(s[0] for s in scored)
    top = sorted(s[1:] for s in scored if s[0] == best)
    pos, boxes = top[int(rng.integers(len(top)))]
    return Level(dim_x, dim_y, floor, targets, frozenset(boxes), pos)


def generate_level(dim_x: int, dim_y: int, num_boxes: int, depth: int, rng: np.random.Generator,
                   max_tries: int = 1000) -> Level:
    """A level solvable in <= depth moves, deterministic given the generator's state."""
    for _ in range(max_tries):
        level = _try_level(dim_y, dim_x, num_boxes, depth, rng)
        if level is not None:
            return level
    raise RuntimeError(f"no {dim_x}x{dim_y} level with {num_boxes} boxes within depth {depth} "
                       f"after {max_tries} rooms; raise search_depth or the room size")


def solve(level: Level, max_depth: int) -> list[str] | None:
    """Shortest action sequence that puts every box on a target (breadth-first), or None when
    there is none within max_depth moves."""
    start = (level.player, level.boxes)
    parent: dict = {start: None}
    queue = deque([(start, 0)])
    while queue:
        state, d = queue.popleft()
        pos, boxes = state
        if boxes == level.targets:
            path = []
            while parent[state] is not None:
                state, name = parent[state]
                path.append(name)
            return path[::-1]
        if d == max_depth:
            continue
        for name, move in DIRS.items():
            nxt = _add(pos, move)
            if nxt not in level.floor:
                continue
            new_boxes = boxes
            if nxt in boxes:
                beyond = _add(nxt, move)
                if beyond not in level.floor or beyond in boxes:
                    continue
                new_boxes = (boxes - {nxt}) | {beyond}
            succ = (nxt, new_boxes)
            if succ not in parent:
                parent[succ] = (state, name)
                queue.append((succ, d + 1))
    return None
