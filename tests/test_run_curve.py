"""bench/run_curve.py: which metrics a key draws, and the PNG it writes from a committed run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("run_curve", ROOT / "bench" / "run_curve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_points_match_a_star_and_skip_missing_steps():
    rc = _bench()
    recs = [{"step": 0, "val/a/success": 0.1, "val/b/success": 0.2},
            {"step": 1, "reward/task_mean": 0.0},
            {"step": 5, "val/a/success": 0.3, "val/b/success": None, "reward/task_mean": 0.5}]
    assert rc.points(recs, "val/*/success") == {"val/a/success": [(0, 0.1), (5, 0.3)], "val/b/success": [(0, 0.2)]}
    assert rc.points(recs, "reward/task_mean") == {"reward/task_mean": [(1, 0.0), (5, 0.5)]}
    assert rc.points(recs, "nothing/*") == {}


def test_draws_the_committed_webshop_run(tmp_path):
    rc = _bench()
    out = tmp_path / "c.png"
    assert rc.main([str(ROOT / "data" / "webshop-window"), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
