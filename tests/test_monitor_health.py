"""Echo Trap / template-collapse detector on synthetic histories, every expected step derived
by hand. Defaults: window 20, smooth 3 (moving mean of the last 3 values), warmup 5,
collapse_votes 2, progress_window 5, progress_min 0.02, fall_ratio 0.5, dead_frac 0.95,
solved 0.9. (The thresholds are tuned on real runs: bench/health_corpus.py.)"""

import json
import math
import random

import pytest

from ragen_cli.monitor.tracker import HealthTracker
from ragen_cli.monitor.health import (Verdict, assess, failure, progress, robust_z,
                                      smoothed)
from ragen_cli.spec.health_spec import HealthSpec

CFG = HealthSpec()
STEPS = 40


def run(success, seed: int = 0, **over) -> list[dict]:
    """A run whose train/success follows `success(t)`; std 0.4, entropy 1.0, grad norm ~1,
    diversity stable (small deterministic noise); `over` maps a metric to a function of t."""
    rng = random.Random(seed)
    hist = []
    for t in range(1, STEPS + 1):
        rec = {
            "step": t,
            "train/success": success(t),
            "reward/task_in_group_std": 0.4 + rng.gauss(0, 0.01),
            "filter/zero_std_frac": 0.1,
            "actor/entropy": 1.0 + rng.gauss(0, 0.01),
            "actor/grad_norm": abs(1.0 + rng.gauss(0, 0.1)),
            "diversity/distinct_2": 0.6 + rng.gauss(0, 0.01),
            "diversity/identical_share": 0.05,
        }
        rec.update({k: f(t) for k, f in over.items()})
        hist.append(rec)
    return hist


def assess_all(history: list[dict], cfg) -> list[Verdict]:
    """The verdict at every step, as the trainer saw it then."""
    return [assess(history[: i + 1], cfg) for i in range(len(history))]


