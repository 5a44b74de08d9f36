"""Pure formatting of `ragen watch` (no app)."""

import pytest

from ragen_cli.monitor.health import Reason, Verdict
from ragen_cli.tui.format import (
    alarm_steps, chart_series, intervention_steps, eta_seconds, event_row, filter_trajectories, fmt_duration,
    header_markup, matching_names, run_start, split_reply, step_seconds, trajectory_markup, turn_flags,
)
from ragen_cli.tui.widgets.charts import CHARTS, band_lines, chart_lines


def test_fmt_duration():
    assert [fmt_duration(x) for x in (None, -1, 42.4, 185, 3725)] == ["-", "-", "42s", "3m05s", "1h02m"]


HIST = [{"step": s, "time": 100.0 + 10 * s, "timing/step_s": 10.0} for s in range(5)]


def test_timing_eta_and_start():
    # times 100..140: 4 intervals of 10 s -> 10 s/step; total 20, done 5 -> 15 x 10 = 150 s
    assert step_seconds(HIST) == 10.0
    assert eta_seconds(HIST, 20, finished=False) == 150.0
    assert eta_seconds(HIST, 20, finished=True) == 0.0
    assert eta_seconds(HIST, None, finished=False) is None
    # no start event: first step's time minus its duration = 100 - 10 = 90
    assert run_start(HIST, []) == 90.0
    assert run_start(HIST, [{"kind": "start", "time": 50.0}]) == 50.0
    # one record with no usable times: fall back to timing/step_s
    assert step_seconds([{"step": 0, "timing/step_s": 3.0}]) == 3.0


def test_header_markup_shows_progress_verdict_and_reason():
    v = Verdict("collapse", [Reason("entropy", 0.1, 0.2, "policy entropy fell to 10%", "collapse")], 4)
    text = header_markup("run-a", "env bandit", HIST, 20, [{"kind": "start", "time": 50.0}], v, now=200.0)
    # elapsed = now 200 - start 50 = 150 s = 2m30s; running (no end event); ETA 150 s
    assert "run-a" in text and "step 4 (5/20)" in text and "running" in text
    assert "elapsed 2m30s" in text and "ETA 2m30s" in text
    assert "COLLAPSE" in text and "white on red" in text and "policy entropy fell to 10%" in text
    done = header_markup("r", "", HIST, 5, [{"kind": "end", "time": 160.0}], None, now=999.0)
    assert "finished" in done and "elapsed 1m10s" in done and "HEALTHY" in done  # 160 - 90


def test_event_rows():
    ev = {"step": 7, "time": 1.0, "kind": "health", "level": "warning", "previous": "healthy",
          "reasons": [{"signal": "entropy", "message": "entropy fell"}]}
    assert event_row(ev) == ("7", "health", "healthy -> warning: entropy fell")
    assert event_row({"step": 9, "kind": "checkpoint", "path": "c/step-9", "loss": 0.123456}) == (
        "9", "checkpoint", "path=c/step-9, loss=0.1235")
    assert event_row({"step": 3, "kind": "intervention", "message": "keep_ratio 0.25 -> 0.125"})[2] == "keep_ratio 0.25 -> 0.125"


def test_split_reply():
    assert split_reply("<think>go up</think><answer>Up || Left</answer>") == ("go up", "Up || Left")
    assert split_reply("<think>cut off") == ("cut off", "")
    assert split_reply("just text ") == ("", "just text")


def test_trajectory_filter_and_markup():
    trajs = [{"success": True}, {"success": False}, {}]
    assert filter_trajectories(trajs, "all") == [0, 1, 2]
    assert filter_trajectories(trajs, "success") == [0]
    assert filter_trajectories(trajs, "failure") == [1, 2]
    with pytest.raises(ValueError):
        filter_trajectories(trajs, "maybe")
    traj = {"group": 1, "seed": 5, "env": "sokoban", "reward": -0.1, "success": False, "turns": [
        {"obs": "#P_[X]", "reply": "<think>push</think><answer>Up</answer>", "actions": ["Up"],
         "reward": -0.1, "valid": True, "effective": False, "format_ok": True}]}
    text = trajectory_markup(traj)
    # "[X]" in the state must be escaped, not read as Rich markup
    assert "#P_\\[X]" in text and "push" in text and "no effect" in text and "failure" in text


