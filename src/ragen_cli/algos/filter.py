"""StarPO-S uncertainty-based rollout filtering (RAGEN arXiv 2504.20073 section 4) and the
selection strategies of its follow-up RAGEN-2 (mll-lab-nu/RAGEN `ragen/trainer/rollout_filter.py`,
`docs/guide_rollout_filtering.md`).

Shapes: ``B`` trajectories, ``G`` groups (initial states), ``N`` group size (``B = G N`` in the
usual case; unequal group sizes are allowed).

The paper keeps the prompts on which the policy is most uncertain, measured by the standard
deviation of the N episode rewards of a group, and drops the rest ("top p% by reward std").
RAGEN-2 scores a group by a statistic of a per-trajectory value (reward std, mean or sum,
entropy mean or std, length mean) and selects groups by one of four strategies (``select_groups``).
"""

from __future__ import annotations

import torch

from ragen_cli.spec.sizes import kept_groups

from .masked import group_index, group_moments

# `algorithm.filter.metric` -> (the per-trajectory value, the group statistic): RAGEN-2's
# rollout_filter_metric (reward_variance ranks as reward_std; entropy_variance as entropy_std).
METRICS = {
    "reward_std": ("reward", "std"),
    "reward": ("reward", "mean"),
    "reward_sum": ("reward", "sum"),
    "entropy": ("entropy", "mean"),
    "entropy_std": ("entropy", "std"),
    "length": ("length", "mean"),
}
STRATEGIES = ("top_k", "top_k_abs", "top_p", "min_p")
DIRECTIONS = ("top", "bottom")  # RAGEN-2's rollout_filter_type: largest / smallest
ZERO = 1e-10  # RAGEN-2: a score with |score| <= 1e-10 is zero (rollout_filter_include_zero)


def kept_group_count(num_groups: int, keep_ratio: float) -> int:
    """``max(1, floor(keep_ratio * G))`` groups, as RAGEN (``int(ratio * env_groups)``); the one
    definition is `spec.sizes.kept_groups` (the Plan's sizes use it too)."""
    if not 0.0 < keep_ratio <= 1.0:
        raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio}")
    return kept_groups(num_groups, keep_ratio)


def group_scores(values: torch.Tensor, inverse: torch.Tensor, num_groups: int, stat: str) -> torch.Tensor:
    """A group's score from its trajectories' ``values[B]``: ``std`` (population), ``mean`` or
    ``sum`` -> ``[G]`` (RAGEN-2 metrics: reward_variance ranks as std, reward = mean,
    reward_sum = sum, entropy = mean, entropy_variance = std, length = mean)."""
    count, mean, std = group_moments(values, inverse, num_groups, unbiased=False)
    if stat == "std":
        return std
    if stat == "mean":
        return mean
    if stat == "sum":
        return mean * count
    raise ValueError(f"unknown group statistic {stat!r}; choose std, mean or sum")


