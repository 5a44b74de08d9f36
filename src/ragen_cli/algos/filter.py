"""StarPO-S uncertainty-based rollout filtering (RAGEN arXiv 2504.20073 section 4).

Shapes: ``B`` trajectories, ``G`` groups (initial states), ``N`` group size (``B = G N`` in the
usual case; unequal group sizes are allowed).

The paper keeps the prompts on which the policy is most uncertain, measured by the standard
deviation of the N episode rewards of a group, and drops the rest ("top p% by reward std").
"""

from __future__ import annotations

import math

import torch

from .masked import group_index, group_moments

# Keyed by ``FilterSpec.direction``: the sort key of a group's std (ascending sort, stable).
_SORT_KEY = {
    "top": lambda std: -std,
    "bottom": lambda std: std,
}


def kept_group_count(num_groups: int, keep_ratio: float) -> int:
    """``max(1, floor(keep_ratio * G))`` groups, as RAGEN (``int(ratio * env_groups)``).

    A relative slack of 1e-9 absorbs round-off, so ``0.29 * 100`` keeps 29 groups, not 28.
    """
    if not 0.0 < keep_ratio <= 1.0:
        raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio}")
    return max(1, min(num_groups, math.floor(keep_ratio * num_groups * (1 + 1e-9))))


def filter_groups(
    rewards: torch.Tensor, group: torch.Tensor, keep_ratio: float, direction: str = "top"
) -> tuple[torch.Tensor, dict[str, float]]:
    """Keep the groups with the highest (or lowest) in-group reward std -> ``(keep_idx, stats)``.

    StarPO-S variance-based trajectory filtering (RAGEN section 4): score each group by the std
    of its episode rewards, keep ``max(1, floor(keep_ratio * G))`` groups, highest std first
    (``direction="top"``) or lowest first (``"bottom"``, RAGEN ``std_rev``). Ties are broken by
    the lower group id first, so the choice is deterministic.

    Shapes: ``rewards[B]`` episode rewards, ``group[B]`` integer group ids (any values).
    ``keep_idx``: LongTensor of the kept trajectories' indices into the batch, ascending (batch
    order is preserved).

    Stats: ``in_group_std_before`` (mean of all group stds), ``in_group_std_after`` (mean over
    kept groups), ``zero_std_frac`` (fraction of groups whose rewards are all equal),
    ``kept_groups`` (count) and ``kept_fraction`` (kept groups / G).

    Deviation: the std is the *population* std (divide by N), not the Bessel-corrected one of
    RAGEN's ``torch.std``: for equal group sizes the ranking is identical, the value is the
    spread of the rewards actually seen, and a group of one has std 0 instead of NaN. A group is
    zero-std exactly when all its rewards are equal (no floating-point round-off).
    """
    if rewards.dim() != 1 or rewards.shape != group.shape:
        raise ValueError(f"need rewards [B] and group [B], got {tuple(rewards.shape)} and {tuple(group.shape)}")
    if rewards.numel() == 0:
        raise ValueError("cannot filter an empty batch")
    if direction not in _SORT_KEY:
        raise ValueError(f"unknown filter direction {direction!r}; choose from {sorted(_SORT_KEY)}")
    _, inverse, num_groups = group_index(group)
    _, _, std = group_moments(rewards, inverse, num_groups, unbiased=False)
    k = kept_group_count(num_groups, keep_ratio)
    order = torch.sort(_SORT_KEY[direction](std), stable=True).indices
    kept = torch.zeros(num_groups, dtype=torch.bool)
    kept[order[:k]] = True
    keep_idx = kept[inverse].nonzero().squeeze(-1)
    stats = {
        "in_group_std_before": std.mean().item(),
        "in_group_std_after": std[kept].mean().item(),
        "zero_std_frac": (std == 0).float().mean().item(),
        "kept_groups": float(k),
        "kept_fraction": k / num_groups,
    }
    return keep_idx, stats
