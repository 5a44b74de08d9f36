"""The committed fixture runs equal the generator's output, and ragen watch's CLI entry."""

import importlib.util
from pathlib import Path

from typer.testing import CliRunner

from ragen_cli.cli import app as cli_app
from ragen_cli.monitor.metrics import validate_metrics
from ragen_cli.monitor.rundir import RunDir

FIXTURES = Path(__file__).parent / "fixtures"


def _generator():
    spec = importlib.util.spec_from_file_location("make_runs", FIXTURES / "make_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_fixture_runs_are_up_to_date(tmp_path):
    _generator().main(tmp_path)
    assert _files(tmp_path) == _files(FIXTURES / "runs"), "run `.venv/bin/python tests/fixtures/make_runs.py`"


def test_fixture_metrics_are_in_the_table_and_events_come_from_the_detector():
    for name in ("healthy", "echo-trap"):
        run = RunDir(FIXTURES / "runs" / name)
        rows = run.read_metrics()
        assert len(rows) == 40 and all(validate_metrics(r) == [] for r in rows)
    health = [e for e in RunDir(FIXTURES / "runs" / "echo-trap").read_events() if e["kind"] == "health"]
    # std = 0.36 x 0.8^(t - 20) from step 21 falls under 50% of its peak by step 24, but success
    # (0.3 + 0.6 (1 - e^(-t/12)) plus noise) still sets new highs (progress) until the collapse
    # starts at 26 and pulls it down: the first step without a high in the last 5 is 27, where
    # the smoothed success (.806) still holds its gain within the run's own noise (`holding`: .815
    # - .806 < .063, 2 standard errors of a 3-step mean from its step-to-step changes), and 28
    # (.777, within .066); at 29 (.740, .075 below the peak > .0747) it no longer does -> warning
    # (27 before the sixteenth session's held-gain rule). At 32 the smoothed success, (.629 + .611 + .521)/3 = .587, has kept less than half
    # of its gain (limit: start + 0.5 x (peak - start) = .589, start = the step-1 value, peak ~.83)
    # -> success_fell beside four narrowing signals -> collapse at 32.
    assert [(e["step"], e["level"]) for e in health] == [(29, "warning"), (32, "collapse")]
    assert not [e for e in RunDir(FIXTURES / "runs" / "healthy").read_events() if e["kind"] == "health"]


def test_watch_without_runs_explains(tmp_path):
    r = CliRunner().invoke(cli_app, ["watch", "--runs", str(tmp_path / "nothing")])
    assert r.exit_code == 1 and "no run directories under" in r.output
