"""Per-turn training rows (`rollout.update_context: window`; RAGEN-2's limited_multi_turn).

A trajectory of K turns becomes K rows. Row k is the prompt the sampler saw at turn k (its
windowed prompt, `Trajectory.turn_prompts[k]`, or the trajectory's own prefix when the window
still covered every turn) followed by the turn's sampled reply, with loss mask 1 on the reply
only. The sampling log-probs were computed under exactly that prompt, so the trainer's first
ratio is 1 up to kernel rounding, and a row's length is bounded by the window, not the episode.

Advantages stay a property of the episode: they are computed on the whole trajectories (where
GRPO's groups, the turn rewards and GAE's recursion across turns live) and copied onto the rows
(`RowMap.to_rows`); the critic values each reply token under its row's prompt, and
`RowMap.to_full` places those values on the episode grid for GAE. Both grids are the shifted
grids of train/batch.py: column j holds token j + 1.

Rows are ordered by (group, turn, trajectory), so the copies of one group at one turn are
adjacent and share a prefix key (`prefix_group`): the shared-prefix forward runs their common
prompt once. Empty rows (mask 0) pad the count to a multiple of the process count, so every
process makes the same number of forward/backward calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ragen_cli.rollout.types import Trajectory


@dataclass(frozen=True)
class Span:
    """Where one turn's reply sits: row `row` (shifted column `row_col`) and episode `traj`
    (shifted column `full_col`), `n` tokens."""

    row: int
    traj: int
    row_col: int
    full_col: int
    n: int


@dataclass(frozen=True)
class RowMap:
    """The reply spans of every row, with the shapes of both shifted grids."""

    spans: tuple[Span, ...]
    full_shape: tuple[int, int]  # [B, T] of the episodes' batch
    rows_shape: tuple[int, int]  # [R, T'] of the rows' batch

    def to_rows(self, full: torch.Tensor) -> torch.Tensor:
        """Episode-grid values [B,T] -> row-grid [R,T'] (reply tokens only, 0 elsewhere)."""
        out = torch.zeros(self.rows_shape, dtype=full.dtype)
        for s in self.spans:
            out[s.row, s.row_col: s.row_col + s.n] = full[s.traj, s.full_col: s.full_col + s.n]
        return out

    def to_full(self, rows: torch.Tensor) -> torch.Tensor:
        """Row-grid values [R,T'] -> episode grid [B,T] (reply tokens only, 0 elsewhere)."""
        out = torch.zeros(self.full_shape, dtype=rows.dtype)
        for s in self.spans:
            out[s.traj, s.full_col: s.full_col + s.n] = rows[s.row, s.row_col: s.row_col + s.n]
        return out


def turn_row(traj: Trajectory, k: int) -> Trajectory:
    """Turn k (0-based) of `traj` as its own one-turn trajectory: the turn's sampler prompt, then
    its reply (mask 1, the sampling log-probs and answer mask of those tokens)."""
    s, e = traj.turn_start[k], traj.turn_end[k]
    prompt = traj.turn_prompts[k] if traj.turn_prompts[k] is not None else traj.input_ids[:s]
    p, n = len(prompt), e + 1 - s
    answer = traj.answer_mask[s: e + 1] if traj.answer_mask else [0] * n
    return Trajectory(
        input_ids=list(prompt) + traj.input_ids[s: e + 1], loss_mask=[0] * p + [1] * n,
        old_logprobs=[0.0] * p + traj.old_logprobs[s: e + 1], answer_mask=[0] * p + list(answer),
        turn_start=[p], turn_end=[p + n - 1], turn_prompts=[None], turn_rewards=[traj.turn_rewards[k]],
        turns=[traj.turns[k]], group=traj.group, seed=traj.seed, env_name=traj.env_name,
    )


def empty_row(like: Trajectory) -> Trajectory:
    """A row that trains nothing (mask 0 everywhere): padding."""
    n = len(like.input_ids)
    return Trajectory(input_ids=list(like.input_ids), loss_mask=[0] * n, old_logprobs=[0.0] * n,
                      answer_mask=[0] * n, group=like.group, seed=like.seed, env_name=like.env_name)


def turn_rows(trajs: list[Trajectory], pad_to: int = 1) -> tuple[list[Trajectory], list[int], RowMap]:
    """(rows, prefix keys, map) for `trajs` (the kept episodes, in batch order). Each row's
    prefix key is the same for rows of one group at one turn, distinct otherwise; padding rows
    get keys of their own. A batch without any turn gives one padding row per process."""
    if not trajs:
        raise ValueError("turn_rows needs at least one trajectory")
    for t in trajs:
        if len(t.turn_start) != len(t.turn_end) or len(t.turn_prompts) != len(t.turn_end):
            raise ValueError("per-turn rows need each turn's start and sampler prompt (a trajectory from rollout.driver)")
    order = sorted(((t.group, k, b) for b, t in enumerate(trajs) for k in range(len(t.turn_end))))
    rows, keys, spans = [], [], []
    key_of: dict[tuple[int, int], int] = {}
    for group, k, b in order:
        row = turn_row(trajs[b], k)
        spans.append(Span(len(rows), b, row.turn_start[0] - 1, trajs[b].turn_start[k] - 1, row.turn_end[0] + 1 - row.turn_start[0]))
        keys.append(key_of.setdefault((group, k), len(key_of)))
        rows.append(row)
    while not rows or len(rows) % pad_to:
        rows.append(empty_row(rows[0] if rows else trajs[0]))
        keys.append(len(key_of) + len(rows))
    full_T = max(len(t.input_ids) for t in trajs) - 1
    rows_T = max(len(r.input_ids) for r in rows) - 1
    return rows, keys, RowMap(tuple(spans), (len(trajs), full_T), (len(rows), rows_T))
