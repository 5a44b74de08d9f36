"""algos/losses.py against hand-computed tensors."""

from __future__ import annotations

import math
import typing

import pytest
import torch
from torch.testing import assert_close

from ragen_cli.algos.logits import entropy_from_logits, logprobs_from_logits
from ragen_cli.algos.losses import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    aggregate,
    explained_variance,
    kl,
    policy_loss,
    value_loss,
)
from ragen_cli.spec.models import AlgorithmSpec

T_ = torch.tensor


def _literal(field: str) -> set[str]:
    return set(typing.get_args(AlgorithmSpec.model_fields[field].annotation))


# ------------------------------------------------------------------------------ aggregate
def test_aggregate_modes_by_hand_and_all_masked_row_ignored():
    # Row 0 keeps [1, 2], row 1 keeps [4], row 2 keeps nothing.
    # token-mean: (1 + 2 + 4) / 3 = 7/3. seq-mean-token-sum: (3 + 4) / 2 = 3.5.
    # seq-mean-token-mean: (1.5 + 4) / 2 = 2.75. The empty row counts in none of them.
    x = T_([[1.0, 2, 3], [4, 5, 6], [100, 100, 100]])
    mask = T_([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert_close(aggregate(x, mask, "token-mean"), T_(7 / 3))
    assert_close(aggregate(x, mask, "seq-mean-token-sum"), T_(3.5))
    assert_close(aggregate(x, mask, "seq-mean-token-mean"), T_(2.75))
    assert set(AGGREGATIONS) == _literal("loss_agg")


def test_aggregate_all_masked_batch_is_zero_with_zero_grad():
    x = torch.full((2, 3), float("inf"), requires_grad=True)
    for mode in AGGREGATIONS:
        out = aggregate(x, torch.zeros(2, 3), mode)
        out.backward()
        assert out.item() == 0.0 and x.grad.abs().sum() == 0
        x.grad = None


def test_aggregate_unknown_mode():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), "mean")


# ---------------------------------------------------------------------------- policy loss
def test_policy_loss_both_clip_bounds_by_hand():
    # logp = 0, log ratio = -old_logp: ratio = [[e^.5, e^-.5, 1], [e^-.1, e^.1, 1]]
    #                                        = [[1.6487, 0.6065, 1], [0.9048, 1.1052, 1]].
    # adv = [[1, -1, 2], [-1, 1, 0]], clip 0.2 / 0.28, loss per token max(-A r, -A clip(r)):
    #   (0,0) A>0, r > 1.28: -1.28 (upper clip).   (0,1) A<0, r < 0.8: 0.8 (lower clip).
    #   (0,2) -2.   (1,0) r = 0.9048 inside: 0.9048.   (1,1) inside: -1.1052.   (1,2) 0.
    # token-mean = (-1.28 + 0.8 - 2 + 0.9048374 - 1.1051709) / 6 = -0.44672225.
    # approx_kl: (r - 1) - log r = 0.1487213, 0.1065307, 0, 0.0048374, 0.0051709, 0 -> mean 0.04421005.
    logp = torch.zeros(2, 3, requires_grad=True)
    old = T_([[-0.5, 0.5, 0.0], [0.1, -0.1, 0.0]])
    adv = T_([[1.0, -1, 2], [-1, 1, 0]])
    loss, stats = policy_loss(logp, old, adv, torch.ones(2, 3), 0.2, 0.28, None, "token-mean")
    assert_close(loss, T_(-0.44672225))
    assert stats["clipfrac_high"] == pytest.approx(1 / 6) and stats["clipfrac_low"] == pytest.approx(1 / 6)
    assert stats["dual_clipfrac"] == 0.0
    assert stats["approx_kl"] == pytest.approx(0.04421005, rel=1e-5)
    # d loss / d logp = -A r / 6 where unclipped, 0 where a clip bound is active.
    loss.backward()
    assert_close(logp.grad, T_([[0.0, 0.0, -2 / 6], [math.exp(-0.1) / 6, -math.exp(0.1) / 6, 0.0]]))