def select_groups(
    scores: torch.Tensor,
    strategy: str,
    amount: float,
    direction: str = "top",
    include_zero: bool = True,
    top_p_mode: str = "linear",
    selection_eps: float = 0.01,
) -> torch.Tensor:
    """Which groups to keep -> ``bool[G]``, by RAGEN-2's ``_select_top_groups``.

    Candidates are all groups, or with ``include_zero=False`` those whose score is not zero
    (``|score| > 1e-10``). ``direction`` "top" prefers high scores, "bottom" low ones; equal
    scores are ordered by the lower group index first, so the choice is deterministic.

    - ``top_k``: ``amount`` is the kept fraction: ``max(1, floor(amount G))`` groups (of all G,
      as the reference), at most the number of candidates.
    - ``top_k_abs``: ``amount`` groups (at least 1, at most the candidates).
    - ``top_p``: ``amount >= 1`` keeps every candidate. ``linear``: walk the candidates in order,
      adding scores until the sum reaches ``amount * sum(scores) - selection_eps``, stopping at a
      score <= 0; if the sum never reaches it nothing is kept. ``softmax``: the smallest prefix
      whose softmax mass (of the scores, or of minus the scores for "bottom") reaches ``amount``.
    - ``min_p``: "top" keeps scores ``>= amount * max``; "bottom" keeps scores ``<= min / amount``.

    The result may keep no group (top_p linear below its threshold, or no non-zero candidate):
    the caller skips the update (RAGEN-2's ``empty_after_filter``).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown filter strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown filter direction {direction!r}; choose from {', '.join(DIRECTIONS)}")
    scores = scores.float()
    num_groups = scores.numel()
    cand = torch.arange(num_groups)
    if not include_zero:
        cand = cand[scores.abs() > ZERO]
    kept = torch.zeros(num_groups, dtype=torch.bool)
    if cand.numel() == 0:
        return kept
    s = scores[cand]
    sign = -1.0 if direction == "top" else 1.0
    order = cand[torch.sort(sign * s, stable=True).indices]  # preferred first, ties by lower index
    if strategy in ("top_k", "top_k_abs"):
        k = kept_group_count(num_groups, amount) if strategy == "top_k" else max(1, int(amount))
        kept[order[: min(k, cand.numel())]] = True
    elif strategy == "top_p" and amount >= 1.0:
        kept[cand] = True
    elif strategy == "top_p" and top_p_mode == "linear":
        threshold = amount * s.sum().item() - selection_eps
        total, n = 0.0, 0
        for score in scores[order].tolist():
            if total >= threshold or score <= 0:
                break
            total += score
            n += 1
        if total >= threshold:
            kept[order[:n]] = True
    elif strategy == "top_p" and top_p_mode == "softmax":
        probs = torch.softmax(-sign * scores[order], dim=0)  # order is already by descending mass
        cutoff = int(torch.searchsorted(torch.cumsum(probs, 0), torch.tensor(amount)).item())
        kept[order[: min(cutoff + 1, cand.numel())]] = True
    elif strategy == "top_p":
        raise ValueError(f"unknown top_p mode {top_p_mode!r}; choose linear or softmax")
    elif direction == "top":  # min_p
        kept[cand[s >= s.max() * amount - ZERO]] = True
    else:
        kept[cand[s <= s.min() / (amount + ZERO) + ZERO]] = True
    return kept


def filter_groups(
    rewards: torch.Tensor,
    group: torch.Tensor,
    keep_ratio: float,
    direction: str = "top",
    *,
    strategy: str = "top_k",
    value: float | None = None,
    values: torch.Tensor | None = None,
    stat: str = "std",
    include_zero: bool = True,
    top_p_mode: str = "linear",
    selection_eps: float = 0.01,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Keep the groups with the highest (or lowest) score -> ``(keep_idx, stats)``.

    StarPO-S variance-based trajectory filtering (RAGEN section 4): by default score each group
    by the std of its episode rewards and keep ``max(1, floor(keep_ratio * G))`` groups, highest
    std first (``direction="top"``) or lowest first (``"bottom"``, RAGEN ``std_rev``). Ties are
    broken by the lower group id first, so the choice is deterministic.

    RAGEN-2 options: ``values[B]`` (default ``rewards``) and ``stat`` give each group's score
    (`group_scores`); ``strategy`` with ``value`` (top_k uses ``keep_ratio``), ``include_zero``,
    ``top_p_mode`` and ``selection_eps`` choose the groups (`select_groups`).

    Shapes: ``rewards[B]`` episode rewards, ``group[B]`` integer group ids (any values).
    ``keep_idx``: LongTensor of the kept trajectories' indices into the batch, ascending (batch
    order is preserved); empty when no group was kept.

    Stats (always of the *reward* std, whatever the score): ``in_group_std_before`` (mean of
    all group stds), ``in_group_std_after`` (mean over kept groups; 0 when none), ``zero_std_frac``
    (fraction of groups whose rewards are all equal), ``kept_groups`` (count) and
    ``kept_fraction`` (kept groups / G).

    Deviation: the std is the *population* std (divide by N), not the Bessel-corrected one of
    RAGEN's ``torch.std``: for equal group sizes the ranking is identical, the value is the
    spread of the rewards actually seen, and a group of one has std 0 instead of NaN. A group is
    zero-std exactly when all its rewards are equal (no floating-point round-off).
    """
    values = rewards if values is None else values
    if rewards.dim() != 1 or rewards.shape != group.shape or values.shape != group.shape:
        raise ValueError(
            f"need rewards [B], values [B] and group [B], got {tuple(rewards.shape)}, {tuple(values.shape)} "
            f"and {tuple(group.shape)}"
        )
    if rewards.numel() == 0:
        raise ValueError("cannot filter an empty batch")
    if (strategy == "top_k") != (value is None):
        raise ValueError("top_k keeps keep_ratio of the groups and takes no value; every other strategy needs one")
    _, inverse, num_groups = group_index(group)
    _, _, std = group_moments(rewards, inverse, num_groups, unbiased=False)
    scores = group_scores(values, inverse, num_groups, stat)
    amount = keep_ratio if strategy == "top_k" else value
    kept = select_groups(scores, strategy, amount, direction, include_zero, top_p_mode, selection_eps)
    keep_idx = kept[inverse].nonzero().squeeze(-1)
    k = int(kept.sum())
    stats = {
        "in_group_std_before": std.mean().item(),
        "in_group_std_after": std[kept].mean().item() if k else 0.0,
        "zero_std_frac": (std == 0).float().mean().item(),
        "kept_groups": float(k),
        "kept_fraction": k / num_groups,
    }
    return keep_idx, stats
