"""`ragen health`: the detector replayed over run directories (monitor/replay.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.monitor.rundir import RunDir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import corpus  # noqa: E402  (bench/corpus.py, the loader of data/health_corpus/)

CORPUS = corpus.folder("main") / "runs"


def _run(tmp_path: Path, spec: str = "name: r\n") -> RunDir:
    run = RunDir(tmp_path / "r")
    run.create(spec, {})
    # step 0: base-model validation only (not part of the trainer's history, so not replayed);
    # steps 1..8: no group has reward variance -> "no signal" from step 3 (no_signal_steps 3)
    run.write_metrics(0, {"val/bandit/success": 0.03})
    for t in range(1, 9):
        run.write_metrics(t, {"filter/zero_std_frac": 1.0, "train/success": 0.0})
    return run


def test_health_json_timeline(tmp_path):
    run = _run(tmp_path)
    r = CliRunner().invoke(app, ["health", str(run.path), "--json"])
    assert r.exit_code == 0
    [out] = json.loads(r.output)["runs"]
    assert out["run"] == str(run.path) and out["steps"] == list(range(1, 9))
    assert out["levels"] == ["healthy", "healthy"] + ["warning"] * 6
    assert out["first_warning"] == 3 and out["first_collapse"] is None
    assert out["changes"][0]["reasons"][0]["signal"] == "no_signal"


def test_health_uses_the_runs_own_thresholds_and_prints_a_table(tmp_path):
    # with empty_stop_steps 5 in the run's spec, step 5 is a collapse
    run = _run(tmp_path, "name: r\nmonitor:\n  health:\n    empty_stop_steps: 5\n")
    r = CliRunner().invoke(app, ["health", str(run.path)])
    assert r.exit_code == 0 and "first warning: 3" in r.output and "first collapse: 5" in r.output
    assert "healthy -> warning" in r.output and "warning -> collapse" in r.output


def test_health_on_real_runs_of_the_corpus():
    # bandit-s-seed42 is `ragen train specs/bandit.yaml` as shipped (validation 0.03 -> 1.0)
    r = CliRunner().invoke(app, ["health", str(CORPUS / "bandit-s-seed42"), str(CORPUS / "bandit-s-seed1"), "--json"])
    learn, stuck = json.loads(r.output)["runs"]
    assert learn["first_warning"] is None and learn["first_collapse"] is None and len(learn["levels"]) == 30
    assert stuck["first_collapse"] is not None


def test_health_bad_directory_exits_2(tmp_path):
    r = CliRunner().invoke(app, ["health", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no metrics.jsonl" in r.output


def test_a_collapse_without_a_warning_before_it_is_the_first_warning():
    # bandit-s-lr2e3-seed2 goes from healthy straight to collapse (at step 9 before the lost-rise
    # rule, now at 6): `ragen health` printed "first warning: -" beside the collapse step, while the
    # corpus bench counted that step
    from ragen_cli.monitor.health import Verdict
    from ragen_cli.monitor.replay import Timeline

    t = Timeline("r", [1, 2, 3], [Verdict("healthy", step=1), Verdict("collapse", step=2), Verdict("warning", step=3)])
    assert t.first_warning().step == 2 and t.first_collapse().step == 2
    assert t.to_json()["first_warning"] == 2
    r = CliRunner().invoke(app, ["health", str(CORPUS / "bandit-s-lr2e3-seed2"), "--json"])
    [out] = json.loads(r.output)["runs"]
    assert out["levels"][4:6] == ["healthy", "collapse"] and out["first_warning"] == out["first_collapse"] == 6
