"""Per-turn training rows (`rollout.update_context: window`, issue 23): hand-made trajectories for
the row layout and the advantage mapping; the real driver for what it records; the tiny-random
model generating (HF backend) for the claim that matters, that every trained token's log-prob is
computed under the prompt it was sampled from; and a spec check."""

from __future__ import annotations

import pytest
import torch

from ragen_cli.rollout.types import Trajectory, TurnRecord
from ragen_cli.train.batch import collate
from ragen_cli.train.turn_rows import turn_rows


def two_turn(group: int, window: list[int] | None, rewards=(0.5, 1.0)) -> Trajectory:
    """ids 0..9: prompt 10 11 12, reply 20 21 (turn 1), closing 30, prompt 13 14, reply 22 (turn 2).
    Log-probs -1, -2 (turn 1) and -3 (turn 2); the second turn's sampler prompt is `window`."""
    ids = [10, 11, 12, 20, 21, 30, 13, 14, 22]
    mask = [0, 0, 0, 1, 1, 0, 0, 0, 1]
    logp = [0, 0, 0, -1.0, -2.0, 0, 0, 0, -3.0]
    rec = TurnRecord(obs="", reply="", actions=[], reward=0.0, format_ok=True)
    return Trajectory(input_ids=ids, loss_mask=mask, old_logprobs=logp, answer_mask=[0, 0, 0, 1, 1, 0, 0, 0, 1],
                      turn_start=[3, 8], turn_end=[4, 8], turn_prompts=[None, window],
                      turn_rewards=list(rewards), turns=[rec, rec], group=group)


def test_rows_hold_each_turns_sampler_prompt_and_reply():
    a = two_turn(0, window=[10, 99, 13, 14])  # turn 2 sampled under a windowed prompt
    b = two_turn(0, window=None)  # window still covered the history: the prefix itself
    for t in (a, b):
        t.check()
    rows, keys, rowmap = turn_rows([a, b])
    # order (group, turn, trajectory): a1, b1, a2, b2
    assert [r.input_ids for r in rows] == [
        [10, 11, 12, 20, 21], [10, 11, 12, 20, 21], [10, 99, 13, 14, 22], [10, 11, 12, 20, 21, 30, 13, 14, 22]]
    assert rows[2].loss_mask == [0, 0, 0, 0, 1] and rows[2].old_logprobs == [0, 0, 0, 0, -3.0]
    assert rows[0].loss_mask == [0, 0, 0, 1, 1] and rows[0].turn_rewards == [0.5]
    assert rows[3].turn_end == [8] and rows[3].turn_start == [8] and rows[2].answer_mask == [0, 0, 0, 0, 1]
    assert keys == [0, 0, 1, 1]  # same group and turn: may share a prefix
    # shifted grids: episodes 9 tokens -> T 8; rows: longest 9 -> T 8
    assert rowmap.full_shape == (2, 8) and rowmap.rows_shape == (4, 8)
    # a's turn 2: token 22 is shifted column 7 in the episode and 3 in its row
    assert [(s.row, s.traj, s.row_col, s.full_col, s.n) for s in rowmap.spans] == [
        (0, 0, 2, 2, 2), (1, 1, 2, 2, 2), (2, 0, 3, 7, 1), (3, 1, 7, 7, 1)]
    for r in rows:
        r.check()
    batch = collate(rows, prefix_group=keys)
    assert batch.prefix_group == keys and batch.rows([2, 3]).prefix_group == [1, 1]
    # the rows' sampling log-probs are the episode's, moved to the rows' columns
    episodes = collate([a, b])
    assert torch.equal(rowmap.to_rows(episodes.sample_logp), batch.sample_logp)
    assert torch.equal(rowmap.to_full(batch.mask), episodes.mask)


def test_advantages_come_from_the_episode_and_land_on_its_turn_rows():
    # GRPO (mean only) in one group: episode rewards 1.5 and 0.0 -> advantages +0.75 and -0.75 on
    # every sampled token of each episode, so on every reply token of its two rows.
    from ragen_cli.spec.models import RunSpec
    from ragen_cli.train import stages

    spec = RunSpec.model_validate({"name": "t", "env": {"train": {"name": "frozenlake"}},
                                   "rollout": {"context_window": 1, "update_context": "window"},
                                   "algorithm": {"adv_estimator": "grpo", "grpo_norm_std": False}})
    kept = [two_turn(0, [10, 99, 13, 14], (0.5, 1.0)), two_turn(0, [10, 98, 13, 14], (0.0, 0.0))]
    episodes = collate(kept)
    batch, rowmap = stages.update_rows(True, kept, episodes, world=1)
    adv, _ = stages.advantages(spec, episodes, None, rowmap)
    expect = torch.zeros(4, 4)  # rows a1, b1 (5 tokens -> 4 columns), a2, b2 (5 tokens)
    expect[0, 2:4], expect[1, 2:4], expect[2, 3], expect[3, 3] = 0.75, -0.75, 0.75, -0.75
    assert torch.allclose(adv, expect)
    # GAE: the critic's values come on the rows' grid and are read on the episodes' grid
    values = torch.zeros(4, 4)
    values[0, 2:4], values[2, 3] = torch.tensor([0.1, 0.2]), 0.3
    full = rowmap.to_full(values)
    assert full[0].tolist() == pytest.approx([0, 0, 0.1, 0.2, 0, 0, 0, 0.3]) and full[1].abs().sum() == 0


