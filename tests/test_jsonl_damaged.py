"""Damaged run logs (issue 38, section 3): `ragen health` and `ragen watch` on a run being
written (a partial last line), on truncated or garbled JSONL and on a run directory deleted
while watched: no traceback, each skipped line named FILE:LINE. And a metrics / events write
that hits a file-size limit (a real EFBIG in a subprocess) leaves the file as it was.

The run is a copy of tests/fixtures/runs/healthy: metrics.jsonl line k holds step k-1 (40
lines, steps 0..39; `ragen health` replays the 39 training steps 1..39), events.jsonl 11 lines.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.monitor.rundir import RunDir
from ragen_cli.tui.state import RunState

HEALTHY = Path(__file__).parent / "fixtures" / "runs" / "healthy"


@pytest.fixture
def run(tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(HEALTHY, dst)
    return dst


def _set_line(path: Path, number: int, raw: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = raw
    path.write_bytes(b"\n".join(lines))


def _health(run: Path) -> dict:
    result = CliRunner().invoke(app, ["health", "--json", str(run)])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    [out] = json.loads(result.output)["runs"]
    return out


def test_health_names_a_partial_last_line_of_a_run_being_written(run):
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 40, "reward/me')  # the trainer is writing line 41
    out = _health(run)
    assert len(out["steps"]) == 39
    assert out["problems"] == [f"{run}/metrics.jsonl:41: incomplete last line (being written, or cut off by a "
                               "crash): skipped"]


def test_health_names_each_garbled_line_and_keeps_the_rest(run):
    metrics = run / "metrics.jsonl"
    _set_line(metrics, 6, b"\x00\xff{garbage")  # step 5
    _set_line(metrics, 11, b"[1, 2]")  # step 10
    _set_line(metrics, 21, json.dumps({"step": True, "reward/mean": 0.5}).encode())  # step 20
    out = _health(run)
    assert len(out["steps"]) == 39 - 3 and {5, 10, 20}.isdisjoint(out["steps"])
    problems = out["problems"]
    assert len(problems) == 3
    assert problems[0].startswith(f"{metrics}:6: not JSON (") and problems[0].endswith("): skipped")
    assert problems[1] == f"{metrics}:11: a JSON list, not an object: skipped"
    assert problems[2] == f"{metrics}:21: step True is not a whole number >= 0: skipped"
    text = CliRunner().invoke(app, ["health", str(run)], env={"COLUMNS": "400"}).output  # the table names them too
    assert f"skipped {metrics}:11: a JSON list, not an object" in text


def test_health_on_a_file_truncated_mid_line(run):
    metrics = run / "metrics.jsonl"
    lines = metrics.read_bytes().split(b"\n")
    metrics.write_bytes(b"\n".join(lines[:10]) + b"\n" + lines[10][: len(lines[10]) // 2])  # 10 lines + half
    out = _health(run)
    assert out["steps"] == list(range(1, 10))  # lines 2..10 are steps 1..9
    assert out["problems"] == [f"{metrics}:11: incomplete last line (being written, or cut off by a crash): skipped"]


def test_watch_state_names_garbled_metrics_and_events_lines(run):
    _set_line(run / "metrics.jsonl", 3, b'{"step": 2, "reward/mean": 0.1')  # cut, then continued
    _set_line(run / "events.jsonl", 2, b"\xff\xfe")
    state = RunState(run)
    assert state.poll()
    assert [r["step"] for r in state.history] == [0, 1] + list(range(3, 40))
    assert len(state.events) == 10
    assert [p.split(": ")[0] for p in state.problems] == [f"{run}/metrics.jsonl:3", f"{run}/events.jsonl:2"]
    with open(run / "metrics.jsonl", "a") as f:  # more lines: numbering goes on from the last read
        f.write('{"step": 40}\nnot json\n')
    state.poll()
    # json reads "n" as the start of null; "o" breaks it, so the error points at the line's start
    assert state.problems[1] == f"{run}/metrics.jsonl:42: not JSON (Expecting value: line 1 column 1 (char 0)): skipped"


def test_watch_shows_skipped_lines_and_survives_its_run_directory_being_deleted(run):
    pytest.importorskip("textual")
    from test_tui_app import header_text, until

    from ragen_cli.tui.app import WatchApp

    _set_line(run / "metrics.jsonl", 6, b"oops")

    async def go():
        app = WatchApp([run], interval=0.05)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: "step 39" in header_text(app))
            assert f"skipped {run}/metrics.jsonl:6: not JSON" in header_text(app)
            shutil.rmtree(run)
            await until(pilot, lambda: "the run directory was deleted" in header_text(app))
            assert "step 39" in header_text(app) and app.is_running  # what was read stays on screen
            await pilot.press("3")  # trajectories of a deleted run: nothing to list, no crash
            await pilot.pause()
            assert app.is_running
            await pilot.press("q")
        return app.return_code

    assert asyncio.run(go()) == 0


WRITE_LIMITED = """
import resource, signal, sys
from ragen_cli.monitor.rundir import RunDir
run, kind, limit = RunDir(sys.argv[1]), sys.argv[2], int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    if kind == "metrics":
        run.write_metrics(40, {"reward/mean": 0.123456789, "reward/std": 0.5})
    else:
        run.write_event("checkpoint", 40, path="checkpoints/step-40")
    print("written")
except OSError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


@pytest.mark.parametrize("kind", ["metrics", "events"])
def test_a_file_size_limit_mid_line_leaves_the_log_as_it_was(run, kind):
    """The limit lets the line start (20 bytes past the file's end) but not finish: a short
    write, then EFBIG. The file keeps exactly its old bytes, and a later write is whole."""
    log = run / f"{kind}.jsonl"
    before = log.read_bytes()
    out = subprocess.run([sys.executable, "-c", WRITE_LIMITED, str(run), kind, str(len(before) + 20)],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    assert out == (f"JsonlWriteError: [Errno 27] cannot append a line to {log} (File too large); "
                   "the file is as it was before this write"), out
    assert log.read_bytes() == before
    RunDir(run).write_metrics(40, {"reward/mean": 1.0}) if kind == "metrics" else RunDir(run).write_event("end", 40)
    records, problems = (RunDir(run).read_metrics_checked() if kind == "metrics"
                         else (RunDir(run).read_events(), []))
    assert problems == [] and len(records) == (41 if kind == "metrics" else 12)
    assert log.read_bytes().count(b"\n") == before.count(b"\n") + 1
