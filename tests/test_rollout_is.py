"""The rollout importance correction's levels and modes (`algos.losses.rollout_is_weights`), its
effective sample size, and the update's use of them on a real DeepSpeed engine (issue 72 item 11).

The pure tests set the ratios pi_old / pi_sampler by hand: `old = log(ratio)`, `sampler = 0`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from ragen_cli.algos.losses import effective_sample_size, policy_loss, rollout_is_weights

# Row 0: ratios 1.8, 0.6, 4; row 1: 1.5, 3 and an off-mask token with ratio 100 that must count nowhere.
RATIOS = torch.tensor([[1.8, 0.6, 4.0], [1.5, 3.0, 100.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def weights(ratios=RATIOS, mask=MASK, **kw):
    return rollout_is_weights(torch.log(ratios), torch.zeros_like(ratios), mask, **kw)


def test_token_truncate_is_today_s_correction():
    # min(r, 2): [1.8, 0.6, 2], [1.5, 2]; 4 and 3 truncated: 2 of 5 tokens; mean 7.9 / 5 = 1.58;
    # sum w = 7.9, sum w^2 = 3.24 + 0.36 + 4 + 2.25 + 4 = 13.85, n = 5 tokens
    w, st = weights(cap=2.0)
    assert_close(w * MASK, torch.tensor([[1.8, 0.6, 2.0], [1.5, 2.0, 0.0]]))
    assert {k: float(v) for k, v in st.items()} == pytest.approx(
        {"is_truncated_frac": 0.4, "is_weight_mean": 1.58, "is_w_sum": 7.9, "is_w2_sum": 13.85, "is_n": 5.0})
    default, _ = weights(cap=2.0, level="token", mode="truncate", lower=None)
    assert_close(w, default)


def test_token_mask_drops_what_leaves_the_band_and_keeps_the_ratio_inside():
    # band [1/2, 2] (lower = 1 / cap): 4 and 3 leave it -> [1.8, 0.6, 0], [1.5, 0]; 2 of 5 masked;
    # mean 3.9 / 5 = 0.78; sum w^2 = 3.24 + 0.36 + 2.25 = 5.85
    w, st = weights(cap=2.0, mode="mask")
    assert_close(w * MASK, torch.tensor([[1.8, 0.6, 0.0], [1.5, 0.0, 0.0]]))
    assert {k: float(v) for k, v in st.items()} == pytest.approx(
        {"is_masked_frac": 0.4, "is_weight_mean": 0.78, "is_w_sum": 3.9, "is_w2_sum": 5.85, "is_n": 5.0})
    # lower 0.7: the 0.6 goes too -> [1.8, 0, 0], [1.5, 0]: 3 of 5 masked, mean 3.3 / 5 = 0.66
    w, st = weights(cap=2.0, mode="mask", lower=0.7)
    assert_close(w * MASK, torch.tensor([[1.8, 0.0, 0.0], [1.5, 0.0, 0.0]]))
    assert (float(st["is_masked_frac"]), float(st["is_weight_mean"])) == pytest.approx((0.6, 0.66))


def test_sequence_and_geometric_levels_weigh_a_reply_by_its_ratios():
    # row 0: 2 x 0.5 x 1.5 = 1.5; row 1: 4 x 1.5 = 6 (its off-mask 100 left out); row 2 all masked
    ratios = torch.tensor([[2.0, 0.5, 1.5], [4.0, 1.5, 100.0], [50.0, 50.0, 50.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    # sequence, truncate at 2: row 0 1.5, row 1 min(6, 2) = 2 on its 2 tokens: 2 of 5 tokens
    # truncated; token mean (3 x 1.5 + 2 x 2) / 5 = 1.7; over the 2 replies: sum 3.5, squares 6.25
    w, st = weights(ratios, mask, cap=2.0, level="sequence")
    assert_close(w[:2] * mask[:2], torch.tensor([[1.5, 1.5, 1.5], [2.0, 2.0, 0.0]]))
    assert {k: float(v) for k, v in st.items()} == pytest.approx(
        {"is_truncated_frac": 0.4, "is_weight_mean": 1.7, "is_w_sum": 3.5, "is_w2_sum": 6.25, "is_n": 2.0})
    assert effective_sample_size(st["is_w_sum"], st["is_w2_sum"], st["is_n"]) == pytest.approx(3.5 ** 2 / (2 * 6.25))
    # sequence, mask in [1/2, 2]: row 1's 6 is out, the whole reply goes: ESS 1.5^2 / (2 x 2.25) = 1/2
    w, st = weights(ratios, mask, cap=2.0, level="sequence", mode="mask")
    assert_close(w[:2] * mask[:2], torch.tensor([[1.5, 1.5, 1.5], [0.0, 0.0, 0.0]]))
    assert (float(st["is_masked_frac"]), float(st["is_weight_mean"])) == pytest.approx((0.4, 0.9))
    assert effective_sample_size(st["is_w_sum"], st["is_w2_sum"], st["is_n"]) == pytest.approx(0.5)
    # geometric: row 0 1.5^(1/3) = 1.1447, row 1 6^(1/2) = 2.4495 (truncated to 2 / masked)
    g0 = 1.5 ** (1 / 3)
    w, st = weights(ratios, mask, cap=2.0, level="geometric")
    assert_close(w[:2] * mask[:2], torch.tensor([[g0] * 3, [2.0, 2.0, 0.0]]))
    assert float(st["is_truncated_frac"]) == pytest.approx(0.4)
    w, st = weights(ratios, mask, cap=2.0, level="geometric", mode="mask")
    assert_close(w[:2] * mask[:2], torch.tensor([[g0] * 3, [0.0, 0.0, 0.0]]))
    # the sequence level's product of many ratios is clamped in log space at e^20, never inf
    w, _ = weights(torch.full((1, 40), 3.0), torch.ones(1, 40), cap=2.0, level="sequence", mode="mask")
    assert torch.isfinite(w).all() and w.sum() == 0  # 3^40 = e^43.9 -> e^20, outside the band


def test_a_masked_token_leaves_the_policy_loss_but_not_its_denominator():
    # IcePop: ratio 1, advantage 1 everywhere; weights [1.8, 0.6, 0], [1.5, 0]: token-mean of
    # -w over the 5 loss-mask tokens = -(1.8 + 0.6 + 1.5) / 5 = -0.78 (verl would divide by 3)
    w, _ = weights(cap=2.0, mode="mask")
    logp = torch.zeros(2, 3)
    loss, _ = policy_loss(logp, logp, torch.ones(2, 3), MASK, 0.2, 0.28, None, "token-mean", weights=w)
    assert loss.item() == pytest.approx(-0.78)


def test_effective_sample_size_by_hand():
    assert effective_sample_size(4.0, 4.0, 4) == 1.0  # four weights of 1
    assert effective_sample_size(4.0, 16.0, 4) == 0.25  # [4, 0, 0, 0]: one carries them all, 1/n
    assert effective_sample_size(7.9, 13.85, 5) == pytest.approx(62.41 / 69.25)  # the token truncate example
    assert effective_sample_size(0.0, 0.0, 3) == 0.0 and effective_sample_size(0.0, 0.0, 0) == 0.0  # all masked


def test_bad_bounds_level_or_mode_are_refused():
    with pytest.raises(ValueError, match="cap must be > 1"):
        weights(cap=1.0)
    with pytest.raises(ValueError, match=r"lower must be in \(0, 1\)"):
        weights(cap=2.0, mode="mask", lower=1.2)
    with pytest.raises(ValueError, match="unknown rollout IS level 'turn'"):
        weights(cap=2.0, level="turn")


def test_the_spec_takes_the_options_and_refuses_a_band_without_1(tmp_path):
    from ragen_cli.spec.loader import SpecError, load_spec

    spec_path = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
    a = load_spec(spec_path).algorithm
    assert (a.rollout_is_level, a.rollout_is_mode, a.rollout_is_cap, a.rollout_is_lower) == ("token", "truncate", 2.0, None)
    a = load_spec(spec_path, ["algorithm.rollout_is_level=geometric", "algorithm.rollout_is_mode=mask",
                              "algorithm.rollout_is_lower=0.5", "algorithm.rollout_is_cap=5"]).algorithm
    assert (a.rollout_is_level, a.rollout_is_mode, a.rollout_is_lower, a.rollout_is_cap) == ("geometric", "mask", 0.5, 5.0)
    with pytest.raises(SpecError, match="algorithm.rollout_is_lower"):
        load_spec(spec_path, ["algorithm.rollout_is_lower=1.5"])
    with pytest.raises(SpecError, match="algorithm.rollout_is_level"):
        load_spec(spec_path, ["algorithm.rollout_is_level=turn"])


# ----------------------------------------------------------------------------- the update, real engine
SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
SETS = ["model.name=tiny-random", "model.lora=null", "deepspeed.precision=fp32", "algorithm.adv_estimator=grpo",
        "algorithm.entropy_coef=0", "algorithm.kl_coef=0", "algorithm.online_k=1", "algorithm.mini_batches=1",
        "algorithm.filter.keep_ratio=1.0", "algorithm.turn_rewards=false", "train.micro_batch=2",
        "train.lr_actor=1e-4", "env.val.every=0"]


@pytest.mark.parametrize("level,mode,changed,expect", [
    # 12 reply tokens, row 1's 3 drawn with ratio e^5 = 148 (sequence: e^15), the rest with ratio 1
    ("token", "truncate", "is_truncated_frac", (0.25, 15 / 12, 15 ** 2 / (12 * 21))),  # w: 9 x 1, 3 x 2
    ("token", "mask", "is_masked_frac", (0.25, 9 / 12, 81 / (12 * 9))),  # 9 x 1, 3 x 0: ESS 0.75
    ("sequence", "mask", "is_masked_frac", (0.25, 9 / 12, 9 / (4 * 3))),  # replies 1, 0, 1, 1: ESS 0.75
    ("geometric", "truncate", "is_truncated_frac", (0.25, 15 / 12, 5 ** 2 / (4 * 7))),  # replies 1, e^5 -> 2, 1, 1
])
def test_the_update_reports_the_batch_s_weights_over_its_micro_batches(tiny_model_dir, level, mode, changed, expect):
    """Four one-turn replies of 3 tokens, micro-batches of 2 and two passes (ppo_epochs 2): the
    stats and the effective sample size are those of the whole batch, not of one micro-batch
    (row 1's micro-batch alone would give ESS 1/2 at the sequence level)."""
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.batch import collate, score
    from ragen_cli.train.engine import build_engines, init_distributed
    from ragen_cli.train.step_metrics import update_metrics
    from ragen_cli.train.update import actor_update
    from test_train_direction import episode

    init_distributed({})
    spec = load_spec(SPEC, SETS + ["algorithm.ppo_epochs=2", f"algorithm.rollout_is_level={level}",
                                   f"algorithm.rollout_is_mode={mode}"])
    engine = build_engines(spec, compile_plan(spec, device="cpu"), tiny_model_dir, 1).actor
    p = [1, 504, 3058, 314, 260]
    batch = collate([episode(p, [100 * i, 100 * i + 1, 100 * i + 2], float(i % 2), 0) for i in (1, 2, 3, 4)])
    old = score(engine, batch, micro=4)
    batch.sample_logp = old.clone() * batch.mask
    batch.sample_logp[1] -= 5.0 * batch.mask[1]  # the engine gave row 1's tokens e^-5 of the trainer's probability
    adv = torch.ones_like(old) * batch.mask
    stats = actor_update(engine, batch, old, adv, None, spec, mini_rows=len(batch), is_cap=2.0)
    frac, mean, ess = expect
    assert (stats[changed], stats["is_weight_mean"], stats["is_ess"]) == pytest.approx((frac, mean, ess), rel=1e-5)
    metrics = update_metrics(stats, None)
    assert metrics[f"actor/{changed}"] == stats[changed] and metrics["actor/is_ess"] == stats["is_ess"]
    assert not {"is_w_sum", "is_w2_sum", "is_n"} & set(stats)  # the sums became is_ess
    assert math.isfinite(stats["policy_loss"])


def test_validate_names_the_correction_s_settings_where_they_do_nothing():
    from ragen_cli.compile.inert import inert_settings
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec

    def inert(sets, precision):
        spec = load_spec(SPEC, ["algorithm.mini_batches=2", *sets])
        plan = compile_plan(spec, device="cpu", cpu_count=2, precision=(precision, "test"))
        return {i.field for i in inert_settings(spec, plan) if "rollout_is" in i.field}

    every = ["algorithm.rollout_is_level=sequence", "algorithm.rollout_is_mode=mask", "algorithm.rollout_is_lower=0.5"]
    # fp32 on-policy with rollout_is auto: no correction, so none of them acts
    assert inert(every, "fp32") == {"algorithm.rollout_is_level", "algorithm.rollout_is_mode",
                                    "algorithm.rollout_is_lower"}
    assert inert(every, "bf16") == set()  # bf16: the correction is on, in mask mode the lower bound acts
    # truncate mode never reads the lower bound
    assert inert(["algorithm.rollout_is_lower=0.5"], "bf16") == {"algorithm.rollout_is_lower"}
