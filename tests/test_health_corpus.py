"""The committed corpus of real runs (bench/health_corpus): its labels follow the written rule,
and the detector's summary on it is the one docs/health.md reports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "health_corpus.py"


def _bench():
    spec = importlib.util.spec_from_file_location("health_corpus", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_labels_follow_the_rule():
    hc = _bench()
    committed = json.loads((hc.CORPUS / "labels.json").read_text())
    assert [hc.label(hc.CORPUS / "runs" / lab["run"]) for lab in committed] == committed
    assert {lab["run"] for lab in committed} == {p.name for p in (hc.CORPUS / "runs").iterdir() if p.is_dir()}


def test_detector_on_the_corpus():
    hc = _bench()
    rows, summary = hc.evaluate(json.loads((hc.CORPUS / "labels.json").read_text()))
    assert summary["false_collapse"] == 0 and summary["caught"] == summary["collapse_runs"] >= 4
    assert summary["learning_runs"] >= 4
    assert all(r["first_warning"] is None for r in rows if r["label"] == "learns")


def test_settled_from():
    hc = _bench()
    acts = [{"step": 1, "actions": ["a", "b"] * 4}, {"step": 2, "actions": ["a"] * 7 + ["b"]},
            {"step": 3, "actions": ["a"] * 6 + ["b"] * 2}, {"step": 4, "actions": ["b"] * 8},
            {"step": 5, "actions": ["b"] * 7 + ["c"]}]
    # 7/8 = 0.875 >= 0.85 settles, 6/8 = 0.75 does not: settled from step 4 (step 3 breaks 2)
    assert hc.settled_from(acts) == 4
    assert hc.settled_from(acts[:3]) is None


def test_separable_at_is_the_first_step_outside_every_learners_range():
    hc = _bench()
    learners = [{"m": {2: 0.1, 3: 0.2}}, {"m": {2: 0.3, 3: 0.4}}, {"m": {2: 0.2, 3: 0.3}, "n": {2: 5.0}}]
    # step 2: 0.25 lies inside [0.1, 0.3]; step 3: 0.45 lies above [0.2, 0.4]
    assert hc.separable_at({"m": {2: 0.25, 3: 0.45}}, learners, 2, 6) == (3, ["m"])
    # a range's ends are inside; "n" has one learner, fewer than min_learners 3, so never counts
    assert hc.separable_at({"m": {2: 0.1, 3: 0.4}, "n": {2: 9.0}}, learners, 2, 6) is None
    assert hc.separable_at({"m": {2: 0.05}}, learners, 2, 6) == (2, ["m"])
    assert hc.separable_at({"m": {2: 0.05}}, learners, 3, 6) is None  # before `first`: not looked at


def test_with_history_by_hand():
    hc = _bench()
    out = hc.with_history({"m": {1: 2.0, 2: 4.0, 4: 1.0}})
    assert out["m"] == {1: 2.0, 2: 4.0, 4: 1.0}
    assert out["m:delta"] == {2: 2.0, 4: -3.0}
    assert out["m:of_first"] == {1: 0.0, 2: 2.0, 4: -1.0}
    assert out["m:of_peak"] == {1: 1.0, 2: 1.0, 4: 0.25}
    assert hc.with_history({"z": {1: 0.0, 2: 0.0}})["z:of_peak"] == {1: 1.0, 2: 1.0}


def test_held_out_envelope_warns_a_run_outside_the_others():
    hc = _bench()
    runs = [{"m": {2: 0.1}}, {"m": {2: 0.2}}, {"m": {2: 0.3}}, {"m": {2: 0.9}}]
    # held out: 0.1 is below [0.2, 0.9], 0.9 above [0.1, 0.3]; 0.2 and 0.3 lie inside the others' range
    assert hc.held_out_envelope(runs, 2, 5) == [(2, ["m"]), None, None, (2, ["m"])]


def test_warned_by_counts_first_warnings_at_each_step_they_grow():
    hc = _bench()
    # collapses warned at 2, 3, never; learners at 3, 3: by 2 -> (1, 0); by 3 -> (2, 2); 4, 5 unchanged
    assert hc.warned_by([2, 3, None], [3, 3], first=2, last=5) == [(2, (1, 0)), (3, (2, 2))]
