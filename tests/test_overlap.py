"""Rollouts that overlap the update (`rollout.max_staleness`, train/ahead.py): version bookkeeping,
the staleness bound, the correction's weights against hand-computed values, the spec's rules,
the Plan's decisions for CPU and CUDA, and real vLLM runs (tests/overlap_run.py): the lag of each
step's batch, the batch in each checkpoint, and a resumed k = 1 run equal to the uninterrupted one."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"


# ----------------------------------------------------------------------------- versions, bound
def test_lag_and_the_staleness_bound():
    from ragen_cli.train.ahead import is_stale, version_lag

    assert version_lag(sampled=4, current=5) == 1
    # k = 1: the batch rolled out during the last update (lag 1) is kept; k + 1 = 2 versions old is dropped
    assert not is_stale(4, 5, max_staleness=1) and is_stale(3, 5, max_staleness=1)
    assert not is_stale(5, 5, max_staleness=0) and is_stale(4, 5, max_staleness=0)
    assert not is_stale(3, 5, max_staleness=2) and is_stale(2, 5, max_staleness=2)
    # a rollback made version 3: a batch drawn by version 1 (lag 2, within k = 2) came from the
    # abandoned branch; one drawn by version 3 itself did not
    assert is_stale(1, 3, max_staleness=2, rollback_version=3) and not is_stale(3, 4, 2, rollback_version=3)


def test_overlap_seconds():
    from ragen_cli.train.ahead import overlap_seconds

    assert overlap_seconds((0.0, 4.0), (1.0, 3.0)) == 2.0  # one inside the other
    assert overlap_seconds((0.0, 3.0), (2.0, 5.0)) == 1.0
    assert overlap_seconds((0.0, 1.0), (2.0, 3.0)) == 0.0  # one after the other


def test_one_batch_in_flight_and_its_error_is_raised_by_the_step_that_takes_it():
    from ragen_cli.train.ahead import Ahead, RunAhead

    ahead = RunAhead()
    assert ahead.join() == 0.0 and ahead.take() is None
    ahead.launch(Ahead(step=2, version=0, seeds=[10, 11]), lambda: (time.sleep(0.3) or ["a", "b"], 0.3))
    with pytest.raises(RuntimeError, match="already in flight"):
        ahead.launch(Ahead(step=3, version=0, seeds=[12]), lambda: ([], 0.0))
    assert ahead.join() > 0.1  # it waited for the rollout
    batch = ahead.take()
    assert (batch.step, batch.version, batch.seeds, batch.trajs, batch.seconds) == (2, 0, [10, 11], ["a", "b"], 0.3)
    assert batch.span[1] - batch.span[0] >= 0.3 and ahead.take() is None

    def broken():
        raise KeyError("an env failed")

    ahead.launch(Ahead(step=3, version=1, seeds=[12]), broken)
    ahead.join()  # the step that launched it finishes: the error waits for the next step
    assert ahead.pending.error is not None
    with pytest.raises(KeyError, match="an env failed"):
        ahead.take()
    assert ahead.pending is None


def test_a_batch_survives_the_checkpoint_file_field_by_field(tmp_path):
    from ragen_cli.rollout.types import Trajectory, TurnRecord
    from ragen_cli.train.ahead import AHEAD_FILE, Ahead, ahead_to_json, read_ahead

    turn = TurnRecord(obs="What is 3 * 4?", reply="<tool_call>{}</tool_call>", actions=["x"], reward=-0.1,
                      format_ok=True, valid=0, executed=1,
                      tool_calls=[{"name": None, "arguments": None, "result": "Error", "status": "invalid"}])
    traj = Trajectory(input_ids=[1, 2, 3, 4], loss_mask=[0, 0, 1, 1], old_logprobs=[0.0, 0.0, -0.1234567890123, -2.5],
                      turn_end=[3], turn_rewards=[-0.1], answer_mask=[0, 0, 1, 0], turn_start=[2], turn_prompts=[None],
                      task_reward=0.0, group=1, seed=7, env_name="tools", turns=[turn],
                      info={"tool_stats": {"calls": 0, "invalid": 1, "errors": 0, "per_tool": {}}}, policy_version=3)
    (tmp_path / AHEAD_FILE.format(rank=0)).write_text(
        ahead_to_json(Ahead(step=5, version=3, seeds=[7, 8], trajs=[traj], seconds=1.5)))
    back = read_ahead(tmp_path, rank=0)
    assert (back.step, back.version, back.seeds, back.seconds) == (5, 3, [7, 8], 1.5)
    assert back.trajs == [traj]  # every field, the sampler's log-probs to the last bit
    assert read_ahead(tmp_path, rank=1) is None


def test_the_correction_of_a_lagged_token_against_hand_values():
    """A token the previous version drew with p = 0.25 that the trainer now gives p = 0.5 weighs
    0.5 / 0.25 = 2; one drawn with p = 0.2 (ratio 2.5) is truncated to the cap 2; one the trainer
    now finds less likely (0.3 / 0.6) weighs 0.5. Masked tokens do not count in the stats."""
    import torch

    from ragen_cli.algos.losses import rollout_is_weights

    trainer = torch.log(torch.tensor([[0.5, 0.5, 0.3, 0.9]]))
    sampler = torch.log(torch.tensor([[0.25, 0.2, 0.6, 0.1]]))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    weights, stats = rollout_is_weights(trainer, sampler, mask, cap=2.0)
    assert torch.allclose(weights[0, :3], torch.tensor([2.0, 2.0, 0.5]), atol=1e-6)
    assert math.isclose(float(stats["is_weight_mean"]), 4.5 / 3, rel_tol=1e-6)
    assert math.isclose(float(stats["is_truncated_frac"]), 1 / 3, rel_tol=1e-6)


# ----------------------------------------------------------------------------- spec and Plan
def test_the_spec_refuses_what_cannot_overlap():
    from ragen_cli.spec.loader import SpecError, load_spec

    for sets, where, message in [
        (["rollout.backend=hf"], "rollout.max_staleness", "needs the vLLM backend"),
        (["rollout.sleep=on"], "rollout.sleep", "the engine generates during the update"),
        (["algorithm.rollout_is=off"], "algorithm.rollout_is", "the importance weights are what correct for it"),
    ]:
        with pytest.raises(SpecError) as err:
            load_spec(SPEC, ["rollout.max_staleness=1"] + sets)
        assert where in str(err.value) and message in str(err.value), str(err.value)
    assert load_spec(SPEC, ["rollout.max_staleness=1"]).rollout.stale == "drop"


@pytest.mark.parametrize("device,k,sleeps,during,cap", [
    ("cpu", 0, False, "idle", None),        # fp32, on-policy: no correction
    ("cpu", 1, False, "generates", 2.0),    # the lag needs the correction, fp32 or not
    ("cuda", 0, True, "sleeps", 2.0),       # bf16 on the GPU: vLLM sleeps during the update, as today
    ("cuda", 1, False, "generates", 2.0),   # the engine generates during the update: awake, beside the trainer
])
def test_the_plan_says_what_the_engine_does_during_the_update(device, k, sleeps, during, cap):
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec

    precision = ("fp32", "test") if device == "cpu" else ("bf16", "test")
    spec = load_spec(SPEC, [f"rollout.max_staleness={k}", "rollout.backend=vllm"])
    plan = compile_plan(spec, device=device, cpu_count=2, precision=precision)
    assert plan.max_staleness == k and plan.vllm_sleep is sleeps
    assert plan.placement["rollout"]["during_update"] == during
    assert ("enable_sleep_mode" in plan.vllm) is sleeps
    assert plan.rollout_is_cap == cap


# ----------------------------------------------------------------------------- the staleness rule in a step
@pytest.fixture(scope="module")
def hf_run(tiny_model_dir):
    """A `Run` with what `stages.step_rollouts` reads: the spec (k = 1), a state, the HF backend on
    tiny-random (the rule does not depend on the engine), and a batch held ahead."""
    import types

    import torch
    from transformers import AutoModelForCausalLM

    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.ahead import RunAhead
    from ragen_cli.train.runtime import RunState

    spec = load_spec(SPEC, ["model.name=tiny-random", "env.train.groups=2", "env.train.group_size=2",
                            "rollout.max_tokens_per_turn=4", "rollout.max_staleness=1"])
    model_dir = resolve_model("tiny-random", "float32")
    tok = load_tokenizer(Path(model_dir), spec.model)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    return types.SimpleNamespace(spec=spec, backend=HFBackend(model, tok), tokenizer=tok, rank=0, world=1,
                                 state=RunState(cursor=100, version=5), ahead=RunAhead())


@pytest.mark.parametrize("sampled,stale,kept", [(4, "drop", True), (3, "drop", False), (3, "correct", True)])
def test_a_batch_k_plus_1_versions_old_is_dropped_and_rolled_out_again(hf_run, sampled, stale, kept):
    from ragen_cli.train import stages
    from ragen_cli.train.ahead import Ahead

    run = hf_run
    run.state.cursor, run.state.version = 100, 5
    run.spec = run.spec.model_copy(update={"rollout": run.spec.rollout.model_copy(update={"stale": stale})})
    held, seconds = stages.local_rollouts(run, [40, 41], 7, sampled)
    run.ahead.pending = Ahead(step=7, version=sampled, seeds=[40, 41], trajs=held, seconds=seconds)
    trajs, metrics = stages.step_rollouts(run, 7)
    if kept:  # the batch held ahead is trained on: its seeds were counted when it finished
        assert trajs is held and run.state.cursor == 100
        assert [t.policy_version for t in trajs] == [sampled] * 4
        assert metrics["sync/version_lag"] == 5 - sampled and metrics["sync/stale_dropped_frac"] == 0.0
    else:  # k + 1 = 2 versions old: dropped, counted, rolled out now from the cursor with the current weights
        assert [t.seed for t in trajs] == [100, 100, 101, 101] and run.state.cursor == 102
        assert [t.policy_version for t in trajs] == [5] * 4
        assert metrics["sync/version_lag"] == 0.0 and metrics["sync/stale_dropped_frac"] == 1.0


@pytest.mark.parametrize("stale,kept", [("drop", False), ("correct", True)])
def test_after_a_rollback_with_k2_the_abandoned_policy_s_batch_follows_stale(hf_run, stale, kept):
    """k = 2. Step 1 syncs (version 1); during step 2's update the engine rolls out the next
    batch with version 1; step 2's sync makes version 2 and its health verdict rolls back to step
    1's checkpoint: version 3, `rollback_version` 3. The redone step 2 takes that batch: lag
    3 - 1 = 2 is within k = 2, but it was drawn by the abandoned branch. drop: rolled out again now
    by version 3 from the cursor (seeds 100, 101); correct: trained on, lag 2."""
    from ragen_cli.train import stages
    from ragen_cli.train.ahead import Ahead

    run = hf_run
    run.state.cursor, run.state.version, run.state.rollback_version = 100, 3, 3
    rollout = run.spec.rollout.model_copy(update={"stale": stale, "max_staleness": 2})
    run.spec = run.spec.model_copy(update={"rollout": rollout})
    try:
        held, seconds = stages.local_rollouts(run, [40, 41], 3, 1)
        run.ahead.pending = Ahead(step=3, version=1, seeds=[40, 41], trajs=held, seconds=seconds)
        trajs, metrics = stages.step_rollouts(run, 2)
    finally:
        run.state.rollback_version = 0
    if kept:
        assert trajs is held and run.state.cursor == 100
        assert metrics["sync/version_lag"] == 2.0 and metrics["sync/stale_dropped_frac"] == 0.0
    else:
        assert [t.seed for t in trajs] == [100, 100, 101, 101] and run.state.cursor == 102
        assert [t.policy_version for t in trajs] == [3] * 4
        assert metrics["sync/version_lag"] == 0.0 and metrics["sync/stale_dropped_frac"] == 1.0


def test_a_hung_rollout_is_given_up_on_with_a_clear_error():
    from ragen_cli.train.ahead import Ahead, RunAhead

    ahead, release = RunAhead(), __import__("threading").Event()
    ahead.launch(Ahead(step=4, version=2, seeds=[1]), lambda: (release.wait(10), ([], 0.0))[1])
    waited = ahead.join(timeout=0.2)
    assert 0.2 <= waited < 5
    with pytest.raises(TimeoutError, match="did not finish the batch of step 4 within 0.2 s after the update"):
        ahead.take()
    release.set()


# ----------------------------------------------------------------------------- real vLLM runs
@pytest.fixture(scope="module")
def overlap_runs(tmp_path_factory, tiny_model_dir) -> Path:
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("overlap")
    script = Path(__file__).with_name("overlap_run.py")
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=1200)
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and [r["error"] for r in results] == [None, None, None], (results, proc.stderr[-3000:])
    return out


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _records(run: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (run / "trajectories" / f"step-{step}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_each_update_trains_on_the_batch_rolled_out_during_the_last_one(overlap_runs):
    """k = 1 on a real engine: step 1 rolls out its own batch (lag 0); steps 2 and 3 train on the
    batch rolled out during the update before (lag 1, drawn by version 0 and 1), with importance
    weights that are no longer all 1; each checkpoint holds the next step's batch."""
    whole = overlap_runs / "whole"
    metrics = [m for m in _metrics(whole) if m["step"] > 0]
    assert [m["sync/version_lag"] for m in metrics] == [0.0, 1.0, 1.0]
    assert [m["sync/stale_dropped_frac"] for m in metrics] == [0.0, 0.0, 0.0]
    assert all(m["timing/overlap_s"] > 0 for m in metrics)
    assert metrics[0]["actor/is_weight_mean"] == 1.0  # fp32, on-policy: trainer and engine agree
    assert all(abs(m["actor/is_weight_mean"] - 1.0) > 1e-4 for m in metrics[1:])
    assert [{r["policy_version"] for r in _records(whole, s)} for s in (1, 2, 3)] == [{0}, {0}, {1}]
    for step in (1, 2, 3):
        held = json.loads((whole / "checkpoints" / f"step-{step}" / "ahead-0.json").read_text())
        assert (held["step"], held["version"]) == (step + 1, step - 1)
    # the sequential loop: each batch is drawn by the weights of the step before
    sequential = overlap_runs / "sequential"
    assert [{r["policy_version"] for r in _records(sequential, s)} for s in (1, 2, 3)] == [{0}, {1}, {2}]
    assert "sync/version_lag" not in _metrics(sequential)[-1]
    assert not (sequential / "checkpoints" / "step-1" / "ahead-0.json").exists()