def test_rows_pad_to_the_process_count_with_rows_that_train_nothing():
    rows, keys, rowmap = turn_rows([two_turn(1, [10, 13, 14]), two_turn(0, [10, 13, 14])], pad_to=3)
    assert len(rows) == 6 and rowmap.rows_shape[0] == 6
    assert [r.group for r in rows[:4]] == [0, 0, 1, 1] and rows[1].input_ids == [10, 13, 14, 22]
    assert all(sum(r.loss_mask) == 0 for r in rows[4:]) and len(set(keys)) == 6
    # a batch whose episodes have no turn (the first prompt did not fit) still gives one row per process
    empty = Trajectory(input_ids=[1, 2, 3], loss_mask=[0, 0, 0], old_logprobs=[0.0] * 3, answer_mask=[0] * 3)
    rows, _, rowmap = turn_rows([empty], pad_to=2)
    assert len(rows) == 2 and rowmap.spans == () and all(sum(r.loss_mask) == 0 for r in rows)


def test_window_update_needs_a_context_window():
    from ragen_cli.spec.checks import check_context
    from ragen_cli.spec.models import RunSpec

    def spec(**rollout):
        return RunSpec.model_validate({"name": "t", "env": {"train": {"name": "webshop"}}, "model": {"max_context": 1000},
                                       "rollout": {"max_turns": 6, "max_tokens_per_turn": 100, "prompt_allowance": 600, **rollout}})

    assert check_context(spec(update_context="window"))[0][0] == "rollout.update_context"
    # full: 6 x 100 + 600 = 1200 > 1000; window 2: 2 x 100 + 600 = 800 fits
    assert "1200 tokens" in check_context(spec(context_window=2))[0][1]
    assert check_context(spec(context_window=2, update_context="window")) == []


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from ragen_cli.models.load import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def test_driver_records_each_turns_prompt_and_the_window_sets_the_overflow_limit(tok):
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec
    from rollout_scripted import ScriptedBackend

    replies = ["<answer>Up</answer>", "<answer>Left</answer>", "<answer>Up</answer>"]
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12, think=False, context_window=1)
    backend = ScriptedBackend(tok, replies)
    [traj] = run_rollouts(backend, tok, EnvRef(name="frozenlake"), [1], 1, rollout, 4096, 0)
    assert len(traj.turns) == 3 and traj.turn_prompts[0] is None
    rows, _, _ = turn_rows([traj])
    for k, row in enumerate(rows):  # each row starts with exactly the prompt of call k
        assert row.input_ids[:row.turn_start[0]] == backend.calls[k][0]
        assert row.input_ids[row.turn_start[0]:] == traj.input_ids[traj.turn_start[k]: traj.turn_end[k] + 1]
    assert traj.turn_prompts[1] == backend.calls[1][0] and traj.turn_prompts[2] == backend.calls[2][0]
    # overflow: a limit between the longest window row and the full trajectory ends the full-update
    # episode early but lets the window-update episode run all three turns
    longest_window = max(len(p) for p in backend.calls[1][0:1] + backend.calls[2][0:1])
    full_turn3 = traj.turn_start[2]  # tokens before turn 3's reply: the full prompt of turn 3
    limit = max(longest_window, len(backend.calls[0][0])) + 12
    assert limit < full_turn3 + 12
    [cut] = run_rollouts(ScriptedBackend(tok, replies), tok, EnvRef(name="frozenlake"), [1], 1, rollout, limit, 0)
    assert cut.overflow and len(cut.turns) < 3
    window = rollout.model_copy(update={"update_context": "window"})
    [whole] = run_rollouts(ScriptedBackend(tok, replies), tok, EnvRef(name="frozenlake"), [1], 1, window, limit, 0)
    assert not whole.overflow and len(whole.turns) == 3 and whole.input_ids == traj.input_ids