def test_turn_flags_bools_and_counts():
    assert turn_flags({"format_ok": True, "valid": True, "effective": True}) == []
    assert turn_flags({"format_ok": False, "valid": False}) == ["format error", "invalid"]
    # the rollout's counts: 3 actions run, 2 valid, 1 changed the state, reply hit max tokens
    turn = {"format_ok": True, "executed": 3, "valid": 2, "effective": 1, "finish_reason": "length"}
    assert turn_flags(turn) == ["invalid: 1/3", "no effect: 2/3", "cut at max tokens"]


def test_chart_data():
    hist = [{"step": 0, "reward/mean": 0.5, "reward/std": 0.1, "val/a/success": 0.2},
            {"step": 1, "reward/mean": float("nan")},
            {"step": 2, "reward/mean": 0.7, "reward/std": 0.2, "val/b/success": 0.4, "val/a/success": 0.3}]
    assert chart_series(hist, "reward/mean") == ([0, 2], [0.5, 0.7])
    assert matching_names(hist, "val/*/success") == ["val/a/success", "val/b/success"]
    success = next(c for c in CHARTS if c.key == "success")
    assert [label for label, _, _ in chart_lines(success, hist)] == ["val/a/success", "val/b/success"]
    reward = next(c for c in CHARTS if c.key == "reward")
    # band at steps 0 and 2: 0.5 -/+ 0.1, 0.7 -/+ 0.2 (step 1 has NaN mean and no std: skipped)
    (xs, lo, hi), = band_lines(reward, hist)
    assert xs == [0, 2] and lo == pytest.approx([0.4, 0.5]) and hi == pytest.approx([0.6, 0.9])
    # the weight-sync chart: what share of each update reached the engine (absent where nothing synced)
    sync = next(c for c in CHARTS if c.key == "sync")
    synced = [{"step": 1, "sync/update_kept": 1.0, "sync/update_error": 0.0003}, {"step": 2},
              {"step": 3, "sync/update_kept": 0.91, "sync/update_error": 1.8}]
    assert chart_lines(sync, synced) == [("sync/update_kept", [1, 3], [1.0, 0.91]),
                                         ("sync/update_error", [1, 3], [0.0003, 1.8])]


def test_alarm_steps_are_transitions():
    levels = ["healthy", "warning", "warning", "collapse", "healthy", "collapse"]
    vs = [Verdict(lv, [], i) for i, lv in enumerate(levels)]
    assert alarm_steps(vs) == [(1, "warning"), (3, "collapse"), (5, "collapse")]


def test_intervention_steps_skip_continue_decisions():
    events = [{"step": 3, "kind": "intervention", "action": "intervene"}, {"step": 4, "kind": "health"},
              {"step": 5, "kind": "intervention", "action": "continue"}, {"step": 6, "kind": "intervention", "action": "stop"}]
    assert intervention_steps(events) == [(3, "intervention"), (6, "intervention")]


def test_header_names_the_signals_with_values_and_limits():
    from ragen_cli.monitor.health import Reason, Verdict
    from ragen_cli.tui.format import header_markup, reason_summary

    v = Verdict("collapse", [Reason("no_variance", 1.0, 0.95, "100% of groups ...", "collapse"),
                             Reason("entropy", 0.0123, 0.5, "policy entropy fell to 1%"),
                             Reason("grad_norm", float("inf"), 5.0, "grad norm spike")], 11)
    assert reason_summary(v) == "no_variance 1.00 (limit 0.95) · entropy 0.01 (limit 0.50) · grad_norm inf (limit 5.00)"
    text = header_markup("r", "env bandit", [{"step": 11, "time": 1.0}], 30, [], v, 2.0)
    assert text.splitlines()[1].endswith(reason_summary(v)) and text.splitlines()[2] == "100% of groups ..."


def test_template_chart_lines():
    template = next(c for c in CHARTS if c.key == "template")
    hist = [{"step": 1, "collapse/mi_norm": 0.1, "collapse/retrieval_acc": 0.7, "collapse/retrieval_chance": 0.5},
            {"step": 2, "collapse/mi_norm": 0.05}]
    assert [(label, xs, ys) for label, xs, ys in chart_lines(template, hist)] == [
        ("collapse/mi_norm", [1, 2], [0.1, 0.05]), ("collapse/retrieval_acc", [1], [0.7]),
        ("collapse/retrieval_chance", [1], [0.5])]
