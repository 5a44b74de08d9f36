"""Policy, value, entropy and KL terms of the StarPO update (RAGEN arXiv 2504.20073 sections 3-4).

Shapes: ``B`` trajectories, ``T`` tokens, ``V`` vocabulary. ``mask[B,T]`` is the loss mask.
Losses are scalars with gradients; ``stats`` are detached 0-d tensors on the inputs' device (the
update averages them there and reads them once per update: no host sync per micro-batch, and no
read at all of a tensor on a device that cannot give values back, as a test's ``meta`` device).
Every function is defined for all-masked rows and all-masked batches (0, never NaN).
"""

from __future__ import annotations

from typing import Callable

import torch

from .masked import check_same_shape, masked_mean, masked_sum, masked_var

# ----------------------------------------------------------------------------- aggregation


def _token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over all masked tokens / number of masked tokens (verl ``token-mean``, DAPO)."""
    return masked_mean(x, mask)


def _seq_mean(per_seq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``per_seq[B]`` over rows with at least one masked token."""
    has_tokens = mask.float().sum(-1) > 0
    return masked_mean(per_seq, has_tokens)


def _seq_mean_token_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row token sum, averaged over rows (the PPO/GRPO sequence loss without length norm)."""
    return _seq_mean(masked_sum(x, mask, dim=-1), mask)


def _seq_mean_token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row token mean, averaged over rows (GRPO, Shao et al. 2024 eqn. 3: 1/G sum 1/|o_i|)."""
    return _seq_mean(masked_mean(x, mask, dim=-1), mask)


# Keyed by ``AlgorithmSpec.loss_agg``.
AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-mean": _seq_mean_token_mean,
}


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Reduce token losses ``x[B,T]`` over ``mask[B,T]`` to a scalar, by ``mode``.

    Modes (verl ``agg_loss``): ``token-mean``; ``seq-mean-token-sum``; ``seq-mean-token-mean``.
    Deviation from verl: the ``seq-mean-*`` modes average over rows that have at least one
    masked token, so an all-masked row (e.g. a filtered or empty trajectory) does not dilute
    the mean; an all-masked batch gives 0 with a gradient of 0.
    """
    check_same_shape(x=x, mask=mask)
    try:
        fn = AGGREGATIONS[mode]
    except KeyError:
        raise ValueError(f"unknown loss aggregation {mode!r}; choose from {sorted(AGGREGATIONS)}") from None
    return fn(x, mask)


# ---------------------------------------------------------------------------------- policy


def _token_log_w(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each token its own ratio: ``log w[b,t] = log_ratio[b,t]``."""
    return log_ratio