def test_policy_loss_ratio_outside_band_on_the_unclipped_side():
    # A = +1, ratio e^-0.5 = 0.6065 < 0.8: min(r A, clip(r) A) = 0.6065 A, not clipped -> -0.6065.
    # A = -1, ratio e^0.5 = 1.6487 > 1.28: max(1.6487, 1.28) = 1.6487, not clipped (no dual clip).
    # Neither counts in a clip fraction and both keep their gradient -A r / 2.
    logp = T_([[-0.5, 0.5]], requires_grad=True)
    adv, mask = T_([[1.0, -1.0]]), torch.ones(1, 2)
    loss, stats = policy_loss(logp, torch.zeros(1, 2), adv, mask, 0.2, 0.28, None, "token-mean")
    assert_close(loss, T_((-math.exp(-0.5) + math.exp(0.5)) / 2))
    assert stats["clipfrac_low"] == 0.0 and stats["clipfrac_high"] == 0.0
    loss.backward()
    assert_close(logp.grad, T_([[-math.exp(-0.5) / 2, math.exp(0.5) / 2]]))


def test_policy_loss_dual_clip():
    # ratio = e^1.5 = 4.4817 on both tokens, c = 3.
    # A = -1: PPO gives max(4.4817, 1.28) = 4.4817; dual clip: min(4.4817, 3) = 3 (gradient 0).
    # A = +1: upper clip, -1.28; the dual clip only applies to negative advantages.
    # token-mean = (3 - 1.28) / 2 = 0.86. Without dual clip: (4.4817 - 1.28) / 2 = 1.60085.
    logp = torch.full((1, 2), 1.5, requires_grad=True)
    adv, mask = T_([[-1.0, 1.0]]), torch.ones(1, 2)
    loss, stats = policy_loss(logp, torch.zeros(1, 2), adv, mask, 0.2, 0.28, 3.0, "token-mean")
    assert_close(loss, T_(0.86))
    assert stats["dual_clipfrac"] == 0.5 and stats["clipfrac_high"] == 0.5 and stats["clipfrac_low"] == 0.0
    loss.backward()
    assert logp.grad.abs().sum() == 0
    loss_nodual, stats = policy_loss(logp, torch.zeros(1, 2), adv, mask, 0.2, 0.28, None, "token-mean")
    assert_close(loss_nodual, T_((math.exp(1.5) - 1.28) / 2))
    assert stats["dual_clipfrac"] == 0.0


def test_policy_loss_masked_tokens_and_all_masked_batch():
    # Row 1 is masked out and holds a huge stale ratio; it must change nothing.
    logp = T_([[0.0, 0.0], [30.0, 30.0]])
    old = torch.zeros(2, 2)
    adv = T_([[1.0, 2.0], [-5.0, -5.0]])
    mask = T_([[1, 1], [0, 0]])
    loss, stats = policy_loss(logp, old, adv, mask, 0.2, 0.28, 3.0, "seq-mean-token-mean")
    assert_close(loss, T_(-1.5))  # ratio 1: -(1 + 2) / 2
    assert stats == {"clipfrac_high": 0.0, "clipfrac_low": 0.0, "dual_clipfrac": 0.0, "approx_kl": 0.0}
    loss0, stats0 = policy_loss(logp, old, adv, torch.zeros(2, 2), 0.2, 0.28, 3.0, "token-mean")
    assert loss0.item() == 0.0 and all(v == 0.0 for v in stats0.values())


@pytest.mark.parametrize("kw", [{"clip_low": 1.0}, {"clip_high": -0.1}, {"dual_clip_c": 1.0}])
def test_policy_loss_bad_clip(kw):
    args = {"clip_low": 0.2, "clip_high": 0.28, "dual_clip_c": 3.0} | kw
    with pytest.raises(ValueError):
        zero = torch.zeros(1, 1)
        policy_loss(zero, zero, zero, torch.ones(1, 1), agg="token-mean", **args)


