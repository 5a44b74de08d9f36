"""Token rewards from per-turn rewards (StarPO, RAGEN arXiv 2504.20073 section 3).

Shapes: ``B`` trajectories, ``T`` tokens. Turn ends and turn rewards come ragged (lists per
trajectory, as in ``rollout.types.Trajectory``) and become ``[B,T]`` tensors here.
"""

from __future__ import annotations

import torch


def token_rewards(
    turn_end: list[list[int]], turn_rewards: list[list[float]], T: int, turn_level: bool
) -> torch.Tensor:
    """Place per-turn rewards on tokens -> ``rewards[B,T]`` (float32).

    StarPO (RAGEN section 3): the trajectory reward is credited at token level.
    ``turn_level=True``: turn ``k``'s reward sits on its last generated token ``turn_end[b][k]``
    (RAGEN ``use_turn_scores``). ``turn_level=False``: the episode sum sits on the last turn end
    (RAGEN's default, outcome reward on the last token).

    Shapes: ``turn_end`` and ``turn_rewards`` are ragged ``B x turns``; output ``[B,T]``.
    A trajectory with no turns gets an all-zero row.
    """
    if len(turn_end) != len(turn_rewards):
        raise ValueError(f"turn_end has {len(turn_end)} rows but turn_rewards has {len(turn_rewards)}")
    rewards = torch.zeros(len(turn_end), T, dtype=torch.float32)
    for b, (ends, rs) in enumerate(zip(turn_end, turn_rewards)):
        if len(ends) != len(rs):
            raise ValueError(f"trajectory {b}: {len(ends)} turn ends but {len(rs)} turn rewards")
        if any(not 0 <= e < T for e in ends) or any(x >= y for x, y in zip(ends, ends[1:])):
            raise ValueError(f"trajectory {b}: turn ends {ends} must be increasing and inside [0, {T})")
        if not ends:
            continue
        if turn_level:
            rewards[b, torch.tensor(ends)] = torch.tensor(rs, dtype=torch.float32)
        else:
            rewards[b, ends[-1]] = float(sum(rs))
    return rewards


def turn_end_mask(turn_end: list[list[int]], T: int) -> torch.Tensor:
    """Boolean ``[B,T]`` that is True on each turn's last generated token."""
    out = torch.zeros(len(turn_end), T, dtype=torch.bool)
    for b, ends in enumerate(turn_end):
        if any(not 0 <= e < T for e in ends):
            raise ValueError(f"trajectory {b}: turn ends {ends} outside [0, {T})")
        out[b, list(ends)] = True
    return out