@pytest.mark.slow
def test_trained_logprobs_are_the_samplers_under_the_rows_not_under_the_history(tiny_model_dir, tok):
    """The tiny-random model samples 3-turn FrozenLake episodes through the HF backend with a
    window of 1 turn; the trainer's scoring (`batch.score`, shared prefixes on) of the per-turn rows
    gives the sampler's log-probs on every trained token (fp32: within 1e-4, the gap between
    cached generation and one forward), while scoring the full episodes does not on later turns.

    fp32, pinned: which prompt a token is scored under does not depend on precision, and only fp32
    separates the two here. Under the history this random model's log-probs move by at most about
    0.05 nats, while two bf16 evaluations of the same log-prob may differ by 2 x 6 u S (tests/bf16.py;
    S ~ 1.4 here, so ~0.06): in bf16 the wrong prompt would pass as rounding."""
    from ragen_cli.rollout.backend import make_backend
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec, RunSpec
    from ragen_cli.train.batch import score

    spec = RunSpec(name="t", env={"train": {"name": "frozenlake"}}, deepspeed={"precision": "fp32"})
    backend = make_backend("hf", tiny_model_dir, spec)
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=6, think=False, context_window=1,
                          update_context="window")
    trajs = run_rollouts(backend, tok, EnvRef(name="frozenlake"), [1, 2], 2, rollout, 4096, 5)
    assert all(len(t.turns) == 3 for t in trajs)
    rows, keys, _ = turn_rows(trajs)
    batch = collate(rows, prefix_group=keys)
    on = batch.mask.bool()
    trained = score(backend.model, batch, micro=4)[on]
    assert (trained - batch.sample_logp[on]).abs().max() < 1e-4
    # the same tokens scored under the full history: turns 2 and 3 read other prompts
    episodes = collate(trajs)
    full = score(backend.model, episodes, micro=4)
    later = torch.zeros_like(episodes.mask, dtype=torch.bool)
    for b, t in enumerate(trajs):
        later[b, t.turn_start[1] - 1:] = episodes.mask[b, t.turn_start[1] - 1:].bool()
    assert (full[later] - episodes.sample_logp[later]).abs().max() > 1e-2


FL_SPEC = __import__("pathlib").Path(__file__).resolve().parents[1] / "specs" / "frozenlake.yaml"
# tiny-random, 2 groups x 2 rollouts all kept, 3 turns with a 1-turn window: each step trains up to
# 12 turn rows; GAE, so the critic's row values go through the episode grid; 2 mini-batches.
WINDOW = [
    "model.name=tiny-random", "model.lora=null", "env.train.groups=2", "env.train.group_size=2",
    "algorithm.filter.keep_ratio=1.0", "rollout.backend=hf", "rollout.context_window=1",
    "rollout.update_context=window", "train.micro_batch=3", "algorithm.mini_batches=2",
    "algorithm.adv_estimator=gae", "deepspeed.precision=fp32", "env.val.every=0", "checkpoint.every=1",
    "train.lr_actor=1e-3", "train.lr_critic=1e-3",
]


def run_window(out, steps: int, resume: bool = False):
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    spec = load_spec(FL_SPEC, WINDOW + [f"output.dir={out.parent}", f"name={out.name}", f"train.steps={steps}"])
    return train(spec, compile_plan(spec, device="cpu"), out, resume=resume)


@pytest.mark.slow
def test_window_update_trains_and_resumes_exactly(tmp_path):
    """2 steps of per-turn rows through the real DeepSpeed engine train both models, and 1 step +
    resume + 1 step gives bit-identical weights, metrics and trajectories."""
    import math

    from ragen_cli.monitor.rundir import RunDir
    from test_train_e2e import assert_same_step

    run_window(tmp_path / "a", 2)
    run_window(tmp_path / "b", 1)
    run_window(tmp_path / "b", 2, resume=True)
    ra, rb = RunDir(tmp_path / "a").read_metrics(), RunDir(tmp_path / "b").read_metrics()
    assert [r["step"] for r in ra] == [1, 2]
    for r in ra:
        assert r["actor/grad_norm"] > 0 and r["critic/grad_norm"] > 0 and math.isfinite(r["actor/policy_loss"])
        assert r["episode/turns"] > 1  # several turns per episode, so several rows per episode
    for key in ("actor/policy_loss", "critic/value_loss", "actor/entropy", "actor/grad_norm", "reward/mean"):
        assert ra[-1][key] == rb[-1][key], key
    assert_same_step(tmp_path / "a", tmp_path / "b", 2)


def test_the_plan_says_when_the_update_trains_turn_rows():
    from rich.console import Console

    from ragen_cli.compile.plan import Plan, compile_plan
    from ragen_cli.compile.render import sizes_table
    from ragen_cli.spec.loader import load_spec

    specs = FL_SPEC.parent
    webshop = compile_plan(load_spec(specs / "webshop.yaml", []), device="cpu")
    bandit = compile_plan(load_spec(specs / "bandit.yaml", []), device="cpu")
    assert webshop.turn_rows and not bandit.turn_rows
    assert Plan.from_json(webshop.to_json()).turn_rows  # plan.json keeps it (resume reads it)
    console = Console(width=200, record=True)
    console.print(sizes_table(webshop))
    assert "one per turn" in console.export_text()