# ----------------------------------------------------------------------------- value loss
def test_value_loss_clipped_by_hand():
    # token 0: V 1, V_old 0, R 2: (1-2)^2 = 1; V_clip = 0 + clip(1, +-0.5) = 0.5: (0.5-2)^2 = 2.25 -> 2.25 (clipped).
    # token 1: V 0, V_old 0, R 1: 1 and 1 -> 1 (not counted as clipped: equal).
    # loss = 0.5 * (2.25 + 1) / 2 = 0.8125; gradient: token 0 0 (clamp saturated), token 1 0.5*2*(0-1)/2 = -0.5.
    values = T_([[1.0, 0.0]], requires_grad=True)
    loss, stats = value_loss(values, torch.zeros(1, 2), T_([[2.0, 1.0]]), torch.ones(1, 2), 0.5, "token-mean")
    assert_close(loss, T_(0.8125))
    assert stats["vf_clipfrac"] == 0.5
    assert stats["explained_variance"] == pytest.approx(1.0)  # residual [1, 1] has variance 0
    loss.backward()
    assert_close(values.grad, T_([[0.0, -0.5]]))
    unclipped, stats = value_loss(values, torch.zeros(1, 2), T_([[2.0, 1.0]]), torch.ones(1, 2), None, "token-mean")
    assert_close(unclipped, T_(0.5))  # 0.5 * (1 + 1) / 2
    assert stats["vf_clipfrac"] == 0.0


def test_explained_variance_by_hand():
    # R = [1, 2, 3] (unbiased var 1); V = [1, 2, 2]: residual [0, 0, 1], mean 1/3,
    # var = ((1/3)^2 * 2 + (2/3)^2) / 2 = 1/3 -> EV = 1 - 1/3 = 2/3. Masked-out token ignored.
    values, returns = T_([[1.0, 2, 2, 50]]), T_([[1.0, 2, 3, -50]])
    mask = T_([[1, 1, 1, 0]])
    assert explained_variance(values, returns, mask) == pytest.approx(2 / 3, rel=1e-6)
    assert explained_variance(torch.zeros(1, 4), returns, mask) == pytest.approx(0.0, abs=1e-6)
    # Constant returns, or a single masked token: undefined, reported as 0.0 (finite).
    assert explained_variance(values, torch.ones(1, 4), mask) == 0.0
    assert explained_variance(values, returns, T_([[1, 0, 0, 0]])) == 0.0


# ---------------------------------------------------------------------- logits-based terms
def test_entropy_by_hand_and_stable():
    # logits [0, ln 3]: p = [1/4, 3/4], H = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.5623351.
    # Uniform over 4: ln 4. A logit gap of 1e4 (softmax overflows naively): ~0.
    logits = T_([[[0.0, math.log(3), -math.inf, -math.inf], [0.0, 0, 0, 0], [1e4, 0, 0, 0]]])
    assert_close(entropy_from_logits(logits), T_([[0.5623351, math.log(4), 0.0]]))


def test_entropy_and_logprobs_match_torch_over_several_chunks():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 700, 11, generator=g) * 5  # 1400 positions: two chunks of 1024
    labels = torch.randint(0, 11, (2, 700), generator=g)
    ref_h = torch.distributions.Categorical(logits=logits).entropy()
    ref_lp = torch.log_softmax(logits, -1).gather(-1, labels[..., None]).squeeze(-1)
    assert_close(entropy_from_logits(logits), ref_h)
    assert_close(logprobs_from_logits(logits, labels), ref_lp)
    half = logits.to(torch.bfloat16)
    assert entropy_from_logits(half).dtype == torch.float32
    assert logprobs_from_logits(half, labels).dtype == torch.float32


def test_entropy_and_logprobs_gradients_flow():
    logits = torch.zeros(1, 2, 3, requires_grad=True)
    (entropy_from_logits(logits).sum() + logprobs_from_logits(logits, T_([[0, 1]])).sum()).backward()
    # d log softmax(z)_y / dz = onehot(y) - p with p = 1/3; entropy gradient is 0 at the uniform point.
    assert_close(logits.grad, T_([[[2 / 3, -1 / 3, -1 / 3], [-1 / 3, 2 / 3, -1 / 3]]]))


