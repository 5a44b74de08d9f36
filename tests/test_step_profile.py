"""bench/step_profile.py: the arithmetic behind its table and its JSON line, on hand-made numbers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))  # it imports base_model as the benches do
    try:
        spec = importlib.util.spec_from_file_location("step_profile", ROOT / "bench" / "step_profile.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return mod


def test_peak_fraction_from_matmul_flops():
    sp = _bench()
    # a 2x3 @ 3x4 matmul: 8 outputs, each 3 multiply-adds = 48 FLOPs
    assert sp.matmul_flops(2, 3, 4) == 48.0
    # 1e9 FLOPs in 0.5 s = 2e9 FLOP/s, against a 8e9 FLOP/s peak: a quarter
    assert sp.peak_fraction(1e9, 0.5, 8e9) == pytest.approx(0.25)
    assert sp.peak_fraction(1e9, 0.0, 8e9) == 0.0  # a phase that did not run


def test_body_params_of_smollm2_135m():
    sp = _bench()
    cfg = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
           "num_attention_heads": 9, "num_key_value_heads": 3}
    # head_dim 64, kv 192: per layer 2*576*576 + 2*576*192 + 3*576*1536 = 663552 + 221184 + 2654208
    # = 3538944; 30 layers = 106168320 (the model's 134.5M less its 28.3M tied embedding)
    assert sp.body_params(cfg) == 106_168_320


def test_rollout_and_update_flops():
    sp = _bench()
    # N = 10, 100 tokens, 5 generated, V = 7, d = 3: 2*10*100 + 2*7*3*5 = 2000 + 210
    assert sp.rollout_flops(10, 100, 5, 7, 3) == 2210.0
    assert sp.update_flops(10, 100, lora=False, grad_ckpt=False) == 6000.0  # the usual 6 N
    assert sp.update_flops(10, 100, lora=True, grad_ckpt=False) == 4000.0  # no weight gradients
    assert sp.update_flops(10, 100, lora=True, grad_ckpt=True) == 6000.0  # + a recomputed forward


def test_step_phases_and_shares():
    sp = _bench()
    rec = {"timing/rollout_s": 4.0, "timing/collapse_s": 2.0, "timing/update_s": 1.0, "timing/sync_s": 0.5,
           "timing/parity_s": 0.5, "timing/step_s": 9.0, "timing/val_s": 3.0}
    ph = sp.step_phases(rec, checkpoint_s=2.0)
    # old_scores absent -> 0; inside the step 4+2+1+0.5+0.5 = 8 of 9 s -> other 1; total 9+3+2 = 14
    assert ph["old_scores"] == 0.0 and ph["other"] == 1.0 and ph["total"] == 14.0
    sh = sp.shares(ph)
    assert sh["rollout"] == pytest.approx(4 / 14) and sh["checkpoint"] == pytest.approx(2 / 14)
    assert sum(sh.values()) == pytest.approx(1.0)
    assert sp.shares({"rollout": 0.0, "total": 0.0}) == {"rollout": 0.0}


def test_median_of_steady_steps_and_warmup():
    sp = _bench()
    steps = [12.0, 95.0, 24.0, 9.0, 7.0, 10.0, 8.0]
    assert sp.warmup_s(steps) == 95.0  # slowest of steps 1-3
    assert sp.steady_median(steps) == 8.5  # median of 9, 7, 10, 8
    assert sp.steady_median([5.0, 6.0]) == 5.5  # too few steps: all of them
    assert sp.warmup_s([]) == 0.0 and sp.steady_median([]) == 0.0


def test_collapse_share_at_its_cadence():
    sp = _bench()
    # 2 s when it runs, every 2 steps, median step 10 s: 2 / 2 / 10 = 0.1
    assert sp.collapse_share([2.0, 1.0, 3.0], [10.0, 9.0, 11.0], every=2) == pytest.approx(0.1)
    assert sp.collapse_share([], [10.0], every=2) == 0.0
    assert sp.collapse_share([2.0], [10.0], every=0) == 0.0  # off


def test_checkpoint_seconds_and_first_validation_reaching():
    sp = _bench()
    metrics = [{"step": 0, "time": 100.0, "val/a/success": 0.95},
               {"step": 5, "time": 150.0, "val/a/success": 0.8, "val/b/success": 1.0},
               {"step": 10, "time": 200.0, "val/a/success": 1.0, "val/b/success": 0.7}]
    events = [{"kind": "val", "step": 5, "time": 149.0}, {"kind": "checkpoint", "step": 10, "time": 203.5}]
    assert sp.checkpoint_seconds(metrics, events) == {10: 3.5}
    # the first env (a) counts; step 0 does not: a reaches 0.9 at step 10, never 1.01
    assert sp.first_reaching(metrics, 0.9) == (10, 200.0, "val/a/success")
    assert sp.first_reaching(metrics, 0.8) == (5, 150.0, "val/a/success")
    assert sp.first_reaching(metrics, 1.01) is None
    assert sp.first_reaching([{"step": 1, "time": 1.0}], 0.5) is None  # no validation at all


def test_forward_tokens_count_a_shared_prompt_once():
    from ragen_cli.rollout.types import Trajectory
    from ragen_cli.train.batch import MIN_SHARED_PREFIX, collate, forward_tokens

    p = list(range(1, MIN_SHARED_PREFIX + 5))  # a 20-token prompt (MIN_SHARED_PREFIX 16 + 4)

    def row(reply, group):
        ids = p + reply
        return Trajectory(input_ids=ids, loss_mask=[0] * len(p) + [1] * len(reply), old_logprobs=[0.0] * len(ids),
                          turn_end=[len(ids) - 1], turn_rewards=[1.0], group=group)

    b = collate([row([7, 8], 0), row([9], 0), row([7, 8, 9], 1)])
    # rows 22, 21 and 23 tokens = 66 without sharing; group 0 shares its prompt up to the first
    # sampled logit (column 19: 19 tokens), so 19 tokens run once instead of twice: 66 - 19 = 47;
    # group 1 has one row (nothing to share)
    assert forward_tokens(b, micro=4, share_prefix=False) == 66
    assert forward_tokens(b, micro=4) == 47
    # micro 1: every row alone, nothing shared
    assert forward_tokens(b, micro=1) == 66


def test_engine_tokens_count_every_distinct_prefix_once():
    from ragen_cli.train.step_metrics import engine_tokens

    # [1,2,3] and [1,2,4,5] share [1,2]: 3 + 4 - 2 = 5; [6,7] shares nothing: + 2 = 7
    assert engine_tokens([[1, 2, 3], [1, 2, 4, 5], [6, 7]]) == 7
    # identical samples: the whole sequence once; one sequence inside another: the longer one
    assert engine_tokens([[1, 2], [1, 2]]) == 2
    assert engine_tokens([[1, 2, 3], [1, 2]]) == 3
    # three prompts sharing [1] then splitting: [1,2,3], [1,2,4], [1,5]: 3 + 1 + 1 = 5 trie nodes
    assert engine_tokens([[1, 5], [1, 2, 4], [1, 2, 3]]) == 5