def levels(hist, cfg=CFG):
    return [v.level for v in assess_all(hist, cfg)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_learning_run_is_healthy(seed):
    assert set(levels(run(lambda t: min(0.8, 0.02 * t), seed))) == {"healthy"}


def test_convergence_is_not_collapse():
    # The bandit's way to 1.0: success climbs 0.03/step, entropy and std fall to 5% of their
    # start from step 10. Narrowing from step 11 on, but success sets a new high every step
    # (progress) until its smoothed value reaches 0.9 = solved (step 31: s = (.87+.9+.93)/3 =
    # 0.9), and stays solved: healthy throughout.
    hist = run(lambda t: min(1.0, 0.03 * t), **{"actor/entropy": lambda t: 1.0 if t < 10 else 0.05,
                                                "reward/task_in_group_std": lambda t: 0.4 if t < 10 else 0.02})
    assert set(levels(hist)) == {"healthy"}
    assert progress(hist[:20], CFG).signal == "success_rising"
    assert progress(hist, CFG).signal == "solved"


def test_echo_trap_gain_then_fall():
    # success 0.03 t up to 0.6 at step 20, then -0.05 a step down to 0.1 (step 30), then flat;
    # entropy 1.0 -> 0.2 and std 0.4 -> 0.1 from step 25.
    # Step 26: smoothed entropy (1 + .2 + .2)/3 = .467 <= 50% and std (.4 + .1 + .1)/3 = .2 =
    # 50% of .4: two narrowing signals. Progress? The smoothed success peaked at step 21
    # ((.6+.57+.55)/3 = .573); no new high in 22..26: none. Failure? s26 = (.4+.35+.3)/3 = .35,
    # start s1 = .03, gain .543: kept (.35-.03)/.543 = 59% > 50%; gained over the start: not no_gain
    # -> warning at 26. Step 27: s27 = .30, kept 50.0%? (.30-.03)/.543 = 49.7% <= 50%:
    # success_fell -> collapse at 27.
    def success(t):
        return 0.03 * t if t <= 20 else max(0.1, 0.6 - 0.05 * (t - 20))

    hist = run(success, **{"actor/entropy": lambda t: 1.0 if t < 25 else 0.2,
                           "reward/task_in_group_std": lambda t: 0.4 if t < 25 else 0.1})
    lv = levels(hist)
    assert lv[:25] == ["healthy"] * 25  # steps 1..25
    assert lv[25] == "warning" and lv[26] == "collapse"  # steps 26, 27
    v = assess(hist[:27], CFG)
    assert v.reasons[0].signal == "success_fell" and {r.signal for r in v.reasons[1:]} == {"entropy", "in_group_std"}


def test_dead_groups_are_a_collapse_without_a_gain():
    # The bandit falling onto the safe arm: success 0 throughout, entropy and std collapse at
    # step 6 and every group's reward is constant (zero_std_frac 1.0) from step 6.
    # Step 7: smoothed entropy (1+.05+.05)/3 = .367 and std .147/.4: two narrowing signals,
    # no progress; zero_std (.1, 1, 1) min .1 < .95: not dead -> warning. Step 8: zero_std
    # (1, 1, 1): no_variance -> collapse.
    hist = run(lambda t: 0.0, **{"actor/entropy": lambda t: 1.0 if t < 6 else 0.05,
                                 "reward/task_in_group_std": lambda t: 0.4 if t < 6 else 0.02,
                                 "filter/zero_std_frac": lambda t: 0.1 if t < 6 else 1.0})
    lv = levels(hist)
    assert lv[:6] == ["healthy"] * 6 and lv[6] == "warning" and lv[7] == "collapse"
    assert assess(hist[:8], CFG).reasons[0].signal == "no_variance"


def test_a_rise_without_reward_spread_is_not_progress():
    # Guess-the-number at lr 5e-4 (docs/health.md): replies settle on copying the example, every
    # group's rollouts identical (zero_std_frac 1.0 from step 5), while train success rises by
    # the luck of the states drawn: .1 up to step 8, then .2, .3, .4, ... (+.1 a step).
    # Entropy 1.0 -> .05 and in-group std .4 -> 0 from step 5. Step 5: smoothed entropy
    # (1 + 1 + .05)/3 = .68 and std .27/.4 = .67: no narrowing, healthy. Step 6: .37 and
    # .13/.4 = .33, both <= 50%: two narrowing votes; zero_std (.1, 1, 1) not all dead; success
    # flat: warning. Step 7: zero_std (1, 1, 1) -> no_variance -> collapse. Step 9: success 0.2 gives s9 = (.1+.1+.2)/3 = .133, a new high by .033
    # > .02: success_rising, which used to make it healthy; with no reward spread in any group it
    # is not learning, so still collapse. The same rise with spread left (zero_std .5) is
    # progress: healthy.
    rise = lambda t: 0.1 if t <= 8 else 0.1 * (t - 7)  # noqa: E731
    narrow = {"actor/entropy": lambda t: 1.0 if t < 5 else 0.05,
              "reward/task_in_group_std": lambda t: 0.4 if t < 5 else 0.0}
    dead = run(rise, **narrow, **{"filter/zero_std_frac": lambda t: 0.1 if t < 5 else 1.0})
    assert progress(dead[:9], CFG).signal == "success_rising"
    lv = levels(dead[:12])
    assert lv[:5] == ["healthy"] * 5 and lv[5] == "warning" and set(lv[6:]) == {"collapse"}
    assert assess(dead[:9], CFG).reasons[0].signal == "no_variance"
    alive = run(rise, **narrow, **{"filter/zero_std_frac": lambda t: 0.5})
    assert levels(alive[:12])[8:] == ["healthy"] * 4  # steps 9-12


def test_template_collapse_and_state_dependence_as_progress():
    # success flat at .2; I(X;Z)/H(X) rises .04/step to .8 at step 20, then is .05 from 21;
    # entropy 1.0 -> 0.3 from step 10 (narrowing from step 12). Smoothed mi s_t = .04 (t - 1)
    # up to s20 = .76. While mi rises, the last 5 steps' high beats the earlier max by .2 > .1
    # (mi_progress_min): progress, healthy. At step 22 the window 18..22 holds s20 = .76 against
    # s17 = .64 (+.12): still progress. At step 23, s20 against s18 = .68: +.08, not more than
    # .1 -> no progress; smoothed mi (.05) <= 50% of the peak: template; success has gained
    # nothing over step 1: no_gain -> collapse at 23 (healthy before).
    hist = run(lambda t: 0.2, **{"collapse/mi_norm": lambda t: 0.04 * t if t <= 20 else 0.05,
                                 "actor/entropy": lambda t: 1.0 if t < 10 else 0.3})
    lv = levels(hist)
    assert set(lv[:22]) == {"healthy"}
    assert lv[22] == "collapse"
    v = assess(hist[:23], CFG)
    assert v.reasons[0].signal == "no_gain" and {r.signal for r in v.reasons[1:]} == {"template", "entropy"}


def test_no_signal_from_the_start_and_empty_stop():
    hist = run(lambda t: 0.0, **{"filter/zero_std_frac": lambda t: 1.0})
    # said after no_signal_steps (3) steps, even inside the warmup
    assert levels(hist[:2]) == ["healthy", "healthy"] and assess(hist[:3], CFG).level == "warning"
    v = assess(hist[:3], CFG)
    assert v.reasons[0].signal == "no_signal" and "group_size" in v.reasons[0].message
    cfg = HealthSpec(empty_stop_steps=5)
    assert levels(hist[:5], cfg) == ["healthy", "healthy", "warning", "warning", "collapse"]
    # format errors: the message names the reply format
    fmt = run(lambda t: 0.0, **{"episode/format_error_ratio": lambda t: 1.0})
    assert "format" in assess(fmt[:3], CFG).reasons[0].message
    # the message says what the rule is: the share of groups with one reward, in each step
    assert assess(hist[:3], CFG).reasons[0].message.startswith(
        "in each of the last 3 steps (since step 1), every group got one reward for all its rollouts (the limit: 95% of the groups)")
    # one step with a signal (step 2: 50% of groups without spread) ends a streak, and the next
    # streak of 3 (steps 3, 4, 5) is said again: it no longer silences the rule for good
    once = run(lambda t: 0.0, **{"filter/zero_std_frac": lambda t: 0.5 if t == 2 else 1.0})
    said = [v.step for v in assess_all(once[:8], CFG) if any(r.signal == "no_signal" for r in v.reasons)]
    assert said == [5, 6, 7, 8]
    assert "since step 3" in assess(once[:5], CFG).reasons[0].message
    # a solved run has no spread either (every group succeeds): convergence, not 'no signal'
    solved = run(lambda t: 1.0, **{"filter/zero_std_frac": lambda t: 1.0})
    assert all(r.signal != "no_signal" for v in assess_all(solved, CFG) for r in v.reasons)


def test_grad_spike_is_narrowing_only_without_progress():
    # grad norm alternates 1.0 / 1.2 (median 1.1, MAD .1) with 4.0 at step 30: z = 2.9/.148 =
    # 19.6 >= 5 and 4.0 >= 3 x 1.1. Success flat 0.2: no progress -> warning at 30 only.
    base = lambda t: 1.0 if t % 2 == 0 else 1.2  # noqa: E731
    hist = run(lambda t: 0.2, **{"actor/grad_norm": lambda t: 4.0 if t == 30 else base(t)})
    lv = levels(hist)
    assert lv[29] == "warning" and set(lv[:29] + lv[30:]) == {"healthy"}
    assert assess(hist[:30], CFG).reasons[0].value == pytest.approx(2.9 / (1.4826 * 0.1))
    # while success rises the same spike is no alarm
    rising = run(lambda t: 0.02 * t, **{"actor/grad_norm": lambda t: 4.0 if t == 30 else base(t)})
    assert set(levels(rising)) == {"healthy"}


def test_failure_helpers():
    flat = run(lambda t: 0.2)
    assert failure(flat[:1], CFG) is None  # one step: nothing to compare with
    assert failure(flat[:2], CFG).signal == "no_gain" and failure(flat[:11], CFG).signal == "no_gain"
    assert progress(flat[:11], CFG) is None
    # a gain of more than progress_min (.02) over the start, at any step, ends it for good:
    # smoothed success .2, .2, .2133 (mean of .2, .2, .24): .0133 gained -> still no gain; .2267: gained
    slow = run(lambda t: 0.2 if t < 3 else 0.24)
    assert failure(slow[:3], CFG).signal == "no_gain" and failure(slow[:4], CFG) is None
    assert failure(slow[:30], CFG) is None  # no clock: 30 flat steps after the gain are not a failure


def test_warmup_disabled_and_missing_metrics():
    hist = run(lambda t: 0.0, **{"actor/entropy": lambda t: 1.0 if t < 2 else 0.01})
    assert assess(hist[:4], CFG).level == "healthy"  # 4 steps < warmup 5
    assert assess(hist, HealthSpec(enabled=False)).level == "healthy"
    assert assess([{"step": t, "actor/entropy": float("nan")} for t in range(30)], CFG).level == "healthy"


def test_the_warmup_hides_warnings_not_a_collapse():
    # Success 0 throughout; from step 2 entropy 0.01 and every reply identical. Step 3: smoothed
    # identical share (.05 + 1 + 1) / 3 = .68 >= .5, smoothed entropy (1 + .01 + .01) / 3 = .34
    # <= .5 of its peak 1.0, and success gained nothing (no_gain, beside identical replies):
    # collapse at step 3, inside the 5-step warm-up. Step 2 has fewer than `smooth` (3) steps.
    collapsing = run(lambda t: 0.0, **{"actor/entropy": lambda t: 1.0 if t < 2 else 0.01,
                                       "diversity/identical_share": lambda t: 0.05 if t < 2 else 1.0})
    assert levels(collapsing[:5]) == ["healthy", "healthy", "collapse", "collapse", "collapse"]
    # The same narrowing with varied replies is a warning (no_gain needs a state-blind signal):
    # hidden in the warm-up (steps 3-4), said from step 5.
    narrowing = run(lambda t: 0.0, **{"actor/entropy": lambda t: 1.0 if t < 2 else 0.01})
    assert levels(narrowing[:6]) == ["healthy"] * 4 + ["warning"] * 2
    # smooth 1: every signal reads one step, but step 1 samples the base model: collapse from step 2
    one = run(lambda t: 0.0, **{"diversity/identical_share": lambda t: 1.0, "filter/zero_std_frac": lambda t: 1.0})
    assert levels(one[:3], HealthSpec(smooth=1, collapse_votes=1, no_signal_steps=0)) == ["healthy", "collapse", "collapse"]


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


def test_zero_mad_spike_event_is_strict_json():
    hist = run(lambda t: 0.2, **{"actor/grad_norm": lambda t: 5.0 if t == 30 else 1.0})
    v = assess(hist[:30], CFG)
    assert v.level == "warning" and v.reasons[0].value == math.inf
    event = v.to_event()
    assert event["reasons"][0]["value"] is None
    json.dumps(event, allow_nan=False)


def test_helpers():
    assert smoothed([3.0, 6.0, 9.0, 0.0], 2) == [3.0, 4.5, 7.5, 4.5]
    z, med = robust_z([1.0, 2.0, 3.0, 4.0, 6.0], 10)
    assert med == 2.5 and z == pytest.approx(3.5 / 1.4826)


def test_spec_rejects_bad_values():
    with pytest.raises(ValueError, match="empty_stop_steps"):
        HealthSpec(empty_stop_steps=2, no_signal_steps=3)
    with pytest.raises(ValueError):
        HealthSpec(unknown_field=1)


def test_no_gain_without_the_template_signal_is_only_a_warning():
    # FrozenLake's shipped run narrowed (entropy 22% of its peak) while success was flat for 35
    # steps, then learned. Flat success 0.2 and entropy 1.0 -> 0.3 from step 11: smoothed
    # entropy s11 = (1 + 1 + .3)/3 = .77, s12 = .53, s13 = .3 <= 50%: narrowing from step 13;
    # no gain over the start all along, but no template signal: warning, never collapse.
    hist = run(lambda t: 0.2, **{"actor/entropy": lambda t: 1.0 if t < 11 else 0.3})
    lv = levels(hist)
    assert "collapse" not in lv and lv[12] == "warning" and set(lv[:12]) == {"healthy"}


def test_no_gain_beside_identical_replies_is_a_collapse():
    # The run above, but from step 11 nine replies in ten repeat another (identical share 0.05 ->
    # 0.9): smoothed s11 = (.05 + .05 + .9)/3 = .33, s12 = (.05 + .9 + .9)/3 = .62 >= .5, so
    # identical_replies from step 12, alone (entropy s12 = .53 > 50%): warning. At step 13 entropy
    # joins it (s13 = .3): two narrowing signals beside no_gain, and identical replies are a
    # state-blind signal like the template one: collapse.
    hist = run(lambda t: 0.2, **{"actor/entropy": lambda t: 1.0 if t < 11 else 0.3,
                                 "diversity/identical_share": lambda t: 0.05 if t < 11 else 0.9})
    lv = levels(hist)
    assert set(lv[:11]) == {"healthy"} and lv[11] == "warning" and lv[12] == "collapse"
    assert [r.signal for r in assess(hist[:12], CFG).reasons] == ["identical_replies"]
    assert [r.signal for r in assess(hist[:13], CFG).reasons] == ["no_gain", "entropy", "identical_replies"]


def test_no_gain_beside_the_template_and_the_joint_sign_only_is_a_warning():
    # Bandit seed 111 (docs/health.md, eighteenth session): on the safe arm with no gain, I(X;Z)
    # fell and entropy and bigrams fell together, but neither to its own limit; it then learned.
    # Flat success 0.05; I(X;Z)/H(X) 0.2 -> 0.02 from step 11: s11 = (.2 + .2 + .02)/3 = .14,
    # s12 = .08 <= .5 x .2: template from step 12. Entropy 1 -> .6 and distinct bigrams .6 -> .36
    # from 11: s12 = .733 of the peak <= .8: joint_narrowing from 12, each alone > .5. No gain, two
    # signals, but none at its own limit: a warning (a collapse until 2026-11-27). From step 16
    # entropy .2: s16 = (.6 + .6 + .2)/3 = .467 <= .5: the entropy signal, and a collapse.
    hist = run(lambda t: 0.05, **{"collapse/mi_norm": lambda t: 0.2 if t < 11 else 0.02,
                                  "actor/entropy": lambda t: 1.0 if t < 11 else (0.6 if t < 16 else 0.2),
                                  "diversity/distinct_2": lambda t: 0.6 if t < 11 else 0.36})
    lv = levels(hist)
    assert set(lv[:11]) == {"healthy"} and lv[11:15] == ["warning"] * 4 and lv[15] == "collapse"
    assert [r.signal for r in assess(hist[:12], CFG).reasons] == ["template", "joint_narrowing"]
    assert [r.signal for r in assess(hist[:16], CFG).reasons] == ["no_gain", "entropy", "template", "joint_narrowing"]


def test_a_template_fall_alone_warns_only_from_a_peak_clear_of_noise():
    # Bandit learners 23, 111 and 118 (docs/health.md, twenty-first session): I(X;Z)/H(X) peaked at
    # .11-.12 and fell, nothing else narrowed, and they learned. Flat success .05; mi .12 -> .02
    # from step 8: s8 = (.12 + .12 + .02)/3 = .087 > .5 x .12, s9 = (.12 + .02 + .02)/3 = .053 <=
    # .06: the template signal from step 9, alone, from a peak of .12 < .2 (mi_alone_peak):
    # healthy throughout. From a peak of .4 (mi .4 -> .04): s8 = .28 > .2, s9 = .16 <= .2: a
    # warning from step 9. With mi_alone_peak .1 the low peak warns from step 9 as well.
    low = run(lambda t: 0.05, **{"collapse/mi_norm": lambda t: 0.12 if t < 8 else 0.02})
    assert set(levels(low)) == {"healthy"}
    high = run(lambda t: 0.05, **{"collapse/mi_norm": lambda t: 0.4 if t < 8 else 0.04})
    lv = levels(high)
    assert set(lv[:8]) == {"healthy"} and lv[8] == "warning"
    assert [r.signal for r in assess(high[:9], CFG).reasons] == ["template"]
    assert levels(low, HealthSpec(mi_alone_peak=0.1))[7:9] == ["healthy", "warning"]
    # Beside another narrowing signal the low-peak fall still counts: entropy 1 -> .3 from step 8
    # (s9 = .53, s10 = .3 <= .5) joins it at step 10; no gain, a state-blind signal and one at its
    # own limit: a collapse at 10, healthy at 9.
    both = run(lambda t: 0.05, **{"collapse/mi_norm": lambda t: 0.12 if t < 8 else 0.02,
                                  "actor/entropy": lambda t: 1.0 if t < 8 else 0.3})
    assert levels(both)[8:10] == ["healthy", "collapse"]
    assert [r.signal for r in assess(both[:10], CFG).reasons] == ["no_gain", "entropy", "template"]


def test_entropy_and_bigrams_falling_together_warn_before_either_alone():
    # Flat success 0.05 (no progress, no failure). From step 11 entropy and distinct bigrams fall
    # by 12% of their start a step (x_t = start x (1 - 0.12 (t - 10))). Smoothed over 3 steps, both
    # are at s_t = 1 - 0.12 (t - 11) of their peak from step 12: 0.88 at t = 12, 0.76 at t = 13,
    # so the joint signal (limit 0.8 for both) fires at step 13; each alone needs 0.5: 0.52 at
    # t = 15, 0.40 at t = 16. With joint_warn 1 (off) the first warning is step 16.
    down = lambda start, t: start * (1 - 0.12 * max(0, t - 10))  # noqa: E731
    hist = run(lambda t: 0.05, **{"actor/entropy": lambda t: down(1.0, t), "diversity/distinct_2": lambda t: down(0.6, t)})
    lv = levels(hist)
    assert lv.index("warning") + 1 == 13
    assert [r.signal for r in assess(hist[:13], CFG).reasons] == ["joint_narrowing"]
    assert levels(hist, HealthSpec(joint_warn=1.0)).index("warning") + 1 == 16


def test_sampling_margin_by_hand():
    from ragen_cli.monitor.outcome import sampling_margin

    # p = 0.1 over smooth 1 x 100 episodes: se = sqrt(0.1 * 0.9 / 100) = 0.03; fall_z 2 -> 0.06
    hist = [{"step": 1, "train/success": 0.1, "train/episodes": 100.0}]
    assert sampling_margin(hist, "train/success", 0.1, HealthSpec(smooth=1)) == pytest.approx(0.06)
    # smooth 3 x 100 -> sqrt(0.09 / 300) = 0.01732; x2 = 0.03464
    assert sampling_margin(hist, "train/success", 0.1, CFG) == pytest.approx(2 * math.sqrt(0.09 / 300))
    # no count (runs before the metric), another score, or the guard off: no margin
    assert sampling_margin([{"train/success": 0.1}], "train/success", 0.1, CFG) == 0.0
    assert sampling_margin(hist, "reward/task_mean", 0.1, CFG) == 0.0
    assert sampling_margin(hist, "train/success", 0.1, HealthSpec(fall_z=0)) == 0.0


def test_solved_within_sampling_noise():
    # solved 1.0 (the +20% setting of bench/health_corpus.py), 128 episodes a step, smooth 3:
    # n = 384. Success 0.99: margin 2 sqrt(.99 x .01 / 384) = .0102, and .99 >= 1 - .0102: solved,
    # so entropy falling to 30% from step 11 (narrowing from 13) is convergence: healthy. Success
    # 0.98: margin 2 sqrt(.98 x .02 / 384) = .0143, .98 < .9857: not solved, flat, so a warning.
    cfg = HealthSpec(solved=1.0)
    narrowing = {"actor/entropy": lambda t: 1.0 if t < 11 else 0.3, "train/episodes": lambda t: 128.0}
    assert set(levels(run(lambda t: 0.99, **narrowing), cfg)) == {"healthy"}
    lv = levels(run(lambda t: 0.98, **narrowing), cfg)
    assert set(lv[:12]) == {"healthy"} and lv[12] == "warning" and "collapse" not in lv
    # without the episode count the margin is 0: 0.99 < 1 is not solved
    assert levels(run(lambda t: 0.99, **{"actor/entropy": narrowing["actor/entropy"]}), cfg)[12] == "warning"


def test_a_gain_and_fall_within_sampling_noise_is_not_a_fall():
    # success 0.0625, 0.03125, 0.09375, 0.125, 0 (FrozenLake, 32 episodes a step), smooth 1:
    # gain 0.125 - 0.0625 = 0.0625 against 2 * sqrt(0.125 * 0.875 / 32) = 0.1169: within noise.
    xs = [0.0625, 0.03125, 0.09375, 0.125, 0.0]
    cfg = HealthSpec(smooth=1)
    hist = [{"step": t + 1, "train/success": x, "train/episodes": 32.0} for t, x in enumerate(xs)]
    assert failure(hist, cfg) is None
    # the same shares from 1000 episodes a step: margin 2 * sqrt(0.109375 / 1000) = 0.0209 < 0.0625
    # (gain) and < 0.125 (fall); 0 <= 0.0625 + 0.5 * 0.0625: success fell
    big = [{**r, "train/episodes": 1000.0} for r in hist]
    assert failure(big, cfg).signal == "success_fell"
    # a dip to 0.109 keeps more than half the gain (0.109 > 0.0625 + 0.5 * 0.0625 = 0.094): no fall
    assert failure(big[:4] + [{**big[4], "train/success": 0.109}], cfg) is None


def test_a_lost_rise_is_not_progress():
    # Success rises to 0.2 at step 3 and is lost from step 4 (smooth 1, 1000 episodes a step:
    # noise margin 2 * sqrt(0.16 / 1000) = 0.025); entropy and distinct bigrams fall to 10% from
    # step 4. At step 6 the high (step 3) is still within progress_window 5, so success_rising
    # holds, but success_fell holds too (0 <= 0.02 + 0.5 * 0.18): collapse, not healthy.
    cfg = HealthSpec(smooth=1)
    xs = {1: 0.02, 2: 0.05, 3: 0.2}
    hist = run(lambda t: xs.get(t, 0.0), **{"train/episodes": lambda t: 1000.0,
                                          "actor/entropy": lambda t: 1.0 if t < 4 else 0.1,
                                          "diversity/distinct_2": lambda t: 0.6 if t < 4 else 0.06})[:6]
    assert progress(hist, cfg).signal == "success_rising"
    assert failure(hist, cfg).signal == "success_fell"
    assert assess(hist, cfg).level == "collapse"
    # the same run while the rise is kept (success stays 0.2): progress, healthy
    kept = run(lambda t: xs.get(t, 0.2), **{"train/episodes": lambda t: 1000.0,
                                           "actor/entropy": lambda t: 1.0 if t < 4 else 0.1,
                                           "diversity/distinct_2": lambda t: 0.6 if t < 4 else 0.06})[:6]
    assert assess(kept, cfg).level == "healthy"


def _grad_history(grads, spreads):
    return [{"step": t, "actor/grad_norm": g, **({} if s is None else {"filter/in_group_std_after": s})}
            for t, (g, s) in enumerate(zip(grads, spreads), start=1)]


def test_a_grad_spike_that_the_reward_spread_explains_is_learning():
    from ragen_cli.monitor.health import grad_spike

    # grad 0.1 x5 then 0.45 (4.5x the median, MAD 0: z inf); the trained groups' reward std
    # 0.1 x5 then 0.33: grad / std 1.0 x5 then 1.36, under grad_ratio_min 3 x its median 1.0
    assert grad_spike(_grad_history([0.1] * 5 + [0.45], [0.1] * 5 + [0.33]), CFG) is None
    # the same spike while the spread falls to 0.05: grad / std 9.0 = 9x its median, a spike
    falling = grad_spike(_grad_history([0.1] * 5 + [0.45], [0.1] * 5 + [0.05]), CFG)
    assert falling is not None and falling.signal == "grad_norm"
    assert falling.message == ("grad norm 0.45 is inf robust deviations above its median 0.1 (limit 5), "
                               "inf per unit of the trained groups' reward std")
    # a run that does not record the spread: the grad norm alone, as before
    alone = grad_spike(_grad_history([0.1] * 5 + [0.45], [None] * 6), CFG)
    assert alone is not None and alone.message.endswith("(limit 5)")
    # no spike in the grad norm: nothing, whatever the spread does
    assert grad_spike(_grad_history([0.1] * 6, [0.1] * 5 + [0.01]), CFG) is None


def test_constant_rewards_at_mostly_success_are_convergence_not_collapse():
    # solved 1.0 (the +20% setting): success climbs 0.04 a step to a plateau; from step 25 every
    # group's reward is constant (zero_std 1.0), entropy 1.0 -> 0.05, in-group std 0.4 -> 0.02.
    # Plateau 0.88 (a dataset task's converged 4x runs): the smoothed success reached .88 at step
    # 24 ((.88+.88+.88)/3; .84 at 22, .8667 at 23), so from step 29 no high within 5 steps.
    # Step 29: narrowing (entropy .05/1, std .02/.4), no progress, zero_std (1, 1, 1) >= .95 but
    # success .88 >= 1/2: most constant groups succeed, so no_variance is no failure; no fall, a
    # gain: a warning (and no_signal from step 27), never a collapse. The same run on a plateau
    # of 0.3 (a shortcut, or the bandit's safe arm): .3 < 1/2, no_variance -> collapse at step 27
    # (success last rose at step 8: s8 = (.24+.28+.3)/3 = .273, s9 = .293, s10 = .3, no high since).
    cfg = HealthSpec(solved=1.0)
    narrow = {"actor/entropy": lambda t: 1.0 if t < 25 else 0.05,
              "reward/task_in_group_std": lambda t: 0.4 if t < 25 else 0.02,
              "filter/zero_std_frac": lambda t: 0.1 if t < 25 else 1.0}
    high = run(lambda t: min(0.88, 0.04 * t), **narrow)
    lv = levels(high, cfg)
    assert "collapse" not in lv and lv[28] == "warning"
    assert failure(high[:29], cfg) is None
    low = run(lambda t: min(0.3, 0.04 * t), **narrow)
    assert levels(low, cfg)[26] == "collapse" and failure(low[:27], cfg).signal == "no_variance"
    # at the boundary: a smoothed success of exactly 1/2 counts as mostly succeeding
    assert failure(run(lambda t: 0.5, **narrow)[:27], cfg).signal == "no_gain"


def test_own_noise_by_hand():
    from ragen_cli.monitor.outcome import own_noise

    # changes 0.5, -0.1, 0.2, -0.1: median 0.05, absolute deviations 0.45, 0.15, 0.15, 0.15 -> MAD
    # 0.15; sd(x) = 1.4826 x 0.15 / sqrt 2; a mean of 3 steps / sqrt 3; fall_z 2 -> 0.18158
    assert own_noise([0.0, 0.5, 0.4, 0.6, 0.5], CFG) == pytest.approx(2 * 1.4826 * 0.15 / math.sqrt(6))
    assert own_noise([0.3, 0.5], CFG) == 0.0  # one change: no spread to measure
    # only the last `window` changes count: window 2 sees 0.2, -0.1 (median 0.05, MAD 0.15)
    assert own_noise([0.0, 0.5, 0.4, 0.6, 0.5], HealthSpec(window=2)) == pytest.approx(2 * 1.4826 * 0.15 / math.sqrt(6))


def test_a_held_gain_is_progress():
    from ragen_cli.monitor.outcome import holding

    # (a) converged but noisy (fresh4 larger 4x seed 94's kind): success 0.05 -> 0.9-1.0 with dips
    # to 0.75, 128 episodes a step. Smoothed (3): peak 0.9667 (steps 5-7), last (.9 + .75 + .9) / 3
    # = 0.85: no new high in 5 steps, not solved (0.9 - 2 sqrt(.85 x .15 / 384) = 0.8636). Its own
    # changes (12): median 0.1, MAD 0.2 -> noise 2 x 1.4826 x 0.2 / sqrt 6 = 0.2421 > the binomial
    # 0.0183 at the peak; 0.9667 - 0.85 = 0.117 <= 0.2421, gain 0.917 > 0.2421: holding.
    xs = [0.05, 0.5, 0.9, 1.0, 0.9, 1.0, 0.75, 1.0, 0.9, 0.75, 0.9, 0.75, 0.9]
    narrow = {"train/episodes": lambda t: 128.0, "actor/entropy": lambda t: 1.0 if t < 6 else 0.2,
              "diversity/distinct_2": lambda t: 0.6 if t < 6 else 0.12}
    hist = run(lambda t: xs[min(t, len(xs)) - 1], **narrow)[: len(xs)]
    held = progress(hist, CFG)
    assert held.signal == "holding" and held.value == pytest.approx(0.85)
    assert held.threshold == pytest.approx(2.9 / 3 - 2 * 1.4826 * 0.2 / math.sqrt(6))
    assert assess(hist, CFG).level == "healthy"  # narrowing (entropy, bigrams) while it holds: convergence
    # (b) steady (no step-to-step spread: own noise 0): 0 -> 0.6, then 0.54 for 3 steps. Binomial
    # margin at the peak 0.6: 2 sqrt(.24 / 384) = 0.05; 0.6 - 0.54 = 0.06 > 0.05: not held, and the
    # narrowing run is warned; at 0.56, 0.6 - 0.56 = 0.04 <= 0.05: held.
    steady = [0.0, 0.0] + [0.6] * 7
    for last, held_it in ((0.54, False), (0.56, True)):
        hist = run(lambda t: (steady + [last] * 3)[min(t, 12) - 1], **narrow)[:12]
        assert (holding(hist, CFG) is not None) == held_it
        assert assess(hist, CFG).level == ("healthy" if held_it else "warning")
    # (c) below MOSTLY (0.5) a plateau is not a held gain, however flat: 0 -> 0.45
    low = run(lambda t: 0.0 if t < 3 else 0.45, **narrow)[:12]
    assert holding(low, CFG) is None and assess(low, CFG).level == "warning"


def test_no_episode_succeeding_where_that_is_improbable_is_a_collapse_beside_one_signal():
    # A run that breaks instead of narrowing (as `larger` 16x seed 131 in batch fresh8 of data/health_corpus/):
    # success 0.1 t up to 0.6 at step 6, 0.6 to step 15, 0.45 and 0.4 at 16-17, 0 from 18, over 8
    # groups a step; the in-group std (0.4) falls to 0 with it; entropy and bigrams stay (garbage
    # is as varied). The limit: the one-sided normal tail of fall_z 2, erfc(2 / sqrt 2) / 2 = .02275.
    # Step 18: the smoothed success before the zeros p = (.6 + .45 + .4)/3 = .4833; 8 groups all
    # failing in one step, (1 - p)^8 = .5167^8 = .0051 <= .02275: wiped_out, but std (.4 + .4 + 0)/3
    # = 67% of .4: nothing narrowed -> healthy. Step 19: the streak's first step still says .0051,
    # and std (.4 + 0 + 0)/3 = 33% <= 50%: one narrowing signal, enough beside wiped_out -> collapse
    # (success_fell alone needs collapse_votes 2: a warning until a second signal joins).
    def broke(t):
        return 0.1 * t if t <= 6 else {16: 0.45, 17: 0.4}.get(t, 0.6 if t < 16 else 0.0)

    over = {"reward/task_in_group_std": lambda t: 0.4 if t < 18 else 0.0, "train/groups": lambda t: 8.0}
    hist = run(broke, **over)
    lv = levels(hist)
    assert lv[:18] == ["healthy"] * 18 and lv[18:30] == ["collapse"] * 12  # steps 19-30
    gone = failure(hist[:18], CFG)
    assert gone.signal == "wiped_out" and gone.value == pytest.approx((1 - 0.29 / 0.6) ** 8, rel=1e-9)
    assert gone.threshold == pytest.approx(0.02275, abs=1e-5)
    v = assess(hist[:19], CFG)
    assert [r.signal for r in v.reasons] == ["wiped_out", "in_group_std"]
    assert v.reasons[0].message == ("no episode succeeded in the last 2 step(s), after a smoothed train/success of "
                                    "0.48: even with every group's rollouts all-or-nothing, 8 groups all fail in "
                                    "one step with chance 0.0051 (limit 0.023)")
    # Over 2 groups a step the zeros are likely enough, .5167^2 = .27, however long the streak:
    # success_fell beside one signal, a warning at steps 19-21.
    two = run(broke, **{**over, "train/groups": lambda t: 2.0})
    assert levels(two)[17:21] == ["healthy", "warning", "warning", "warning"]
    assert failure(two[:21], CFG).signal == "success_fell"
    # Without the group count (a run before train/groups, replayed without its spec) the rule is silent,
    # and a step whose train/success is missing is not a step of zeros.
    assert failure(run(broke, **{"reward/task_in_group_std": over["reward/task_in_group_std"]})[:19], CFG).signal == "success_fell"
    from ragen_cli.monitor.outcome import wiped_out

    gap = [dict(r) for r in hist[:19]]
    del gap[-1]["train/success"]
    assert wiped_out(hist[:19], CFG) is not None and wiped_out(gap, CFG) is None
