"""The weight-sync check (rollout/parity.py), with hand-worked probes."""

from __future__ import annotations

import math
import random

import pytest

from ragen_cli.rollout.parity import (FP32_RESOLUTION, PEAK_FLOOR, STALE_Z, ParityError, check_sync, judge_sync, lags,
                                      rms, unsure)


def test_rms():
    # differences 3 and 4 -> sqrt((9 + 16) / 2) = sqrt(12.5)
    assert rms([1.0, 2.0], [-2.0, -2.0]) == pytest.approx(math.sqrt(12.5))
    with pytest.raises(ValueError, match="equal, non-empty"):
        rms([1.0], [1.0, 2.0])


def test_fresh_stale_and_broken_on_four_tokens():
    # trainer before -1 on every token; the update moves each by -0.5 (moved = 0.5); the engine's
    # kernels add +-0.01 (noise = 0.01). k = 4: unit = max(2 x 0.01, 4 x 0.01 / 2) = 0.02; a lag
    # above 1/4 stops a sync once the part of the update the engine misses, lag x moved, is 0.04.
    old = [-1.0] * 4
    new = [-1.5] * 4
    jitter = [0.01, -0.01, 0.01, -0.01]
    before = [o + j for o, j in zip(old, jitter)]
    fresh = judge_sync(old, before, new, [n + j for n, j in zip(new, jitter)], threshold=0.05, factor=3.0)
    # gap 0.01; gap to old weights: |-0.5 +- 0.01| -> rms sqrt((0.49^2 + 0.51^2) / 2) = sqrt(0.2501)
    assert fresh.gap == pytest.approx(0.01) and fresh.noise == pytest.approx(0.01) and fresh.moved == pytest.approx(0.5)
    assert fresh.old == pytest.approx(math.sqrt(0.2501))
    assert fresh.lag == pytest.approx((0.0001 - 0.2501) / 0.5 + 0.5)  # 0.0002
    assert fresh.decidable and fresh.verdict == "ok" and fresh.tolerance == 0.05
    # the engine kept the old weights: gap sqrt(0.2501) = 0.5001 > 0.05 -> "off" by size alone
    stale = judge_sync(old, before, new, before, threshold=0.05, factor=3.0)
    assert stale.verdict == "off"
    # within the threshold but nearer the old weights: lagging (lag about 1)
    small_new = [-1.03] * 4  # moved 0.03 < 0.04: not decidable, and lag x moved about 0.03 ...
    assert judge_sync(old, before, small_new, before, 0.05, 3.0).verdict == "ok"
    near_new = [-1.045] * 4  # moved 0.045 >= 0.04: decidable, missed 0.045; gap 0.045 + jitter < 0.05
    s = judge_sync(old, before, near_new, before, 0.05, 3.0)
    assert s.decidable and s.lag > 0.9 and s.verdict == "lagging"
    with pytest.raises(ParityError, match="lie 100% of the way back to the weights from before the update"):
        check_sync(s, 0.05, 3.0)
    # the message gives the noise the check expected after the update: 0.01 x (1 - e^-1.045) /
    # (1 - e^-1) = 0.01026 (the probe's tokens a little less likely), so a stop can be judged from it
    with pytest.raises(ParityError, match=r"the kernels' noise 0.01, 0.01026 expected after the update"):
        check_sync(s, 0.05, 3.0)
    # a third of the way back (a partial sync): lag 1/3 > 1/4. The update makes the tokens less
    # likely (p 0.368 -> 0.301 at moved 0.2), so the noise after is 0.01 x (1 - 0.301) / (1 -
    # 0.368) = 0.01106, unit 0.0221: missed 0.2 / 3 = 0.0667 >= 2 x 0.0221 (lagging); at moved 0.12
    # (noise after 0.01066) missed 0.04 < 2 x 0.0213 (not decided)
    for step, verdict in ((0.2, "lagging"), (0.12, "ok")):
        new_k = [-1.0 - step] * 4
        third = [n + step / 3 + j for n, j in zip(new_k, jitter)]
        c = judge_sync(old, before, new_k, third, 0.1, 3.0)  # a threshold above its gap (0.057)
        assert c.lag == pytest.approx(1 / 3, abs=0.02) and c.verdict == verdict
    with pytest.raises(ParityError, match=r"rms log-prob gap 0.5001 over 4 tokens > 0.05 .*half-applied"):
        check_sync(stale, 0.05, 3.0)
    assert check_sync(fresh, 0.05, 3.0) is fresh