@pytest.mark.slow
def test_a_resumed_k1_run_equals_the_uninterrupted_one(overlap_runs):
    """1 step, then `--resume` to 3, with k = 1: the batch rolled out during step 1's update comes
    back from the checkpoint, so steps 2 and 3 train on the same trajectories and end with the
    same adapter as the run that never stopped."""
    from test_train_e2e import assert_same_step

    whole, split = overlap_runs / "whole", overlap_runs / "split"
    for step in (2, 3):
        assert _records(split, step) == _records(whole, step)
    assert_same_step(whole, split, 3, parts=("model",))
    a, b = _metrics(whole)[-1], _metrics(split)[-1]
    for key in ("actor/policy_loss", "actor/entropy", "actor/grad_norm", "actor/is_weight_mean"):
        assert a[key] == b[key], key


def test_the_rollout_thread_leaves_the_trainer_s_generator_alone():
    """`kept_rng` restores torch's generators after a rollout on the main thread; in the thread
    that overlaps the update it must not, or it would rewind the draws the update (LoRA dropout)
    made meanwhile."""
    import threading

    import torch

    from ragen_cli.rollout.rng import kept_rng

    inside, drawn = threading.Event(), threading.Event()

    def rollout():
        with kept_rng():
            inside.set()
            drawn.wait(10)

    torch.manual_seed(0)
    thread = threading.Thread(target=rollout)
    thread.start()
    inside.wait(10)
    first = torch.rand(1)  # the update draws while the rollout runs
    drawn.set()
    thread.join()
    second = torch.rand(1)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(2), torch.cat([first, second]))  # not rewound to before the rollout
    with kept_rng():  # on the main thread the guard still restores
        torch.rand(5)
    torch.manual_seed(0)
    expected = torch.rand(3)[2:]
    torch.manual_seed(0)
    torch.rand(2)
    with kept_rng():
        torch.rand(5)
    assert torch.equal(torch.rand(1), expected)


def test_an_env_info_json_cannot_hold_still_saves():
    import numpy as np

    from ragen_cli.rollout.types import Trajectory
    from ragen_cli.train.ahead import Ahead, ahead_to_json

    class Thing:
        def __str__(self) -> str:
            return "a thing"

    traj = Trajectory(info={"grid": np.arange(4).reshape(2, 2), "score": np.float32(0.5), "seen": {"b", "a"},
                            "obj": Thing()})
    info = json.loads(ahead_to_json(Ahead(step=1, version=0, seeds=[1], trajs=[traj])))["trajs"][0]["info"]
    assert info == {"grid": [[0, 1], [2, 3]], "score": 0.5, "seen": ["a", "b"], "obj": "a thing"}