def test_logprobs_by_hand_and_shape_check():
    # logits [0, ln 3], label 1: log(3/4) = -0.2876821.
    assert_close(logprobs_from_logits(T_([[[0.0, math.log(3)]]]), T_([[1]])), T_([[-0.2876821]]))
    with pytest.raises(ValueError, match="labels"):
        logprobs_from_logits(torch.zeros(1, 3, 5), torch.zeros(1, 2, dtype=torch.long))


# ------------------------------------------------------------------------------------- KL
def test_kl_estimators_by_hand():
    # logp = [0, -1], ref = [-1, 0]. k1 = logp - ref = [1, -1].
    # k3 with log r = ref - logp = [-1, 1]: e^-1 + 1 - 1 = 0.3678794, e^1 - 1 - 1 = 0.7182818.
    logp, ref = T_([[0.0, -1.0]]), T_([[-1.0, 0.0]])
    assert_close(kl(logp, ref, "k1"), T_([[1.0, -1.0]]))
    assert_close(kl(logp, ref, "k3"), T_([[0.3678794, 0.7182818]]))
    assert_close(kl(logp, ref, "low_var_kl"), T_([[0.3678794, 0.7182818]]))
    # Far apart: log r = -30: k3 = e^-30 + 30 - 1 = 29; low_var_kl clamps to 10.
    assert_close(kl(T_([[0.0]]), T_([[-30.0]]), "k3"), T_([[29.0]]))
    assert_close(kl(T_([[0.0]]), T_([[-30.0]]), "low_var_kl"), T_([[10.0]]))
    assert set(KL_ESTIMATORS) == _literal("kl_estimator")
    with pytest.raises(ValueError, match="k3"):
        kl(logp, ref, "k2")


def test_kl_estimators_are_unbiased_in_expectation():
    # Under x ~ pi, E[k1] = E[k3] = KL(pi || ref) exactly (E[ref/pi] = 1); checked as a weighted sum.
    pi, ref = T_([0.5, 0.3, 0.2]), T_([0.2, 0.2, 0.6])
    true_kl = (pi * (pi / ref).log()).sum()
    for est in ("k1", "k3"):
        assert_close((pi * kl(pi.log()[None], ref.log()[None], est)[0]).sum(), true_kl)


def test_entropy_gradient_finite_with_banned_tokens():
    logits = T_([[[0.0, 1.0, -math.inf]]], requires_grad=True)
    entropy_from_logits(logits).sum().backward()
    assert torch.isfinite(logits.grad).all()


def test_value_loss_all_masked_is_zero_and_finite():
    values = torch.full((2, 3), 5.0, requires_grad=True)
    zero = torch.zeros(2, 3)
    loss, stats = value_loss(values, zero, zero, zero, 0.5, "seq-mean-token-sum")
    loss.backward()
    assert loss.item() == 0.0 and stats == {"vf_clipfrac": 0.0, "explained_variance": 0.0}
    assert values.grad.abs().sum() == 0


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_aggregate_decomposes_over_micro_batches(mode):
    # Gradient accumulation in train/update.py relies on this: weighting each micro-batch's
    # aggregate by its share of masked tokens (token-mean) or of non-empty rows (seq-mean-*)
    # reproduces the aggregate of the whole mini-batch, empty micro-batches included (weight 0).
    x = T_([[1.0, 2, 3], [4, 5, 6], [7, 8, 9], [1, 1, 1], [3, 0, 2]])
    mask = T_([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 1]])
    parts = [slice(0, 2), slice(2, 3), slice(3, 4), slice(4, 5)]

    def units(m):
        return m.sum() if mode == "token-mean" else (m.sum(-1) > 0).sum()

    acc = sum(units(mask[p]) / units(mask) * aggregate(x[p], mask[p], mode) for p in parts)
    assert_close(acc, aggregate(x, mask, mode))