def test_the_lag_rule_in_units():
    # unit 1: a stale engine (lag 1) is decided from an update of 2 units; half-synced (lag 1/2)
    # from 4, where it misses 2; a lag of 1/4 never, however large the update
    assert lags(1.0, 2.0, 1.0) and not lags(1.0, 1.99, 1.0)
    assert lags(0.5, 4.0, 1.0) and not lags(0.5, 3.9, 1.0)
    assert not lags(0.25, 100.0, 1.0) and lags(0.26, 7.7, 1.0)  # 0.26 x 7.7 = 2.002
    # a noisy lag estimate on an update under 2 units decides nothing, whatever it reads
    assert not lags(3.0, 1.0, 1.0) and not lags(math.nan, 0.0, 1.0)


def test_the_tolerance_follows_the_measured_noise():
    # bf16-like noise 0.2 on every token: tolerance max(0.05, 3 x 0.2) = 0.6
    old, new = [-2.0] * 3, [-2.0] * 3  # nothing moved: stale not decidable, score nan
    before = [-1.8] * 3
    c = judge_sync(old, before, new, [-1.5] * 3, 0.05, 3.0)
    assert c.tolerance == pytest.approx(0.6) and c.gap == pytest.approx(0.5) and c.verdict == "ok"
    assert math.isnan(c.lag) and not c.decidable and "sync/parity_lag" not in c.metrics()
    assert judge_sync(old, before, new, [-1.3] * 3, 0.05, 3.0).verdict == "off"  # 0.7 > 0.6
    assert judge_sync(old, before, new, [float("nan")] * 3, 0.05, 3.0).verdict == "off"


def test_false_stops_of_healthy_syncs_and_misses_of_stale_ones_by_simulation():
    """Gaussian kernel noise of sd 0.1 per token (bf16-like), k = 64 tokens, updates whose
    per-token movement has rms m. The rule's stated false-stop rate for a fresh engine is at most
    twice the one-sided normal tail at STALE_Z (2 x 3e-5) plus the F(64, 64) tail at 9 (~1e-18):
    in 2000 healthy syncs, no stop. A stale engine is caught whenever the update is decidable."""
    rng = random.Random(0)
    k, sd = 64, 0.1
    false_stops = missed = decidable = 0
    for trial in range(2000):
        m = [0.0, 0.05, 0.1, 0.3, 0.6][trial % 5]
        old = [rng.uniform(-5, -0.1) for _ in range(k)]
        new = [o + rng.gauss(0, m) for o in old]
        before = [o + rng.gauss(0, sd) for o in old]
        fresh = judge_sync(old, before, new, [n + rng.gauss(0, sd) for n in new], 0.05, 3.0)
        false_stops += fresh.verdict != "ok"
        stale = judge_sync(old, before, new, [o + rng.gauss(0, sd) for o in old], 0.05, 3.0)
        if stale.decidable:
            decidable += 1
            missed += stale.verdict == "ok"
    assert false_stops == 0
    # decidable from moved >= 2 x max(2 x 0.1, 4 x 0.1 / 8) = 0.4 on: the m = 0.6 updates (400 of
    # 2000), give or take the rare draw whose rms crosses 0.4
    assert 380 < decidable < 420 and missed <= 0.01 * decidable
    assert STALE_Z == 4.0


