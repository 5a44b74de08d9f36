"""Rollout reuse (online-k), PPO epochs and micro-batches (RAGEN arXiv 2504.20073 section 4).

Shapes: ``B`` kept trajectories (after the StarPO-S filter), ``T`` tokens.

StarPO's rollout frequency: with *Online-k* one rollout batch feeds ``k`` consecutive policy
updates, each on its own ``1/k`` mini-batch (RAGEN emulates this by raising the number of groups
while keeping ``ppo_mini_batch_size``; here it is explicit). ``ppo_epochs`` repeats the k
updates over a fresh shuffle (PPO, Schulman et al. 2017, Algorithm 1: K epochs of minibatch
SGD). Each update is one optimizer step accumulated over micro-batches; ``accumulation_weights``
makes the accumulated loss equal the loss of the whole mini-batch.
"""

from __future__ import annotations

import torch


def _split(idx: torch.Tensor, parts: int) -> list[torch.Tensor]:
    """Split into ``parts`` contiguous pieces whose sizes differ by at most one (larger first)."""
    base, extra = divmod(idx.numel(), parts)
    sizes = [base + (1 if i < extra else 0) for i in range(parts)]
    return list(torch.split(idx, sizes))


def update_schedule(
    num_samples: int,
    online_k: int,
    ppo_epochs: int,
    micro_batch_size: int,
    seed: int,
    shuffle: bool = True,
) -> list[list[torch.Tensor]]:
    """Index plan for one rollout batch -> ``updates[ppo_epochs * online_k][micro][idx]``.

    For each epoch the ``B = num_samples`` indices are permuted (``torch.Generator`` seeded with
    ``seed + epoch``, so a resumed run replays the same plan), split into ``online_k`` mini-batches
    of near-equal size (one optimizer step each), and each mini-batch into micro-batches of at
    most ``micro_batch_size`` trajectories (gradient accumulation).

    Deviation: when ``B`` is not a multiple of ``online_k`` the mini-batches differ in size by
    one instead of dropping the remainder (verl requires divisibility).
    """
    if online_k < 1 or ppo_epochs < 1 or micro_batch_size < 1:
        raise ValueError(
            f"online_k, ppo_epochs, micro_batch_size must be >= 1, got {online_k}, {ppo_epochs}, {micro_batch_size}"
        )
    if num_samples < online_k:
        raise ValueError(f"{num_samples} trajectories cannot feed online_k={online_k} updates (need >= k)")
    updates: list[list[torch.Tensor]] = []
    for epoch in range(ppo_epochs):
        if shuffle:
            order = torch.randperm(num_samples, generator=torch.Generator().manual_seed(seed + epoch))
        else:
            order = torch.arange(num_samples)
        for mini in _split(order, online_k):
            updates.append(list(torch.split(mini, micro_batch_size)))
    return updates


def _nonempty_rows(mask: torch.Tensor) -> torch.Tensor:
    return (mask.sum(-1) > 0).sum()


# What each aggregation mode averages over, keyed by ``AlgorithmSpec.loss_agg``.
_UNITS = {
    "token-mean": torch.sum,
    "seq-mean-token-sum": _nonempty_rows,
    "seq-mean-token-mean": _nonempty_rows,
}


def accumulation_weights(masks: list[torch.Tensor], mode: str) -> list[float]:
    """Weights ``w_i`` with ``sum_i w_i aggregate(x_i, m_i, mode) == aggregate(cat x, cat m, mode)``.

    ``masks``: the ``[b_i, T_i]`` loss masks of one mini-batch's micro-batches. ``token-mean``
    weighs a micro-batch by its share of masked tokens; the ``seq-mean-*`` modes by its share of
    non-empty rows (the rows ``losses.aggregate`` averages over). An empty micro-batch gets 0;
    if the whole mini-batch is empty every weight is 0.
    """
    if mode not in _UNITS:
        raise ValueError(f"unknown loss aggregation {mode!r}; choose from {sorted(_UNITS)}")
    if any(m.dim() != 2 for m in masks):
        raise ValueError(f"masks must be [b, T], got shapes {[tuple(m.shape) for m in masks]}")
    counts = [float(_UNITS[mode](m.float())) for m in masks]
    total = sum(counts)
    return [c / total if total > 0 else 0.0 for c in counts]
