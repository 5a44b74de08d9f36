"""bench/overlap.py `best_shared`: the shortest time two jobs sharing two cores can take, which
bounds what rollouts overlapping the update can give on a machine without cores to spare
(docs/experiments/overlap.md, "The most two shared cores can give")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from overlap import best_shared  # noqa: E402


def test_side_by_side_until_the_shorter_job_ends_when_a_second_core_helps_little():
    # rollout 15 s on one core, 8 on two; trainer 6 and 4.5: side by side for 6 s (the trainer
    # done, 6/15 = 0.4 of the rollout), then 0.6 of the rollout on both cores: 6 + 0.6 * 8 = 10.8,
    # against 8 + 4.5 = 12.5 one after the other.
    assert best_shared(15.0, 8.0, 6.0, 4.5) == pytest.approx(10.8)


def test_one_after_the_other_when_two_cores_run_each_job_twice_as_fast():
    # r2/r1 + t2/t1 = 0.5 + 0.5 = 1: every schedule takes 8 + 5 = 13 s
    assert best_shared(16.0, 8.0, 10.0, 5.0) == pytest.approx(13.0)
    # faster than 2x on two cores (0.4 + 0.42 < 1): side by side would take 12 + 0.4 * 8 = 15.2
    assert best_shared(20.0, 8.0, 12.0, 5.0) == pytest.approx(13.0)


def test_no_schedule_beats_half_the_one_core_work_nor_the_longer_job_on_both_cores():
    for r1, r2, t1, t2 in [(15.0, 8.0, 6.0, 4.5), (12.8, 6.8, 24.9, 19.6), (9.0, 8.0, 9.0, 8.0)]:
        best = best_shared(r1, r2, t1, t2)
        assert best >= (r1 + t1) / 2 - 1e-9
        assert best >= max(r2, t2) - 1e-9
        assert best <= r2 + t2 + 1e-9
