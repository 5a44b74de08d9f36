"""Echo Trap detector on synthetic histories: a clean run gives no alarm, each injected failure
gives the right alarm at the right step. Defaults: window 20, smooth 3 (moving mean of the last
3 values), warmup 5, collapse_votes 2."""

import math
import random

import pytest

from ragen_cli.monitor.health import HealthTracker, Verdict, assess, assess_all, robust_z, smoothed
from ragen_cli.spec.health_spec import HealthSpec

CFG = HealthSpec()
STEPS = 60


def clean_run(seed: int = 0) -> list[dict]:
    """A healthy run: reward rising and still rising, stable in-group std, entropy decaying
    slowly, grad norm around 1, stable diversity; deterministic Gaussian noise."""
    rng = random.Random(seed)
    hist = []
    for t in range(STEPS):
        hist.append({
            "step": t,
            "reward/mean": 0.1 + 0.6 * (1 - math.exp(-t / 25)) + rng.gauss(0, 0.03),
            "filter/in_group_std_before": max(0.05, 0.35 + rng.gauss(0, 0.04)),
            "actor/entropy": 1.2 * math.exp(-t / 100) + rng.gauss(0, 0.02),
            "actor/grad_norm": abs(1.0 + rng.gauss(0, 0.1)),
            "diversity/distinct_2": 0.6 + rng.gauss(0, 0.03),
            "diversity/identical_share": max(0.0, 0.05 + rng.gauss(0, 0.02)),
        })
    return hist


def inject(hist: list[dict], name: str, fn) -> list[dict]:
    return [{**rec, name: fn(rec["step"])} for rec in hist]


def levels(hist):
    return [v.level for v in assess_all(hist, CFG)]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_clean_run_gives_no_alarm(seed):
    assert set(levels(clean_run(seed))) == {"healthy"}


def test_in_group_std_cliff():
    # std 0.4 until step 29, 0.05 from step 30. Smoothed: s30 = (0.4+0.4+0.05)/3 = 0.283 -> 71%
    # of the peak 0.4: fine; s31 = (0.4+0.05+0.05)/3 = 0.167 -> 42% <= 50%: warning at 31;
    # s32 = 0.05 -> 12.5% <= 20%: collapse at 32.
    hist = inject(clean_run(), "filter/in_group_std_before", lambda t: 0.4 if t < 30 else 0.05)
    lv = levels(hist)
    assert lv[:31] == ["healthy"] * 31
    assert lv[31] == "warning" and lv[32] == "collapse"
    v = assess(hist[:32], CFG)
    assert [r.signal for r in v.reasons] == ["in_group_std"]
    assert v.reasons[0].value == pytest.approx(0.5 / 3 / 0.4) and v.reasons[0].threshold == 0.5
    assert v.step == 31


def test_entropy_collapse():
    # entropy 1.0 until 39, 0.3 from 40. s40 = 0.767 (77%), s41 = (1+0.3+0.3)/3 = 0.533 (53% >
    # 50%), s42 = 0.3 -> 30%: warning at 42 (not collapse: 30% > 20%).
    hist = inject(clean_run(), "actor/entropy", lambda t: 1.0 if t < 40 else 0.3)
    lv = levels(hist)
    assert lv[:42] == ["healthy"] * 42 and lv[42] == "warning"
    assert assess(hist[:43], CFG).reasons[0].signal == "entropy"


def test_grad_norm_spike_collapse_and_warning():
    # Base alternates 1.0 / 1.2: median of the 20 previous = 1.1, MAD = 0.1, robust sd 0.14826.
    # Spike 4.0 at step 50: z = 2.9 / 0.14826 = 19.6 >= 10 and 4.0 >= 3 x 1.1: collapse at 50.
    base = lambda t: 1.0 if t % 2 == 0 else 1.2  # noqa: E731
    hist = inject(clean_run(), "actor/grad_norm", lambda t: 4.0 if t == 50 else base(t))
    lv = levels(hist)
    assert lv[:50] == ["healthy"] * 50 and lv[50] == "collapse" and lv[51] == "healthy"
    assert assess(hist[:51], CFG).reasons[0].value == pytest.approx(2.9 / (1.4826 * 0.1))
    # Spike 2.0: z = 0.9 / 0.14826 = 6.07 >= 5, but 2.0 < 3 x 1.1 = 3.3: no alarm.
    hist = inject(clean_run(), "actor/grad_norm", lambda t: 2.0 if t == 50 else base(t))
    assert set(levels(hist)) == {"healthy"}
    # Base 1.0 / 2.0: median 1.5, MAD 0.5, sd 0.7413; spike 5.5: z = 4 / 0.7413 = 5.40 in
    # [5, 10) and 5.5 >= 4.5: warning at 50.
    hist = inject(clean_run(), "actor/grad_norm", lambda t: 5.5 if t == 50 else (1.0 if t % 2 == 0 else 2.0))
    lv = levels(hist)
    assert lv[:50] == ["healthy"] * 50 and lv[50] == "warning"