def test_explained_variance_of_constant_returns_is_zero_despite_rounding():
    # Returns all -0.1 (every episode got the format penalty): Var(returns) is 0 in exact
    # arithmetic, ~1e-17 in float32; the metric must report "undefined" as 0.0, not -8e13.
    from ragen_cli.algos.losses import explained_variance

    returns = torch.full((4, 3), -0.1)
    values = torch.tensor([[0.3, -0.2, 0.1], [0.0, 0.5, -0.4], [0.2, 0.2, 0.2], [-0.3, 0.1, 0.0]])
    assert explained_variance(values, returns, torch.ones(4, 3)) == 0.0


def test_rollout_is_weights_truncate_the_sampler_ratio_at_the_cap():
    from ragen_cli.algos.losses import rollout_is_weights

    # pi_old / pi_sampler = 0.5 / 0.25 = 2 (truncated to 1.5) and 0.2 / 0.2 = 1; the third token is off-mask
    old = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
    sampler = torch.log(torch.tensor([[0.25, 0.2, 0.1]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    w, stats = rollout_is_weights(old, sampler, mask, cap=1.5)
    assert_close(w[:, :2], torch.tensor([[1.5, 1.0]]))
    # sums of the applied weights [1.5, 1.0] for the effective sample size: 2.5, 3.25, n = 2
    assert stats == pytest.approx({"is_truncated_frac": 0.5, "is_weight_mean": 1.25, "is_w_sum": 2.5,
                                   "is_w2_sum": 3.25, "is_n": 2.0})
    # ratio 1 (logp == old), advantage 1 on both tokens: token-mean of -[1.5, 1.0] = -1.25
    adv = torch.ones(1, 3)
    loss, _ = policy_loss(old, old, adv, mask, 0.2, 0.28, None, "token-mean", weights=w)
    assert loss.item() == pytest.approx(-1.25)
    with pytest.raises(ValueError, match="cap must be > 1"):
        rollout_is_weights(old, sampler, mask, cap=1.0)


def _expected_kl_loss_grad(logits: torch.Tensor, ref: torch.Tensor, estimator: str) -> torch.Tensor:
    """The expected gradient of a KL estimator used as a loss on samples a ~ pi: the loss of
    each action weighted by pi(a) held fixed (what averaging many sampled tokens gives)."""
    logits = logits.clone().requires_grad_(True)
    logp = torch.log_softmax(logits, -1)
    weights = logp.exp().detach()
    (weights * kl(logp, ref.log(), estimator)).sum().backward()
    return logits.grad


def test_kl_loss_pulls_the_policy_toward_the_reference_and_k1_does_nothing():
    logits = torch.tensor([1.0, 0.0, -1.0])
    pi = torch.softmax(logits, -1)
    ref = torch.tensor([0.2, 0.3, 0.5])
    # k3 / low_var_kl as a loss: grad = grad KL(ref || pi) = pi - ref for softmax logits (derived
    # in the kl() docstring), i.e. gradient descent moves pi toward ref
    for estimator in ("k3", "low_var_kl"):
        assert_close(_expected_kl_loss_grad(logits, ref, estimator), pi - ref)
    # k1 as a loss: E_pi[grad log pi] = 0, the term is inert
    assert_close(_expected_kl_loss_grad(logits, ref, "k1"), torch.zeros(3), atol=1e-6, rtol=0)
    # a few descent steps with the low_var_kl loss shrink both KL directions
    theta = logits.clone()
    for _ in range(50):
        theta = theta - 0.5 * _expected_kl_loss_grad(theta, ref, "low_var_kl")
    p_before, p_after = pi, torch.softmax(theta, -1)
    def kl_of(p, q):
        return float((p * (p / q).log()).sum())
    assert kl_of(ref, p_after) < 0.1 * kl_of(ref, p_before)
    assert kl_of(p_after, ref) < 0.1 * kl_of(p_before, ref)
