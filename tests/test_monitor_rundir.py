"""Run directory writer/readers and the incremental tail."""

import json
import os
import time

import pytest

from ragen_cli.monitor.jsonl import JsonlTail, scan_lines
from ragen_cli.monitor.rundir import RunDir, RunDirError, latest_run


def _run(tmp_path, name="r1"):
    run = RunDir(tmp_path / name)
    run.create("name: r1\n", {"steps": 10})
    return run


def test_create_writes_spec_and_plan_and_refuses_overwrite(tmp_path):
    run = _run(tmp_path)
    assert run.read_spec_text() == "name: r1\n"
    assert run.read_plan() == {"steps": 10}
    with pytest.raises(RunDirError, match="already exists and is not empty"):
        RunDir(run.path).create("x", {})
    RunDir(run.path).create("name: r1\n", {"steps": 12}, resume=True)
    assert run.read_plan() == {"steps": 12}
    with pytest.raises(RunDirError, match="no such run directory"):
        RunDir(tmp_path / "absent").create("x", {}, resume=True)


def test_metrics_round_trip_and_unknown_name_is_an_error(tmp_path):
    run = _run(tmp_path)
    run.write_metrics(0, {"reward/mean": 0.25, "val/bandit/success": 1.0})
    run.write_metrics(1, {"reward/mean": 0.5})
    rows = run.read_metrics()
    assert [(r["step"], r["reward/mean"]) for r in rows] == [(0, 0.25), (1, 0.5)]
    assert rows[0]["val/bandit/success"] == 1.0 and isinstance(rows[0]["time"], float)
    with pytest.raises(RunDirError, match="unknown metric 'reward/avg'"):
        run.write_metrics(2, {"reward/avg": 1.0})
    assert len(run.read_metrics()) == 2  # nothing written for the bad step


def test_read_metrics_skips_half_line_and_keeps_last_of_repeated_step(tmp_path):
    run = _run(tmp_path)
    run.write_metrics(0, {"reward/mean": 0.0})
    run.write_metrics(1, {"reward/mean": 1.0})
    with open(run.metrics_path, "a") as f:
        f.write('{"step": 2, "reward/me')  # writer killed mid-line
    assert [r["step"] for r in run.read_metrics()] == [0, 1]
    # Resume from the step-0 checkpoint: the half line is cut, step 1 is logged again.
    run.create("name: r1\n", {"steps": 10}, resume=True)
    assert not run.metrics_path.read_text().endswith("reward/me")
    run.write_metrics(1, {"reward/mean": 7.0})
    assert [(r["step"], r["reward/mean"]) for r in run.read_metrics()] == [(0, 0.0), (1, 7.0)]


def test_append_after_a_crash_mid_line_keeps_the_new_record(tmp_path):
    run = _run(tmp_path)
    run.write_metrics(0, {"reward/mean": 0.0})
    with open(run.metrics_path, "a") as f:
        f.write('{"step": 1, "rew')  # killed mid-line; restarted without create(resume=True)
    run.write_metrics(1, {"reward/mean": 1.0})
    assert [(r["step"], r["reward/mean"]) for r in run.read_metrics()] == [(0, 0.0), (1, 1.0)]
    assert run.metrics_path.read_text().count("\n") == 3  # record, fragment, record


def test_events_and_trajectories(tmp_path):
    run = _run(tmp_path)
    run.write_event("health", 4, level="warning", reasons=[{"signal": "entropy"}])
    assert run.read_events()[0]["kind"] == "health"
    assert run.read_events()[0]["level"] == "warning"
    with pytest.raises(RunDirError, match="unknown event kind"):
        run.write_event("oops", 1)
    with pytest.raises(RunDirError, match="may not redefine"):
        run.write_event("val", 1, time=3)
    trajs = [{"group": 0, "reward": 1.0, "turns": []}, {"group": 1, "reward": 0.0, "turns": []}]
    run.write_trajectories(5, trajs)
    run.write_trajectories(10, trajs[:1])
    assert run.read_trajectories(5) == trajs
    assert run.steps_with_trajectories() == [5, 10]
    assert run.read_trajectories(7) == []
    assert not [p for p in run.trajectories_dir.iterdir() if p.name.startswith(".")]


def test_tail_waits_for_file_and_for_line_end(tmp_path):
    path = tmp_path / "later" / "metrics.jsonl"
    tail = JsonlTail(path)
    assert tail.read_new() == []  # neither dir nor file exists yet
    path.parent.mkdir()
    path.write_text('{"step": 0}\n{"step": 1, "x"')
    assert tail.read_new() == [{"step": 0}]
    assert tail.read_new() == []  # still half-written
    with open(path, "a") as f:
        f.write(': 2}\n{"step": 2}\n')
    assert tail.read_new() == [{"step": 1, "x": 2}, {"step": 2}]
    path.write_text('{"step": 0}\n')  # truncated (shrank): start over
    assert tail.read_new() == [{"step": 0}] and tail.restarts == 1


def test_parse_lines_skips_garbage_complete_lines():
    data = b'{"a": 1}\nnot json\n[1, 2]\n{"b": 2}\n{"c"'
    # 3 complete lines are not objects or not JSON -> only a and b; consumed = up to last \n.
    scan = scan_lines(data)
    records, consumed = scan.records, scan.consumed
    assert records == [{"a": 1}, {"b": 2}]
    assert consumed == len(data) - len(b'{"c"')


def test_latest_run_picks_most_recently_written(tmp_path):
    assert latest_run(tmp_path / "none") is None
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b")
    old = time.time() - 100
    for p in b.path.iterdir():
        os.utime(p, (old, old))
    a.write_metrics(0, {"reward/mean": 1.0})
    assert latest_run(tmp_path) == a.path
    b.write_metrics(0, {"reward/mean": 1.0})
    os.utime(b.metrics_path, (time.time() + 10, time.time() + 10))
    assert latest_run(tmp_path) == b.path
    (tmp_path / "stray.txt").write_text("x")
    assert json.loads(a.plan_path.read_text()) == {"steps": 10}
