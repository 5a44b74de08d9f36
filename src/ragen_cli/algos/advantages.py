"""Advantage estimators for StarPO / StarPO-S (RAGEN, arXiv 2504.20073, sections 3-4).

Shapes: ``B`` trajectories, ``T`` tokens, ``G`` groups, ``N`` group size. ``mask[B,T]`` is the
loss mask: 1 on tokens the policy sampled, 0 on the prompt, on observation tokens between turns
and on padding. A multi-turn trajectory therefore has *gaps* in its mask.

All functions are pure, run under ``torch.no_grad`` semantics (inputs are detached), compute in
float32 and return 0 (never NaN, never garbage) at masked-out positions.

Deviations from the papers, shared by everything here:

1. Episodes that end by truncation are not bootstrapped: the value after the last sampled token
   is 0, as in RAGEN / verl.
2. Rewards must sit on masked-in tokens (the turn ends); a non-zero reward on a masked-out
   position raises instead of being silently dropped.
"""

from __future__ import annotations

import torch

from .masked import check_same_shape, group_index, group_moments, masked_whiten

__all__ = ["bi_level_gae", "gae", "grpo", "reinforce_loo", "turn_grpo"]


def _check_rewards_on_mask(rewards: torch.Tensor, where: torch.Tensor, what: str) -> None:
    stray = (rewards != 0) & ~where.bool()
    if stray.any():
        b, t = (int(i) for i in stray.nonzero()[0])
        raise ValueError(f"non-zero reward at [{b}, {t}], which is not a {what} position")


def _gae_scan(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    reset: torch.Tensor | None = None,
) -> torch.Tensor:
    """Backward GAE recursion over masked-in positions only (masked-out ones are skipped).

    ``delta_t = r_t + gamma * V(next) - V(t)``, ``A_t = delta_t + gamma * lam * A(next)`` where
    ``next`` is the next masked-in position of the row (verl / RAGEN multi-turn GAE). Where
    ``reset[b,t]`` is True, ``V(next)`` and ``A(next)`` are taken as 0 (an episode boundary).
    """
    B, T = rewards.shape
    m = mask.bool()
    next_value = torch.zeros(B)
    next_adv = torch.zeros(B)
    cols = [torch.zeros(B)] * T
    for t in reversed(range(T)):
        if reset is not None:
            next_value = torch.where(reset[:, t], 0.0, next_value)
            next_adv = torch.where(reset[:, t], 0.0, next_adv)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        next_adv = torch.where(m[:, t], adv_t, next_adv)
        next_value = torch.where(m[:, t], values[:, t], next_value)
        cols[t] = torch.where(m[:, t], adv_t, 0.0)
    return torch.stack(cols, dim=1)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    whiten: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level Generalized Advantage Estimation -> ``(adv[B,T], returns[B,T])``.

    GAE: Schulman et al. 2016, eqn. 16, ``A_t = sum_l (gamma*lam)^l delta_{t+l}`` with
    ``delta_t = r_t + gamma V(s_{t+1}) - V(s_t)``; the PPO critic setting of StarPO (RAGEN
    section 3). ``returns = adv + values`` (before whitening) is the critic's target.

    Shapes: ``rewards``, ``values``, ``mask``: ``[B,T]``.

    Deviations: the recursion runs over masked-in tokens only: an observation gap between two
    turns is skipped, so ``s_{t+1}`` of a turn's last token is the next turn's first token
    (verl / RAGEN multi-turn). ``whiten`` normalises ``adv`` to mean 0, std 1 over the whole
    batch mask (verl ``masked_whiten``, unbiased variance); the paper does not mention it.
    """
    check_same_shape(rewards=rewards, values=values, mask=mask)
    rewards, values = rewards.detach().float(), values.detach().float()
    _check_rewards_on_mask(rewards, mask, "masked-in")
    adv = _gae_scan(rewards, values, mask, gamma, lam)
    returns = torch.where(mask.bool(), adv + values, 0.0)
    return (masked_whiten(adv, mask) if whiten else adv), returns


def bi_level_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    turn_ends: torch.Tensor,
    gamma: float,
    lam: float,
    high_level_gamma: float,
    whiten: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bi-level GAE (RAGEN arXiv 2504.20073 sections 3-4, its ``bi_level_gae`` option).

    1. Turn level: GAE (Schulman et al. 2016 eqn. 16) over the turn-end tokens only, with
       discount ``high_level_gamma`` and ``lam``: ``A_k = r_k + hg V(end_{k+1}) - V(end_k) +
       hg lam A_{k+1}``; the turn return is ``G_k = A_k + V(end_k)``.
    2. Token level: inside each turn, GAE with ``gamma``, ``lam``, where the turn-end token's
       reward is ``G_k`` and nothing is bootstrapped past it, so ``adv(end_k) = A_k``.

    Shapes: ``rewards``, ``values``, ``mask``: ``[B,T]``; ``turn_ends[B,T]`` bool, a subset of
    ``mask``. Returns ``(adv, returns)``, ``returns = adv + values`` before whitening.

    Deviations from RAGEN's code: turn ends are given explicitly instead of being found as the
    non-zero rewards (which silently merges turns whose reward is 0); same whitening as ``gae``.
    """
    check_same_shape(rewards=rewards, values=values, mask=mask, turn_ends=turn_ends)
    rewards, values, turn_ends = rewards.detach().float(), values.detach().float(), turn_ends.bool()
    _check_turns(mask, turn_ends)
    _check_rewards_on_mask(rewards, turn_ends, "turn-end")
    high_adv = _gae_scan(rewards, values, turn_ends, high_level_gamma, lam)
    low_rewards = torch.where(turn_ends, high_adv + values, 0.0)
    adv = _gae_scan(low_rewards, values, mask, gamma, lam, reset=turn_ends)
    returns = torch.where(mask.bool(), adv + values, 0.0)
    return (masked_whiten(adv, mask) if whiten else adv), returns