def _fault_runs(out, faults: list[str], precision: str) -> dict:
    """The runs of tests/sync_fault_run.py, one after the other in one subprocess:
    {fault: (result, run directory)}."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("sync_fault_run.py")
    proc = subprocess.run([sys.executable, str(script), str(out), ",".join(faults), precision], capture_output=True,
                          text=True, timeout=900)
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and len(results) == len(faults), proc.stderr[-3000:]
    return {res["fault"]: (res, out / res["fault"]) for res in results}


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory, tiny_model_dir):
    return _fault_runs(tmp_path_factory.mktemp("sync-faults"), ["none", "half"], "fp32")


@pytest.fixture(scope="module")
def fault_runs_bf16(tmp_path_factory, tiny_model_dir):
    return _fault_runs(tmp_path_factory.mktemp("sync-faults-bf16"), ["none", "half", "stale"], "bf16")


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["none", "half"])
def test_a_run_whose_engine_gets_half_the_weights_stops_with_parity_error(fault_runs, fault):
    """A real 2-step run (tiny-random, vLLM engine in its process, DeepSpeed, fp32, LoRA merged
    sync as the shipped specs; tests/sync_fault_run.py): with the real sync it trains to the end;
    with a sync that pushes only layer 0 from step 2 on (a half-applied sync) the probe stops it
    in step 2 with ParityError, recorded as the run's error event, after saving step 2 (its update is sound). A large
    entropy bonus moves the weights (rewards here do not differ within a group)."""
    import json

    res, out = fault_runs[fault]
    if fault == "none":
        assert res["error"] is None, res
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics] == [1, 2]
        assert all(m["sync/parity_moved"] > 1e-3 and m["sync/parity_gap"] < 1e-4 for m in metrics)
        return
    assert res["error"] == "ParityError" and ("do not serve the weights the update made" in res["message"]
                                              or "half-applied" in res["message"]), res
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    # stopped in step 2's sync: its update is sound (the engine failed, not the trainer), so it is
    # saved as step 2 (its weights, its step count), and a resume pushes them to a fresh engine
    assert events[-1]["kind"] == "error" and events[-1]["step"] == 2 and "ParityError" in events[-1]["error"]
    assert events[-1]["checkpoint"].endswith("step-2") and (out / "checkpoints" / "step-2" / "model").is_dir()


def test_the_bf16_merge_rounding_seen_in_a_healthy_run_passes():
    """Healthy bf16 syncs of a real run (SmolLM2, merged LoRA, specs/larger.yaml), which the
    first forms of the lag check stopped: (noise, moved, lag) = (0.06627, 0.07869, 0.63) at step 1
    and (0.095, 0.1485, 0.56) at step 6, 70 tokens. Rounding lags a bf16 sync by about noise /
    moved and more, so a lag above 1/4 counts only once the part of the update it misses, lag x
    moved, is 2 x max(2 x noise, 4 x noise / sqrt(70)) = 4 x noise: none of these is, all pass."""
    k = 70
    # and scaffold seed 2, step 3: (0.04, 0.348, 0.248), a lag near 1/4 at 8.7 x the noise
    for noise, moved, lag in ((0.06627, 0.07869, 0.63), (0.095, 0.1485, 0.56), (0.04, 0.348, 0.26)):
        trainer_old = [-2.0] * k
        engine_before = [-2.0 + noise] * k
        trainer_new = [-2.0 - moved] * k
        # an engine `lag` of the way back from the new log-probs to the old: gap lag x moved,
        # old (1 - lag) x moved, so (gap^2 - old^2) / (2 moved^2) + 1/2 = lag
        engine_after = [n + lag * (o - n) for n, o in zip(trainer_new, trainer_old)]
        c = judge_sync(trainer_old, engine_before, trainer_new, engine_after, 0.05, 3.0)
        assert c.lag == pytest.approx(lag) and c.verdict == "ok"
    # The same 0.63 lag after an update of 0.29: the tokens less likely (1 - p 0.8647 -> 0.8987),
    # noise after 0.06627 x 1.0394 = 0.06888. Missed 0.63 x 0.29 = 0.183 < 4 x 0.06888 = 0.2755:
    # not decided (the rule before 2026-11-27 stopped it: lag > 1/2 at moved >= 0.2755). Healthy
    # bf16 syncs of the corpus' runs miss up to 2.1 x their noise (bench/parity_corpus.py); this is 2.65.
    noise, big = 0.06627, -2.0 - 0.29
    c = judge_sync([-2.0] * k, [-2.0 + noise] * k, [big] * k, [big + 0.63 * (-2.0 - big)] * k, 0.05, 3.0)
    assert c.decidable and c.noise_after == pytest.approx(0.06888, abs=1e-5) and c.verdict == "ok"
    # after an update of 0.5 (1 - p 0.9179: noise after 0.07035) the same lag misses 0.315: the
    # gap, 0.315, is past the size bound 3 x 0.07035 = 0.211 first: "off"
    big = -2.5
    assert judge_sync([-2.0] * k, [-2.0 + noise] * k, [big] * k, [big + 0.63 * 0.5] * k, 0.05, 3.0).verdict == "off"


def test_the_larger4x_bf16_sync_that_stopped_a_healthy_run_passes():
    """fresh3-larger4x-bf16-seed80 (batch fresh3 of data/health_corpus) stopped in step 12: lag 0.55, gap
    0.191 to the new weights, 0.1588 to the old, moved 0.3296 over 67 tokens, noise 0.07188; resumed
    from step 11 it learned to 1.00 with no other stop. Rebuilt on uniform tokens (p 0.135 -> 0.097:
    noise after 0.07188 x 0.9027 / 0.8647 = 0.07504, unit 0.1501): missed 0.552 x 0.3296 = 0.182
    < 2 units = 0.300 and gap 0.182 < 3 x 0.07504: ok. The rule before (lag > 1/2 once moved >= 2
    units) stopped it."""
    k, noise, moved, lag = 67, 0.07188, 0.3296, 0.552
    old, new = [-2.0] * k, [-2.0 - moved] * k
    c = judge_sync(old, [-2.0 + noise] * k, new, [n + lag * (o - n) for n, o in zip(new, old)], 0.05, 3.0)
    assert c.noise_after == pytest.approx(0.07504, abs=1e-5) and c.lag == pytest.approx(lag)
    assert c.decidable and c.lag > 0.5 and c.verdict == "ok"  # decidable: a stale engine would be stopped
    assert judge_sync(old, [-2.0 + noise] * k, new, [-2.0 + noise] * k, 0.05, 3.0).verdict != "ok"


def test_an_fp32_update_below_its_resolution_is_not_decided():
    """A healthy fp32 sync of a real run (SmolLM2, merged LoRA, Bandit at lr 2e-3 without
    filtering, collapsed onto one reply: entropy 0, updates halving every step), stopped at step
    17 before the floor: noise 4.215e-08, moved 6.743e-07, gap 3.817e-07, old
    2.98e-07 over 64 tokens. Without the floor unit = max(2 x 4.215e-08, 4 x 4.215e-08 / 8) =
    8.43e-08, moved = 8.0 x unit and lag 0.56 > 1/2: "lagging". With unit >= 1e-6 an update must
    move the log-probs by 2e-6 to be decided: this one is not, and the sync passes; the same lag
    after an fp32 update of 1e-4 is still stopped."""
    k, noise, moved = 64, 4.215e-08, 6.743e-07
    # every token alike: engine_after at a: gap |moved - a|, old a -> a = 2.98e-07 gives gap 3.763e-07
    a = 2.98e-07
    c = judge_sync([0.0] * k, [noise] * k, [moved] * k, [a] * k, 0.05, 3.0)
    assert c.gap == pytest.approx(moved - a) and c.old == pytest.approx(a)
    assert c.lag == pytest.approx(((moved - a) ** 2 - a ** 2) / (2 * moved ** 2) + 0.5)  # 0.558
    assert c.lag > 0.5 and moved < 2 * FP32_RESOLUTION and not c.decidable and c.verdict == "ok"
    big = 1e-4  # the same fraction of the way back after a real fp32 update
    stale = judge_sync([0.0] * k, [noise] * k, [big] * k, [big * a / moved] * k, 0.05, 3.0)
    assert stale.lag == pytest.approx(c.lag) and stale.decidable and stale.verdict == "lagging"


def test_the_noise_after_follows_how_unsure_the_new_weights_are():
    """A bf16 run at 16x lr stopped with a gap of 0.291 over 64 tokens against 3 x 0.0303, the
    noise measured on tokens its old weights were sure of. Here the old weights give each probe
    token p 0.97 (rms(1 - p) 0.03) and the new ones p 0.5 (0.5): the noise after is 0.0303 x
    0.5 / 0.03 = 0.505, the size bound 3 x 0.505 = 1.515, and the same gap passes; the same gap
    after an update that leaves the tokens about as sure (p 0.96: 0.0303 x 0.04 / 0.03 = 0.0404,
    bound 0.1212) is still "off"."""
    k, noise = 64, 0.0303
    old, before = [math.log(0.97)] * k, [math.log(0.97) + noise] * k
    assert unsure(old) == pytest.approx(0.03) and unsure([0.0] * 3) == 0.0
    new = [math.log(0.5)] * k
    c = judge_sync(old, before, new, [x + 0.291 for x in new], 0.05, 3.0)
    assert c.noise_after == pytest.approx(noise * 0.5 / 0.03) and c.tolerance == pytest.approx(3 * c.noise_after)
    assert c.gap == pytest.approx(0.291) and c.verdict == "ok" and "sync/parity_noise_after" in c.metrics()
    sure = [math.log(0.96)] * k
    d = judge_sync(old, before, sure, [x + 0.291 for x in sure], 0.05, 3.0)
    assert d.noise_after == pytest.approx(noise * 0.04 / 0.03) and d.verdict == "off"
    with pytest.raises(ParityError, match=r"3 x 0.0404, the gap 0.0303 the same weights gave"):
        check_sync(d, 0.05, 3.0)
    # never below the measured noise: an update that makes the tokens surer keeps it
    assert judge_sync(new, [x + noise for x in new], old, old, 0.05, 3.0).noise_after == pytest.approx(noise)
    # near-certain tokens count as PEAK_FLOOR unsure: a probe at p = 1 scales by at most 1 / 0.01
    e = judge_sync([0.0] * k, [0.001] * k, new, new, 0.05, 3.0)
    assert PEAK_FLOOR == 0.01 and e.noise_after == pytest.approx(0.001 * 0.5 / 0.01)
    assert judge_sync([0.0] * k, [0.0] * k, new, [x + 0.06 for x in new], 0.05, 3.0).verdict == "off"  # 0 noise: 0.05 holds


def test_every_recorded_sync_of_the_corpora_passes_and_no_stop_of_a_healthy_run_would_recur(capsys):
    """bench/parity_corpus.py on the health corpora's committed runs: no recorded sync is stopped
    by the check since 2026-11-27, the largest bf16 gap stays under 0.85 of its tolerance and the
    largest miss under the 2-unit bound, and every ParityError of a healthy run passes it: the lag
    stop of larger 4x seed 80, the size stop of 16x seed 81 (its tolerance then 3 x 0.03026; the
    five steps before it measured up to 0.2102) and the size stops of 16x seeds 97, 98 and 99
    (fresh4, resumed with the check since: each then ran to step 30 without a stop), while the fp32 lag stop of Bandit seed 63 passes both (the 1e-6 floor).
    Two syncs of those resumed runs the check until then would have stopped (with the noise
    before standing in for the scaled one it did not log), three of fresh5's 16x seed 101
    (steps 13, 17, 28), a run made with the check since, which went through all 30 steps, and
    three of fresh12's `larger` 4x runs in bf16 on a native-bf16 CPU (seed 183 at step 9, 189 at
    23, 194 at 25), made with the check since, each of which learned (0.03 -> 0.91-1.00), and one
    of fresh13's (seed 200 at step 16), which ran all 30 steps to the "always the first number"
    level (0.56)."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "parity_corpus.py"
    spec = importlib.util.spec_from_file_location("parity_corpus", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main() == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["syncs"] >= 1800 and summary["bf16_syncs"] >= 700
    assert summary["stopped_since"] == 0 and summary["stopped_until"] == 9
    until = [f"{r['run']}@{r['step']}" for r in bench.syncs() if bench.verdicts(r)[0] != "ok"]
    assert until == ["fresh12-larger4x-bf16-seed183@9", "fresh12-larger4x-bf16-seed189@23", "fresh12-larger4x-bf16-seed194@25",
                     "fresh13-larger4x-bf16-seed200@16", "fresh4-larger16x-bf16-seed97@11", "fresh4-larger16x-bf16-seed98@27", "fresh5-larger16x-bf16-seed101@13",
                     "fresh5-larger16x-bf16-seed101@17", "fresh5-larger16x-bf16-seed101@28"]
    assert summary["max_gap_share_since"] < 0.85 and summary["max_missed_units"] < 2
    stops = {s["run"]: s for s in bench.stops()}
    assert stops["fresh3-larger4x-bf16-seed80"]["lag"] == pytest.approx(0.552, abs=1e-3)
    assert bench.verdicts(stops["fresh3-larger4x-bf16-seed80"]) == ("lagging", "ok")
    s81 = stops["fresh-larger16x-bf16-seed81"]
    assert (s81["kind"], s81["recent"]) == ("off", pytest.approx(0.2102, abs=1e-4))
    assert bench.verdicts(s81) == ("off", "ok")  # 0.291 > 3 x 0.03026, < 3 x 0.2102
    assert bench.verdicts(stops["fresh-bandit-lr2e3-keep1-seed63"]) == ("ok", "ok")
    for seed, recent in ((97, 0.1088), (98, 0.141), (99, 0.5821)):  # the largest of the five steps before
        s = stops[f"fresh4-larger16x-bf16-seed{seed}"]
        assert s["recent"] == pytest.approx(recent, abs=1e-4) and bench.verdicts(s) == ("off", "ok")
    assert summary["events_stopped_since"] == 0


def test_the_expected_noise_is_never_below_the_last_steps_largest():
    """A larger 16x bf16 run (seed 97) stopped in step 11: gap 0.2288 over 64 tokens against 3 x
    0.07451, its own step's noise (the tokens got surer: no scaling). Steps 6-10 had measured
    0.0623, 0.1088, 0.0674, 0.0901, 0.0784: with `recent` 0.1088 the tolerance is 0.3264 and the
    sync passes; a gap of 0.33 is still off. `recent_noise` reads the last RECENT records that
    have a noise, skipping those without."""
    from ragen_cli.rollout.parity import RECENT, RecentNoise, recent_noise

    noises = {1: 0.2, 2: 0.099, 4: 0.0993, 5: 0.04, 6: 0.0623, 7: 0.1088, 8: 0.0674, 9: 0.0901, 10: 0.0784}
    history = [{"step": s, **({"sync/parity_noise": noises[s]} if s in noises else {})} for s in range(1, 11)]
    # the last 5 records with a noise are steps 6-10 -> 0.1088; step 1's 0.2 is out of it, and
    # step 3 (no update, no probe) is skipped: without step 10 the window is steps 4-9
    assert RECENT == 5 and recent_noise(history) == RecentNoise(0.1088) and recent_noise([]) == RecentNoise(0.0)
    assert recent_noise([{"sync/parity_noise": 0.5}, *history[:-1]]).largest == 0.1088
    assert recent_noise([{"sync/parity_noise": 0.5}, *history[:5]]).largest == 0.5  # steps 1, 2, 4, 5 and the 0.5
    k, noise = 64, 0.07451
    old, new = [-1.0] * k, [-0.8] * k  # surer tokens: noise_after = noise without `recent`
    for recent, gap, verdict in ((0.0, 0.2288, "off"), (0.1088, 0.2288, "ok"), (0.1088, 0.33, "off")):
        c = judge_sync(old, [-1.0 + noise] * k, new, [x + gap for x in new], 0.05, 3.0, RecentNoise(recent))
        assert c.noise_after == pytest.approx(max(noise, recent)) and c.verdict == verdict, (recent, gap)


def test_the_run_acts_on_the_first_rank_whose_sync_is_not_ok():
    from ragen_cli.rollout.parity import ruling

    old, new = [-1.0] * 4, [-1.5] * 4
    ok = judge_sync(old, old, new, new, 0.05, 3.0)  # gap 0
    off = judge_sync(old, old, new, old, 0.05, 3.0)  # the engine kept the old weights: gap 0.5 > 0.05
    assert (ok.verdict, off.verdict) == ("ok", "off")
    assert ruling([ok, ok, ok], 2) == 2  # all pass: each rank its own
    assert ruling([ok, off, off], 0) == 1 and ruling([ok, off, off], 2) == 1  # every rank: the first failing
    with pytest.raises(ParityError, match=r"^rank 1's engine: rollout engine and trainer disagree"):
        check_sync(off, 0.05, 3.0, rank=1)
    with pytest.raises(ParityError, match=r"^rollout engine and trainer disagree"):
        check_sync(off, 0.05, 3.0)  # one process: no rank named


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["none", "half", "stale"])
def test_in_bf16_a_healthy_sync_runs_and_half_or_stale_syncs_stop(fault_runs_bf16, fault):
    """The same real 2-step run in bf16 (the trainer in bf16; the merged LoRA served by an fp32
    engine, rollout.vllm_args.engine_dtype): the healthy run ends, every sync keeping the update
    (sync/update_kept within 1e-3 of 1, as fp32 arithmetic on the merge gives); a half-applied
    sync and a missing one stop in step 2 with ParityError after saving step 2 (its update is sound). (On a CPU without
    native bf16 the trainer's bf16 is emulated: slower, the same decisions.)"""
    import json

    res, out = fault_runs_bf16[fault]
    if fault == "none":
        assert res["error"] is None, res
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics] == [1, 2]
        assert all(abs(m["sync/update_kept"] - 1) < 1e-3 and m["sync/update_error"] < 1e-2 for m in metrics)
        plan = json.loads((out / "plan.json").read_text())
        assert "float32" in json.dumps(plan["placement"]["rollout"])
        return
    assert res["error"] == "ParityError", res
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events[-1]["kind"] == "error" and events[-1]["step"] == 2 and "ParityError" in events[-1]["error"]
    assert events[-1]["checkpoint"].endswith("step-2") and (out / "checkpoints" / "step-2" / "model").is_dir()