def test_diversity_collapse():
    # distinct-2 0.6 until 44, 0.1 from 45: s45 = 0.433 (72%), s46 = 0.267 (44%): warning at
    # 46; s47 = 0.1 (17% <= 25%): collapse at 47.
    hist = inject(clean_run(), "diversity/distinct_2", lambda t: 0.6 if t < 45 else 0.1)
    lv = levels(hist)
    assert lv[:46] == ["healthy"] * 46 and lv[46] == "warning" and lv[47] == "collapse"


def test_identical_replies():
    # identical share 0.05 until 44, 0.95 from 45: s45 = 0.35 < 0.5; s46 = (0.05+0.95+0.95)/3
    # = 0.65 >= 0.5: warning at 46; s47 = 0.95 >= 0.9: collapse at 47.
    hist = inject(clean_run(), "diversity/identical_share", lambda t: 0.05 if t < 45 else 0.95)
    lv = levels(hist)
    assert lv[:46] == ["healthy"] * 46 and lv[46] == "warning" and lv[47] == "collapse"


def test_reward_plateau_after_gain():
    # reward 0.02 t until 30, then 0.6. Start = mean(0, 0.02, 0.04) = 0.02, gain = recent max
    # 0.6 - 0.02 = 0.58, tolerance 5% = 0.029. s29 =
    # 0.56, s30 = 0.58, s31 = 0.593, s>=32 = 0.6. The 20-step window s[t-19..t] first excludes
    # s29 (range 0.04 > 0.029) at t - 19 = 30: plateau warning at step 49.
    hist = inject(clean_run(), "reward/mean", lambda t: 0.02 * min(t, 30))
    lv = levels(hist)
    assert lv[:49] == ["healthy"] * 49 and lv[49] == "warning"
    assert assess(hist[:50], CFG).reasons[0].signal == "reward_plateau"
    # A flat reward that never rose is not a plateau "after gains".
    assert set(levels(inject(clean_run(), "reward/mean", lambda t: 0.3))) == {"healthy"}


def test_two_warnings_at_once_are_a_collapse():
    # entropy 1.0 -> 0.4 and std 0.4 -> 0.15 at step 40. At 42 both are fully at the new value:
    # entropy 40% (warning, > 20%) and std 37.5% (warning, > 20%): 2 votes -> collapse at 42.
    hist = inject(clean_run(), "actor/entropy", lambda t: 1.0 if t < 40 else 0.4)
    hist = inject(hist, "filter/in_group_std_before", lambda t: 0.4 if t < 40 else 0.15)
    lv = levels(hist)
    assert lv[:42] == ["healthy"] * 42 and lv[42] == "collapse"
    assert {r.signal for r in assess(hist[:43], CFG).reasons} == {"entropy", "in_group_std"}


def test_warmup_disabled_and_missing_metrics():
    hist = inject(clean_run(), "actor/entropy", lambda t: 1.0 if t < 2 else 0.01)
    assert assess(hist[:4], CFG).level == "healthy"  # 4 steps < warmup 5
    assert assess(hist, HealthSpec(enabled=False)).level == "healthy"
    # No metrics at all (e.g. a run logging only timings) and NaN values: no alarm, no crash.
    assert assess([{"step": t, "actor/entropy": float("nan")} for t in range(30)], CFG).level == "healthy"


def test_tracker_reports_only_changes():
    tr = HealthTracker()
    warn = Verdict("warning", [], 3)
    assert tr.observe(Verdict("healthy")) is None
    tr.note_checkpoint(2)
    ev = tr.observe(warn)
    assert ev == {"level": "warning", "reasons": [], "previous": "healthy"}
    assert tr.observe(warn) is None
    tr.note_checkpoint(4)  # not healthy: not a rollback target
    assert tr.observe(Verdict("healthy"))["previous"] == "warning"
    tr.note_checkpoint(6)
    assert tr.healthy_checkpoints == [2, 6]
    tr.forget_after(3)
    assert tr.healthy_checkpoints == [2]


def test_zero_mad_spike_is_collapse_and_event_is_strict_json():
    import json
    # grad norm exactly 1.0 for 20 steps: MAD 0, so any rise is z = +inf; 5.0 >= 3 x 1.0
    hist = inject(clean_run(), "actor/grad_norm", lambda t: 5.0 if t == 30 else 1.0)
    v = assess(hist[:31], CFG)
    assert v.level == "collapse" and v.reasons[0].value == math.inf
    event = v.to_event()
    assert event["reasons"][0]["value"] is None
    json.dumps(event, allow_nan=False)  # raises on NaN / inf


def test_helpers():
    assert smoothed([3.0, 6.0, 9.0, 0.0], 2) == [3.0, 4.5, 7.5, 4.5]
    # previous = [1, 2, 3, 4]: median 2.5, deviations 1.5, .5, .5, 1.5 -> MAD 1.0
    z, med = robust_z([1.0, 2.0, 3.0, 4.0, 6.0], 10)
    assert med == 2.5 and z == pytest.approx(3.5 / 1.4826)


def test_spec_rejects_inverted_thresholds():
    with pytest.raises(ValueError, match="std_collapse"):
        HealthSpec(std_collapse=0.6, std_warn=0.5)
    with pytest.raises(ValueError):
        HealthSpec(unknown_field=1)