def grpo(
    scores: torch.Tensor, group: torch.Tensor, mask: torch.Tensor, norm_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Group-relative outcome advantage -> ``adv[B,T]``, the same value on every masked token.

    GRPO: Shao et al. 2024 (DeepSeekMath) eqn. 3 with outcome supervision,
    ``A_i = (r_i - mean(r_group)) / std(r_group)``; ``norm_std=False`` keeps only the mean
    baseline (Dr. GRPO style).

    Shapes: ``scores[B]`` (episode rewards), ``group[B]`` integer ids (one per initial state,
    any values), ``mask[B,T]``.

    Deviations: ``std`` is the unbiased (Bessel) group std, as verl / TRL, plus ``eps`` in the
    denominator; a group whose scores are all equal (or a group of one) gets advantage exactly
    0 instead of 0/0. RAGEN's own GRPO path uses groups of one; here groups are real.
    """
    if scores.shape != group.shape or mask.shape[0] != scores.shape[0]:
        raise ValueError(f"scores {tuple(scores.shape)}, group {tuple(group.shape)}, mask {tuple(mask.shape)}")
    _, inverse, num_groups = group_index(group)
    _, mean, std = group_moments(scores, inverse, num_groups, unbiased=True)
    adv = scores.float() - mean[inverse]
    if norm_std:
        adv = adv / (std[inverse] + eps)
    adv = torch.where(std[inverse] == 0, 0.0, adv)
    return torch.where(mask.bool(), adv[:, None], 0.0)


def _check_turns(mask: torch.Tensor, turn_ends: torch.Tensor) -> None:
    """Turn ends are sampled tokens, and every sampled token belongs to a turn that has its end."""
    if (turn_ends & ~mask.bool()).any():
        raise ValueError("every turn end must be a masked-in (sampled) token")
    after_last_end = torch.cumsum(turn_ends.flip(1).int(), 1).flip(1) == 0
    if (mask.bool() & ~turn_ends & after_last_end).any():
        raise ValueError("masked-in tokens after a row's last turn end: each turn needs its end")


def turn_grpo(
    rewards: torch.Tensor,
    turn_ends: torch.Tensor,
    group: torch.Tensor,
    mask: torch.Tensor,
    norm_std: bool = True,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level group-relative advantage -> ``(adv[B,T], returns[B,T])``.

    GRPO (Shao et al. 2024, eqn. 3) applied per turn instead of per episode, in the spirit of
    turn-level credit assignment (Zeng et al. 2025, "Reinforcing Multi-Turn Reasoning in LLM
    Agents via Turn-Level Credit Assignment"): the sampled tokens of turn ``k`` get
    ``A_{i,k} = (G_{i,k} - mean_k) / std_k`` with ``G_{i,k} = sum_{j>=k} r_{i,j}`` the return
    from turn ``k`` on (undiscounted), and ``mean_k``, ``std_k`` over the trajectories of the same
    group that have a ``k``-th turn. Turn 1 (one shared initial state) gets exactly ``grpo`` of
    the episode returns; a later turn is judged by what it and the turns after it earned, not
    by the luck of earlier turns. ``returns`` is ``G`` on every sampled token of its turn.

    Shapes: ``rewards[B,T]`` with turn ``k``'s reward on its end token (``token_rewards(...,
    turn_level=True)``), ``turn_ends[B,T]`` bool, ``group[B]`` integer ids, ``mask[B,T]``.

    Deviations: past turn 1 the trajectories of a group no longer share a state, so the
    baseline pools different states (still independent of the trajectory's own later actions);
    a (group, turn) with one member or equal returns gets advantage exactly 0; std is
    unbiased plus ``eps``, as ``grpo``; ``norm_std=False`` subtracts the mean only.
    """
    check_same_shape(rewards=rewards, turn_ends=turn_ends, mask=mask)
    if group.shape != (mask.shape[0],):
        raise ValueError(f"group {tuple(group.shape)} must be [B] for mask {tuple(mask.shape)}")
    rewards, turn_ends = rewards.detach().float(), turn_ends.bool()
    _check_turns(mask, turn_ends)
    _check_rewards_on_mask(rewards, turn_ends, "turn-end")
    returns = rewards.flip(1).cumsum(1).flip(1)  # from each position to the row's end: G of its turn
    turn = turn_ends.long().cumsum(1) - turn_ends.long()  # 0-based turn index of each position
    _, inverse, num_groups = group_index(group)
    turns = int(turn.max()) + 1 if turn.numel() else 1
    key = inverse[:, None] * turns + turn  # one bucket per (group, turn)
    _, mean, std = group_moments(returns[turn_ends], key[turn_ends], num_groups * turns, unbiased=True)
    adv = returns - mean[key]
    if norm_std:
        adv = adv / (std[key] + eps)
    keep = mask.bool() & (std[key] > 0)
    return torch.where(keep, adv, 0.0), torch.where(mask.bool(), returns, 0.0)


def reinforce_loo(scores: torch.Tensor, group: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """REINFORCE with a leave-one-out baseline -> ``adv[B,T]`` broadcast over masked tokens.

    Kool et al. 2019 ("Buy 4 REINFORCE samples, get a baseline for free") / Ahmadian et al. 2024
    (RLOO): ``A_i = r_i - 1/(N-1) sum_{j != i} r_j = N/(N-1) (r_i - mean(r_group))``.

    Shapes: ``scores[B]``, ``group[B]`` integer ids, ``mask[B,T]``.

    Deviations: a group of one has no baseline and gets advantage 0 (no learning signal), as
    does a group whose scores are all equal (exactly 0, no round-off).
    """
    if scores.shape != group.shape or mask.shape[0] != scores.shape[0]:
        raise ValueError(f"scores {tuple(scores.shape)}, group {tuple(group.shape)}, mask {tuple(mask.shape)}")
    _, inverse, num_groups = group_index(group)
    count, mean, std = group_moments(scores, inverse, num_groups, unbiased=False)
    n = count[inverse]
    adv = n / (n - 1).clamp(min=1.0) * (scores.float() - mean[inverse])
    adv = torch.where((n < 2) | (std[inverse] == 0), 0.0, adv)
    return torch.where(mask.bool(), adv[:, None], 0.0)