def test_the_parity_bound_under_drift():
    """An engine whose standing error grows 30% a sync (a weight it never receives while the
    trainer moves it). Per token (k = 64): kernel jitter +-n0 in the pattern + + - -, the drift
    +-e_t alternating + - + -, orthogonal to the jitter and to the update (every token -0.1),
    so noise_t = sqrt(n0^2 + e_{t-1}^2), gap_t = sqrt(n0^2 + e_t^2), and the lag is
    (gap^2 - old^2) / (2 x 0.01) + 1/2 = -0.01 / 0.02 + 1/2 = 0: never lagging.

    The bound from the last steps' noise trails the drift: tolerance 3 x noise_t >= 3 x gap_{t-1},
    and gap_t / gap_{t-1} <= 1.3 < 3, so it would never stop. The reference is step 1's noise,
    n0 = 0.05 (e_0 = 0): noise_after <= 8 x 0.05 = 0.4, tolerance 3 x 0.4 = 1.2. With
    e_t = 0.05 x 1.3^(t - 1): e_13 = 0.05 x 1.3^12 = 1.1649, gap_13 = sqrt(0.05^2 + 1.1649^2) =
    1.1660 <= 1.2; e_14 = 1.5144, gap 1.5152 > 1.2: stopped at step 14 (the rule before the
    ceiling let it pass all 50 steps, to a gap of 1.9e4)."""
    from ragen_cli.rollout.parity import REFERENCE_CEILING, recent_noise

    k, n0 = 64, 0.05
    jitter = [n0 if i % 4 < 2 else -n0 for i in range(k)]
    sign = [1.0 if i % 2 == 0 else -1.0 for i in range(k)]
    history: list[dict] = []
    verdicts = []
    e_before = 0.0
    for step in range(1, 51):
        old, new = [-1.0 - 0.1 * (step - 1)] * k, [-1.0 - 0.1 * step] * k
        e_after = n0 * 1.3 ** (step - 1)
        before = [o + j + e_before * s for o, j, s in zip(old, jitter, sign)]
        after = [x + j + e_after * s for x, j, s in zip(new, jitter, sign)]
        c = judge_sync(old, before, new, after, 0.05, 3.0, recent_noise(history))
        assert c.lag == pytest.approx(0.0, abs=1e-6)
        verdicts.append(c.verdict)
        if c.verdict != "ok":  # the run stops here (check_sync raises)
            break
        history.append({"step": step, **c.metrics()})
        e_before = e_after
    assert REFERENCE_CEILING == 8.0
    assert verdicts == ["ok"] * 13 + ["off"]
    assert history[12]["sync/parity_noise_ref"] == pytest.approx(n0)  # carried from step 1
    assert history[12]["sync/parity_noise_after"] == pytest.approx(0.4)  # the ceiling binds
