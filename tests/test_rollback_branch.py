"""A health rollback abandons a branch (runtime.rollback, checkpoint.abandon_after): the
checkpoints of the steps after the restored one are deleted and the restored step is saved again
with the intervention's settings, so a resume after a crash continues the restored branch. A real
run: tiny-random, real DeepSpeed, HF rollouts, the Echo Trap alarm made to fire as in
tests/test_train_health_e2e.py, and a crash from a real fault (tests/flaky_bandit.py: the env's
reset raises, an error the loop does not save on)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragen_cli.train.checkpoint import abandon_after, latest_checkpoint, list_checkpoints
from test_train_e2e import run_tiny
from test_train_health_e2e import COLLAPSE, events

TESTS = Path(__file__).resolve().parent


def test_abandon_after_deletes_the_later_steps_only(tmp_path):
    for k in (1, 2, 3, 5):
        (tmp_path / f"step-{k}").mkdir()
        (tmp_path / f"step-{k}" / "state.json").write_text("{}")
    (tmp_path / ".old-step-3").mkdir()  # a killed save's leftover, in the way of the rename
    gone = abandon_after(tmp_path, 2)
    assert [p.name for p in gone] == ["step-3", "step-5"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-1", "step-2"]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-2" and abandon_after(tmp_path, 2) == []


@pytest.mark.slow
def test_a_resume_after_a_rollback_continues_the_restored_branch(tmp_path, monkeypatch):
    """Greedy rollouts collapse from step 2 (test_train_health_e2e); checkpoints every step; an
    intervention rolls back to step 1 (the one healthy checkpoint) and alarms within 2 steps of it
    are only logged. Steps 1, 2 -> rollback to 1; 2, 3 (saved while collapsed: not rollback targets),
    4 -> rollback to 1 again, which abandons step-2 and step-3. Each step starts 2 groups x 2
    episodes: the 21st episode, the first after the second rollback, crashes the run."""
    import flaky_bandit

    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setattr(flaky_bandit, "started", 0)
    monkeypatch.setenv("FLAKY_RANK", "0")
    monkeypatch.setenv("FLAKY_AFTER", "20")
    out = tmp_path / "rb"
    sets = COLLAPSE + ["env.train.name=flaky_bandit:FlakyBandit", "env.train.groups=2", "train.steps=4",
                       "checkpoint.every=1", "checkpoint.keep=5", "monitor.health.action=intervene",
                       "monitor.health.cooldown=2", "monitor.health.rollback=true", "monitor.health.lr_factor=0.5"]
    with pytest.raises(flaky_bandit.EnvServerGone, match="at episode 21"):
        run_tiny(out, sets)
    ev = events(out)
    rollbacks = [(e["step"], e["to_step"], e["removed"]) for e in ev if e["kind"] == "rollback"]
    assert rollbacks == [(2, 1, []), (4, 1, ["step-2", "step-3"])]
    # each rollback saved step 1 again; the redone steps 2 and 3 were saved, then abandoned
    assert [e["step"] for e in ev if e["kind"] == "checkpoint"] == [1, 1, 2, 3, 1]
    ckpts = out / "checkpoints"
    assert [p.name for _, p in list_checkpoints(ckpts)] == ["step-1"]
    state = json.loads((ckpts / "step-1" / "state.json").read_text())
    # the restored weights with the branch's settings: 2 interventions (lr x 0.5 each), the seeds
    # of the 5 steps run (10000 + 5 x 2), versions: 5 syncs + 2 rollbacks, the last rollback's 7
    assert (state["step"], state["interventions"], state["last_intervention_step"]) == (1, 2, 4)
    assert state["lr_scale"] == 0.25
    assert (state["cursor"], state["version"], state["rollback_version"]) == (10010, 7, 7)

    monkeypatch.setenv("FLAKY_AFTER", "1000")
    summary = run_tiny(out, sets, resume=True)
    start = [e for e in events(out) if e["kind"] == "start"][-1]
    assert start["resume"] is True and start["step"] == 1 and summary["step"] == 4
    seeds = {json.loads(line)["seed"] for line in (out / "trajectories" / "step-2.jsonl").read_text().splitlines()}
    assert seeds == {10010, 10011}  # fresh seeds, as the uninterrupted run would have taken
