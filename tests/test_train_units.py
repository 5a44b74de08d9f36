"""Pure pieces of the trainer, with hand-derived expectations."""

from __future__ import annotations

import pytest
import torch

from ragen_cli.rollout.types import Trajectory
from ragen_cli.train.batch import collate, micro_slices
from ragen_cli.train.checkpoint import list_checkpoints, prune
from ragen_cli.compile.deepspeed_config import unmanaged_accumulation
from ragen_cli.train.stages import sample_seed, step_seeds
from ragen_cli.train.update import Averager, share


def traj(ids, mask, logp, turn_end, rewards, group):
    return Trajectory(input_ids=ids, loss_mask=mask, old_logprobs=logp, turn_end=turn_end,
                      turn_rewards=rewards, group=group)


def test_collate_shifts_onto_the_prediction_grid():
    # row 0: 5 tokens, tokens 2..3 sampled (turn end at 3); row 1: 3 tokens, token 2 sampled.
    a = traj([9, 8, 7, 6, 5], [0, 0, 1, 1, 0], [0, 0, -1.0, -2.0, 0], [3], [1.0], 0)
    b = traj([4, 3, 2], [0, 0, 1], [0, 0, -0.5], [2], [0.5], 1)
    batch = collate([a, b])
    # T+1 = 5 columns of ids; the shifted grid has T = 4: column j is token j+1.
    assert batch.input_ids.tolist() == [[9, 8, 7, 6, 5], [4, 3, 2, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch.mask.tolist() == [[0, 1, 1, 0], [0, 1, 0, 0]]
    assert batch.sample_logp.tolist() == [[0, -1.0, -2.0, 0], [0, -0.5, 0, 0]]
    assert batch.turn_end == [[2], [1]]  # token index - 1
    assert batch.tokens == 8
    sub = batch.rows([1])  # trimmed to its own length: 3 ids, 2 grid columns
    assert sub.input_ids.tolist() == [[4, 3, 2]] and sub.mask.tolist() == [[0, 1]] and sub.group == [1]


def test_collate_empty_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        collate([])


def test_micro_slices():
    assert micro_slices(5, 2) == [[0, 1], [2, 3], [4]]
    assert micro_slices(4, 4) == [[0, 1, 2, 3]]


def test_share_token_mean_and_seq_mean():
    mini = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]], dtype=torch.float32)
    # token-mean: micro-batch = row 0 (3 tokens) of 4 masked tokens -> 3/4
    assert share(mini[:1], mini, "token-mean") == 0.75
    # seq-mean: rows with tokens: micro has 1 of the 2 non-empty rows (row 2 is empty) -> 1/2
    assert share(mini[:1], mini, "seq-mean-token-mean") == 0.5
    assert share(mini[2:], mini, "seq-mean-token-sum") == 0.0
    assert share(torch.zeros(1, 3), torch.zeros(2, 3), "token-mean") == 0.0


def test_weighted_micro_losses_equal_the_mini_batch_token_mean():
    # token losses x over mask m; micro-batches {row 0}, {row 1}; weights 3/4 and 1/4.
    x = torch.tensor([[1.0, 2.0, 3.0], [8.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    whole = (x * m).sum() / m.sum()  # (1 + 2 + 3 + 8) / 4 = 3.5
    parts = sum(share(m[i:i + 1], m, "token-mean") * (x[i] * m[i]).sum() / m[i].sum() for i in range(2))
    assert whole.item() == 3.5 and parts.item() == pytest.approx(3.5)


def test_averager_weights():
    avg = Averager()
    avg.add({"a": 1.0}, 0.75)
    avg.add({"a": 5.0, "b": 2.0}, 0.25)
    # a = (0.75 * 1 + 0.25 * 5) / 1 = 2.0; b only seen once -> 2.0
    assert avg.means() == {"a": 2.0, "b": 2.0}


def test_seeds_follow_the_step():
    # cursor 10000, P = 8: 10000..10007; the loop then moves the cursor to 10008
    assert step_seeds(10000, 8) == list(range(10000, 10008))
    assert step_seeds(10016, 8)[0] == 10016
    assert sample_seed(42, 2) != sample_seed(42, 3) and sample_seed(42, 2) == sample_seed(42, 2)


def test_prune_keeps_the_newest(tmp_path):
    for k in (1, 5, 10, 20):
        (tmp_path / f"step-{k}").mkdir()
    (tmp_path / ".tmp-step-30").mkdir()  # unfinished: not a checkpoint
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1, 5, 10, 20]
    removed = prune(tmp_path, 2)
    assert sorted(p.name for p in removed) == ["step-1", "step-5"]
    assert [s for s, _ in list_checkpoints(tmp_path)] == [10, 20]


def test_ds_config_pins_unmanaged_accumulation():
    base = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}
    cfg = unmanaged_accumulation(base, world_size=2)
    # DeepSpeed checks train_batch = micro x accumulation x world = 4 x 1 x 2 = 8
    assert cfg["gradient_accumulation_steps"] == 1 and cfg["train_batch_size"] == 8
    assert cfg["managed_gradient_accumulation"] is False
    assert base["gradient_accumulation_steps"] == 4  # the plan's dict is not modified


def test_filter_ranks_groups_by_the_task_reward_unless_told_shaped():
    from ragen_cli.algos.filter import filter_groups
    from ragen_cli.rollout.types import Trajectory
    from ragen_cli.train.stages import filter_rewards

    # group 0: task rewards equal (0, 0), shaped differ by a format penalty (-1, 0): std 0 / 0.5;
    # group 1: task and shaped rewards 0 and 0.4: std 0.2 either way
    trajs = []
    for group, task, shaped in ((0, 0.0, -1.0), (0, 0.0, 0.0), (1, 0.0, 0.0), (1, 0.4, 0.4)):
        t = Trajectory(group=group, task_reward=task)
        t.turn_rewards = [shaped]
        trajs.append(t)
    groups = torch.tensor([t.group for t in trajs])
    assert filter_rewards(trajs, "task").tolist() == pytest.approx([0.0, 0.0, 0.0, 0.4])
    assert filter_rewards(trajs, "shaped").tolist() == pytest.approx([-1.0, 0.0, 0.0, 0.4])
    assert filter_groups(filter_rewards(trajs, "task"), groups, 0.5)[0].tolist() == [2, 3]
    assert filter_groups(filter_rewards(trajs, "shaped"), groups, 0.5)[0].tolist() == [0, 1]
    with pytest.raises(ValueError):
        filter_rewards(trajs, "episode")


def test_a_failed_error_event_does_not_hide_the_runs_own_error(tmp_path, capsys):
    """On a full disk the `error` event cannot be written either: `_record_error` says so on
    stderr and returns, so the exception the user sees is the run's own (issue 38 section 3)."""
    from types import SimpleNamespace

    from ragen_cli.monitor.rundir import RunDir
    from ragen_cli.train.loop import _record_error

    rundir = RunDir(tmp_path / "run")
    rundir.create("name: x\n", "{}")
    rundir.events_path.mkdir()  # any write to it fails with an OSError, as a full disk does
    run = SimpleNamespace(state=SimpleNamespace(step=3),
                          event=lambda kind, step, **data: rundir.write_event(kind, step, **data))
    _record_error(run, RuntimeError("the run's own error"))
    assert "could not record the error in events.jsonl" in capsys.readouterr().err