def _sequence_log_w(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The whole reply's ratio, ``pi_old(y) / pi_sampler(y) = prod_t ratio_t``, on each of its tokens."""
    return masked_sum(log_ratio, mask, dim=-1).unsqueeze(-1).expand_as(log_ratio)


def _geometric_log_w(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The per-token geometric mean of the reply's ratios, ``exp(mean_t log ratio_t)``, on each token."""
    return masked_mean(log_ratio, mask, dim=-1).unsqueeze(-1).expand_as(log_ratio)


# Keyed by ``AlgorithmSpec.rollout_is_level``: log-weights [B,T] from the masked token log-ratios.
IS_LEVELS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token": _token_log_w,
    "sequence": _sequence_log_w,
    "geometric": _geometric_log_w,
}


def _truncate(ratio: torch.Tensor, lower: float, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """TIS: ``w = min(ratio, cap)``; the changed entries are those above the cap."""
    return torch.clamp(ratio, max=cap), ratio > cap


def _band_mask(ratio: torch.Tensor, lower: float, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """IcePop / verl's mask mode: ``w = ratio`` inside ``[lower, cap]``, 0 outside."""
    outside = (ratio < lower) | (ratio > cap)
    return torch.where(outside, torch.zeros_like(ratio), ratio), outside


# Keyed by ``AlgorithmSpec.rollout_is_mode``: (ratio, lower, cap) -> (weights, changed).
IS_MODES: dict[str, Callable[[torch.Tensor, float, float], tuple[torch.Tensor, torch.Tensor]]] = {
    "truncate": _truncate,
    "mask": _band_mask,
}
IS_CHANGED = {"truncate": "is_truncated_frac", "mask": "is_masked_frac"}
IS_SUMS = ("is_w_sum", "is_w2_sum", "is_n")
"""The stats ``rollout_is_weights`` returns as sums, for ``effective_sample_size`` over a whole batch."""


def rollout_is_weights(old_logp: torch.Tensor, sample_logp: torch.Tensor, mask: torch.Tensor, cap: float,
                       level: str = "token", mode: str = "truncate",
                       lower: float | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Importance weights of the sampler mismatch -> ``(weights, stats)``.

    The rollout engine drew the tokens, so the PPO ratio's ``pi_old`` (the trainer's log-probs
    before the update) is not the sampling distribution when the two disagree (bf16 kernels,
    a different attention implementation, a batch rolled out one version earlier). Each token's
    policy loss is multiplied by a detached weight ``w`` built from ``ratio_t = pi_old(y_t) /
    pi_sampler(y_t)`` at one ``level`` (verl's ``rollout_is_level``):

        token:      w_t = ratio_t
        sequence:   w_t = prod_{s in reply} ratio_s          (the reply's likelihood ratio)
        geometric:  w_t = exp(mean_{s in reply} log ratio_s)  (its per-token geometric mean)

    and one ``mode`` (verl's ``rollout_is_mode``):

        truncate:  w = min(w, cap)                           Truncated IS (Yao et al. 2025, "Your
                   efficient RL framework secretly brings you off-policy RL training"; verl's
                   ``tis_imp_ratio_cap``, TRL's ``vllm_importance_sampling_cap``)
        mask:      w = w if lower <= w <= cap, else 0         IcePop (Ling Team, "Every Step Evolves",
                   arXiv 2510.18855, eqn. of J_IcePop: M(k) = k inside [alpha, beta], 0 outside);
                   verl's mask mode (masked IS). ``lower`` defaults to 1 / cap, as verl.

    Shapes: all ``[B,T]``; the weights are ``[B,T]`` (one value per row at the sequence levels).
    Stats over loss-mask tokens: ``is_weight_mean``, and ``is_truncated_frac`` (truncate: share
    of tokens whose ``w`` exceeded the cap) or ``is_masked_frac`` (mask: share whose weight is
    0); at the sequence levels a reply's tokens share its verdict. ``IS_SUMS``: ``sum w``,
    ``sum w^2`` and their count ``n`` of the weights applied, over loss-mask tokens (token) or
    over replies with at least one loss-mask token (sequence, geometric), for
    ``effective_sample_size``.

    Deviations: log-weights are clamped to [-20, 20] before ``exp`` (as ``policy_loss``; verl's
    safety bound). In mask mode a dropped token stays in the loss aggregation's denominator with
    weight 0, as IcePop's objective (1/|y_i| sums over all tokens); verl instead removes it from
    the response mask, so it also leaves the token-mean's denominator and the entropy and KL
    terms. No veto of whole replies (verl's ``rollout_is_veto_threshold``).
    """
    check_same_shape(old_logp=old_logp, sample_logp=sample_logp, mask=mask)
    if not cap > 1.0:
        raise ValueError(f"cap must be > 1, got {cap}")
    lower = 1.0 / cap if lower is None else lower
    if not 0.0 < lower < 1.0:
        raise ValueError(f"lower must be in (0, 1), got {lower}")
    try:
        to_log_w, apply_mode = IS_LEVELS[level], IS_MODES[mode]
    except KeyError:
        raise ValueError(f"unknown rollout IS level {level!r} or mode {mode!r}; choose from {sorted(IS_LEVELS)} and "
                         f"{sorted(IS_MODES)}") from None
    m = mask.float()
    log_w = to_log_w(old_logp.detach() - sample_logp.detach(), m)
    weights, changed = apply_mode(torch.exp(torch.clamp(log_w, -20.0, 20.0)), lower, cap)
    stats = {IS_CHANGED[mode]: masked_mean(changed.float(), m), "is_weight_mean": masked_mean(weights, m)}
    if level == "token":
        w, on = weights, m
    else:  # one weight per reply: its first column
        w, on = weights[:, 0], (m.sum(-1) > 0).float()
    stats.update(is_w_sum=masked_sum(w, on), is_w2_sum=masked_sum(w * w, on), is_n=on.sum())
    return weights, stats


def effective_sample_size(w_sum: float, w2_sum: float, n: float) -> float:
    """Normalised effective sample size of importance weights, ``(sum w)^2 / (n sum w^2)``
    (Kish 1965; verl's ``rollout_is_eff_sample_size``, ``1 / mean((w / mean w)^2)``): 1 when all
    ``n`` weights are equal, ``1/n`` when one carries them all; weights of 0 (masked) count in ``n``.
    0.0 when there is no weight or every weight is 0."""
    return float(w_sum) ** 2 / (float(n) * float(w2_sum)) if float(n) > 0 and float(w2_sum) > 0 else 0.0


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip_c: float | None,
    agg: str,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clipped surrogate with decoupled clip bounds and optional dual clip -> ``(loss, stats)``.

    PPO: Schulman et al. 2017 eqn. 7, ``L = -min(ratio A, clip(ratio, 1-eps, 1+eps) A)``, here with
    ``clip(ratio, 1 - clip_low, 1 + clip_high)`` (DAPO clip-higher, Yu et al. 2025) and, for
    ``A < 0``, the dual clip ``min(L, -c A)`` bounding the loss when ``ratio > c`` (Ye et al. 2020).
    StarPO-S uses clip_low 0.2, clip_high 0.28 (RAGEN section 4).

    Shapes: ``logp``, ``old_logp``, ``adv``, ``mask``: ``[B,T]``; ``loss`` is a scalar.

    Stats (fractions of masked tokens): ``clipfrac_high`` (A > 0 and ratio > 1 + clip_high),
    ``clipfrac_low`` (A < 0 and ratio < 1 - clip_low), ``dual_clipfrac`` (A < 0 and ratio > c);
    ``approx_kl``: k3 estimate of KL(old || new), ``(r - 1) - log r`` with ``r = new/old``
    (joschu.net/blog/kl-approx.html), a token mean.

    ``weights`` (``[B,T]``, optional): per-token factors on the clipped loss, e.g. the rollout
    importance weights of ``rollout_is_weights``.

    Deviation: the log-ratio is clamped to [-20, 20] before ``exp`` (verl) so a stale token cannot
    overflow the ratio.
    """
    check_same_shape(logp=logp, old_logp=old_logp, adv=adv, mask=mask)
    if not 0.0 <= clip_low < 1.0 or clip_high < 0.0:
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    if dual_clip_c is not None and dual_clip_c <= 1.0:
        raise ValueError(f"dual_clip_c must be > 1 (or None), got {dual_clip_c}")
    adv = adv.detach()
    log_ratio = torch.clamp(logp - old_logp.detach(), -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    pg_unclipped = -adv * ratio
    pg_clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(pg_unclipped, pg_clipped)
    dual_active = torch.zeros_like(mask, dtype=torch.bool)
    if dual_clip_c is not None:
        pg = torch.where(adv < 0, torch.minimum(pg, -adv * dual_clip_c), pg)
        dual_active = (adv < 0) & (ratio > dual_clip_c)
    if weights is not None:
        pg = pg * weights.detach()
    loss = aggregate(pg, mask, agg)
    with torch.no_grad():
        r = ratio.detach()
        stats = {
            "clipfrac_high": masked_mean(((adv > 0) & (r > 1.0 + clip_high)).float(), mask),
            "clipfrac_low": masked_mean(((adv < 0) & (r < 1.0 - clip_low)).float(), mask),
            "dual_clipfrac": masked_mean(dual_active.float(), mask),
            "approx_kl": masked_mean((r - 1.0) - log_ratio.detach(), mask),
        }
    return loss, stats


# ----------------------------------------------------------------------------------- critic


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)`` over the mask (unbiased variances).

    1 is a perfect critic, 0 no better than a constant, negative worse. Undefined when the
    returns do not vary (or fewer than two tokens are masked in); reported as 0.0 there so the
    metric stream stays finite.
    """
    check_same_shape(values=values, returns=returns, mask=mask)
    values, returns = values.detach().float(), returns.detach().float()
    var_y = masked_var(returns, mask)
    # "Does not vary" up to float32 rounding: constant returns of -0.1 leave var_y ~1e-17, which
    # would divide a real residual variance into -8e13.
    scale = 1.0 + float(returns[mask.bool()].abs().max()) ** 2 if mask.any() else 1.0
    if var_y.item() <= 1e-8 * scale:
        return 0.0
    return (1.0 - masked_var(returns - values, mask) / var_y).item()


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None,
    agg: str,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped critic loss -> ``(loss, stats)``.

    ``0.5 * max((V - R)^2, (V_clip - R)^2)`` with ``V_clip = V_old + clip(V - V_old, -clip, clip)``
    (PPO2 / OpenAI baselines value clipping, as verl; the PPO paper, Schulman et al. 2017
    eqn. 9, uses the plain squared error ``(V - R)^2``, which ``clip=None`` gives, halved).

    Shapes: ``values``, ``old_values``, ``returns``, ``mask``: ``[B,T]``.

    Stats: ``vf_clipfrac`` (fraction of masked tokens where the clipped error is the larger),
    ``explained_variance`` (of ``values`` for ``returns``, see ``explained_variance``).
    """
    check_same_shape(values=values, old_values=old_values, returns=returns, mask=mask)
    returns, old_values = returns.detach(), old_values.detach()
    sq = (values - returns) ** 2
    clipped_frac = torch.zeros_like(sq, dtype=torch.bool)
    if clip is not None:
        if clip <= 0:
            raise ValueError(f"value clip must be > 0 (or None), got {clip}")
        v_clip = old_values + torch.clamp(values - old_values, -clip, clip)
        sq_clip = (v_clip - returns) ** 2
        clipped_frac = sq_clip > sq
        sq = torch.maximum(sq, sq_clip)
    loss = aggregate(0.5 * sq, mask, agg)
    stats = {
        "vf_clipfrac": masked_mean(clipped_frac.float(), mask),
        "explained_variance": explained_variance(values, returns, mask),
    }
    return loss, stats


# --------------------------------------------------------------------------------------- KL


def _kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = log(pi / pi_ref): unbiased, high variance, can be negative."""
    return logp - ref_logp


def _kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = (r - 1) - log r with r = pi_ref / pi: unbiased, low variance, >= 0."""
    log_r = ref_logp - logp
    return torch.exp(log_r) - log_r - 1.0


def _kl_low_var(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """verl ``low_var_kl``: k3 with the log-ratio clamped to [-20, 20] and the result to [-10, 10]."""
    log_r = torch.clamp(ref_logp - logp, -20.0, 20.0)
    return torch.clamp(torch.exp(log_r) - log_r - 1.0, -10.0, 10.0)


# Keyed by ``AlgorithmSpec.kl_estimator``.
KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "k1": _kl_k1,
    "k3": _kl_k3,
    "low_var_kl": _kl_low_var,
}


def kl(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi -> ``[B,T]``.

    Estimators from J. Schulman, "Approximating KL divergence" (joschu.net/blog/kl-approx.html):
    ``k1``, ``k3``, and ``low_var_kl`` (k3 clamped, as verl). Their *values* estimate
    KL(pi || pi_ref); their *gradients* as a loss on samples of pi differ: k1's expected gradient
    is zero (E_pi[grad log pi] = 0), and k3's is grad KL(pi_ref || pi) =
    -sum_a pi_ref(a) grad log pi(a), which pulls pi toward the reference (for softmax logits:
    pi - pi_ref; tests/test_algos_losses.py). StarPO's KL term (RAGEN section 3, coefficient
    0.001) is therefore a ``low_var_kl`` loss, as verl's ``use_kl_loss``; the spec refuses k1 as
    a loss. Aggregate with ``aggregate(kl(...), mask, mode)``; values at masked-out
    positions are finite but meaningless.

    Shapes: ``logp``, ``ref_logp``: ``[B,T]``. ``ref_logp`` is detached (the reference is frozen).
    """
    check_same_shape(logp=logp, ref_logp=ref_logp)
    try:
        fn = KL_ESTIMATORS[estimator]
    except KeyError:
        raise ValueError(f"unknown KL estimator {estimator!r}; choose from {sorted(KL_ESTIMATORS)}") from None
    return fn(logp, ref_logp.detach())


# ------------------------------------------------------------------------------ warm start


def sft_loss(logp: torch.Tensor, hit: torch.Tensor, mask: torch.Tensor, total: float) -> tuple[torch.Tensor, dict]:
    """Negative log-likelihood of demonstrated tokens, for the warm start before RL
    (supervised fine-tuning on the completion only, as TRL's SFTTrainer with a completion mask).

        loss = -sum(logp * mask) / total

    ``logp[B,T]``: log-probs of the demonstrated tokens; ``hit[B,T]``: 1 where the model's most
    likely token is the demonstrated one; ``mask[B,T]``: 1 on tokens the policy would sample;
    ``total``: masked tokens of the whole optimizer step (all its micro-batches), so the micro
    losses add up to the step's token mean. Stats: the micro-batch's token-mean NLL and token
    accuracy (0 for an all-masked micro-batch)."""
    check_same_shape(logp=logp, hit=hit, mask=mask)
    m = mask.float()
    loss = -(logp * m).sum() / max(float(total), 1.0)
    return loss, {"nll": masked_mean(-logp.detach(), m), "token_accuracy": masked_mean(hit.float(), m)}
