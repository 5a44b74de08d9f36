"""A rollout that fails while it overlaps the update (`rollout.max_staleness`, train/ahead.py), in
a real 2-process run: 2 CPU ranks through the Plan's `deepspeed` launch, each with its own vLLM
engine, k = 1, and an env (tests/flaky_bandit.py) that raises on rank 1 only, in the batch rolled
out during step 2's update. Every rank must learn of it right after that update, save step 2
together and stop with the env's own error, before the sync, validation or checkpoint use the
engine; none may hang (the run has a time limit). A resume then rolls the failed seeds out again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragen_cli.train.checkpoint import checkpoint_problems
from test_train_multiproc import train_two

TESTS = Path(__file__).resolve().parent


@pytest.mark.slow
def test_a_rollout_thread_failure_on_one_rank_saves_and_stops_every_rank(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    sets = ["rollout.backend=vllm", "rollout.max_staleness=1", "env.train.name=flaky_bandit:FlakyBandit",
            "train.steps=3", "train.lr_actor=1e-2"]
    proc = train_two(tmp_path, "fail", sets, timeout=300)  # a rank that hangs fails the test here
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0, console[-3000:]
    run = tmp_path / "fail"
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    # step 1 finished; step 2's update ran while rank 1's thread failed on the batch for step 3
    [error] = [e for e in events if e["kind"] == "error"]
    said = ("AheadFailure: the rollout of step 3's batch, during step 2's update, failed on rank 1: EnvServerGone: "
            "flaky bandit on rank 1: the env server went away at episode 5")
    assert error["step"] == 2 and error["error"] == said and error["checkpoint"] == str(run / "checkpoints" / "step-2")
    assert "ragen: stopping: " + said[len("AheadFailure: "):] in console
    # each rank stopped with the same AheadFailure (its traceback), the failing one raised from its
    # thread's own error ("The above exception was the direct cause ...")
    assert console.count("ragen_cli.train.ahead.AheadFailure: " + said[len("AheadFailure: "):]) == 2
    assert console.count("flaky_bandit.EnvServerGone: flaky bandit on rank 1: the env server went away") == 1
    # nothing after the update used the engine: no sync record, no metrics line for step 2
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    # the save is collective (barriers): it ended, so both ranks took part; whole, with no batch ahead
    ckpt = run / "checkpoints" / "step-2"
    state = json.loads((ckpt / "state.json").read_text())
    # seeds 10000-10001 (step 1) and 10002-10003 (rolled out during step 1's update) were counted;
    # 10004-10005, the failed batch's, were not: a resume rolls them out again
    assert (state["step"], state["cursor"], state["version"]) == (2, 10004, 1)
    assert not list(ckpt.glob("ahead-*.json"))
    assert checkpoint_problems(ckpt) == []

    # after the fix, the run resumes from step 2: step 3 rolls the failed seeds out now (lag 0)
    again = train_two(tmp_path, "fail", [], timeout=300, resume=True)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    seeds = {json.loads(line)["seed"] for line in (run / "trajectories" / "step-3.jsonl").read_text().splitlines()}
    assert seeds == {10004, 10005}
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert (last["step"], last["sync/version_lag"]) == (3, 0.0)
