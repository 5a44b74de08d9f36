"""bench/pair_evals.py: two separately made eval outputs paired on (seed, sample)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from pair_evals import records, report  # noqa: E402


def write(out: Path, rows: list[tuple[int, bool, float]]) -> Path:
    (out / "trajectories").mkdir(parents=True)
    (out / "trajectories" / "step-0.jsonl").write_text(
        "".join(json.dumps({"seed": s, "success": ok, "task_reward": r}) + "\n" for s, ok, r in rows))
    return out


def test_pairs_by_seed_and_counts_the_one_sided_episodes(tmp_path):
    # A solves seeds 1 and 3, B solves 1, 2 and 4 (written in another order): A-only {3},
    # B-only {2, 4}; exact McNemar on 1 vs 2 discordant pairs: p = min(1, 2 * P(X <= 1 | 3, 1/2)) = 1.
    a = write(tmp_path / "a", [(1, True, 1.0), (2, False, 0.5), (3, True, 1.0), (4, False, 0.0)])
    b = write(tmp_path / "b", [(4, True, 1.0), (3, False, 0.5), (2, True, 1.0), (1, True, 1.0)])
    r = report("a vs b", [(records(a), records(b))])
    assert (r["episodes"], r["A"], r["B"], r["A_only"], r["B_only"]) == (4, 0.5, 0.75, 1, 2)
    assert r["mcnemar_p"] == 1.0
    # paired score differences B - A: 0, 0.5, -0.5, 1.0 -> mean 0.25
    assert r["score_diff"][0] == 0.25


def test_pooling_keeps_each_pair_s_seeds_apart(tmp_path):
    # the same seed 1 in two pairs: pooled, 2 episodes, A solves the first only, B the second only
    a1 = write(tmp_path / "a1", [(1, True, 1.0)])
    b1 = write(tmp_path / "b1", [(1, False, 0.0)])
    a2 = write(tmp_path / "a2", [(1, False, 0.0)])
    b2 = write(tmp_path / "b2", [(1, True, 1.0)])
    r = report("pooled", [(records(a1), records(b1)), (records(a2), records(b2))])
    assert (r["episodes"], r["A_only"], r["B_only"], r["A"], r["B"]) == (2, 1, 1, 0.5, 0.5)
    assert r["score_diff"][0] == 0.0  # differences -1 and +1
