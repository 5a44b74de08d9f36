"""Masked reductions and group statistics shared by the advantage, loss and filter functions.

Shapes: ``B`` trajectories, ``T`` tokens, ``G`` groups, ``N`` group size. ``mask[B,T]`` is 1 on
the tokens the policy sampled (the loss mask) and 0 elsewhere (prompt, observations, padding).
Every reduction here is defined for an all-zero mask (it returns 0, never NaN).
"""

from __future__ import annotations

import torch


def check_same_shape(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` naming the tensors when their shapes differ."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"shape mismatch: {shapes}")


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of ``x`` where ``mask`` is 1 (``x`` at masked-out positions may be anything finite)."""
    prod = torch.where(mask.bool(), x, torch.zeros_like(x))
    return prod.sum() if dim is None else prod.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` over ``mask``; 0 where the mask is empty (not NaN)."""
    count = mask.float().sum() if dim is None else mask.float().sum(dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1.0)


def masked_var(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Unbiased (Bessel-corrected, as verl) variance of ``x`` over the whole mask.

    Returns 0 when fewer than two positions are masked in (verl raises there instead).
    """
    count = mask.float().sum()
    mean = masked_mean(x, mask)
    sq = masked_sum((x - mean) ** 2, mask)
    return torch.where(count > 1, sq / (count - 1).clamp(min=1.0), torch.zeros_like(sq))


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps)`` over the mask, 0 outside it (verl ``masked_whiten``).

    With one masked position the variance is taken as 0, so the result is 0 there (centred).
    """
    mean = masked_mean(x, mask)
    var = masked_var(x, mask)
    out = (x - mean) * torch.rsqrt(var + eps)
    return torch.where(mask.bool(), out, torch.zeros_like(out))


def group_index(group: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Map arbitrary integer group ids ``[B]`` to ``0..G-1`` (ascending id order).

    Returns ``(ids[G], inverse[B], G)``: ``ids`` are the sorted distinct group ids and
    ``inverse[i]`` is the position of trajectory ``i``'s group in ``ids``.
    """
    if group.dim() != 1:
        raise ValueError(f"group must be 1-D [B], got shape {tuple(group.shape)}")
    if group.is_floating_point():
        raise ValueError("group must hold integer ids, got a floating-point tensor")
    ids, inverse = torch.unique(group, sorted=True, return_inverse=True)
    return ids, inverse, int(ids.numel())


def group_moments(
    scores: torch.Tensor, inverse: torch.Tensor, num_groups: int, unbiased: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group count, mean and std of ``scores[B]`` -> three tensors of shape ``[G]``.

    The std is exactly 0 for a group whose scores are all equal (checked with max == min, so
    floating-point round-off in the mean cannot make it 1e-17). A group of one has std 0 in both
    the population and the unbiased variant (the unbiased one is undefined there).
    """
    scores = scores.float()
    count = torch.zeros(num_groups, dtype=scores.dtype).index_add_(0, inverse, torch.ones_like(scores))
    mean = torch.zeros(num_groups, dtype=scores.dtype).index_add_(0, inverse, scores) / count
    sq = torch.zeros(num_groups, dtype=scores.dtype).index_add_(0, inverse, (scores - mean[inverse]) ** 2)
    denom = (count - 1).clamp(min=1.0) if unbiased else count
    std = (sq / denom).sqrt()
    lo = torch.full((num_groups,), float("inf")).scatter_reduce(0, inverse, scores, "amin")
    hi = torch.full((num_groups,), float("-inf")).scatter_reduce(0, inverse, scores, "amax")
    std = torch.where(hi == lo, torch.zeros_like(std), std)
    return count, mean, std
