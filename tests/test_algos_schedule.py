"""algos/schedule.py: online-k / epoch / micro-batch plans and exact gradient accumulation."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from ragen_cli.algos.losses import AGGREGATIONS, aggregate
from ragen_cli.algos.schedule import accumulation_weights, update_schedule

T_ = torch.tensor


def _flat(update):
    return torch.cat(update).tolist()


def test_unshuffled_plan_by_hand():
    # B = 7, k = 2: mini-batches of 4 and 3 ([0..3], [4..6]); micro-batches of at most 3.
    plan = update_schedule(7, online_k=2, ppo_epochs=1, micro_batch_size=3, seed=0, shuffle=False)
    assert [[m.tolist() for m in u] for u in plan] == [[[0, 1, 2], [3]], [[4, 5, 6]]]


def test_each_epoch_covers_every_trajectory_once_and_is_reproducible():
    plan = update_schedule(10, online_k=3, ppo_epochs=2, micro_batch_size=2, seed=5)
    assert len(plan) == 6  # ppo_epochs * online_k optimizer steps
    for epoch in (plan[:3], plan[3:]):
        assert sorted(i for u in epoch for i in _flat(u)) == list(range(10))
        assert sorted(len(_flat(u)) for u in epoch) == [3, 3, 4]
    assert all(len(m) <= 2 for u in plan for m in u)
    again = update_schedule(10, online_k=3, ppo_epochs=2, micro_batch_size=2, seed=5)
    assert [_flat(u) for u in plan] == [_flat(u) for u in again]
    assert _flat(plan[0]) + _flat(plan[1]) + _flat(plan[2]) != _flat(plan[3]) + _flat(plan[4]) + _flat(plan[5])


@pytest.mark.parametrize("args", [(2, 3, 1, 1), (4, 0, 1, 1), (4, 1, 0, 1), (4, 1, 1, 0)])
def test_bad_schedule(args):
    with pytest.raises(ValueError):
        update_schedule(*args, seed=0)


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_accumulation_weights_reproduce_whole_batch_loss(mode):
    # Three micro-batches of one mini-batch, one of them with an all-masked row, one empty.
    x = T_([[1.0, 2, 3], [4, 5, 6], [7, 8, 9], [1, 1, 1], [3, 0, 2]])
    mask = T_([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 1]])
    parts = [slice(0, 2), slice(2, 3), slice(3, 4), slice(4, 5)]
    w = accumulation_weights([mask[p] for p in parts], mode)
    acc = sum(wi * aggregate(x[p], mask[p], mode) for wi, p in zip(w, parts))
    assert_close(acc, aggregate(x, mask, mode))
    assert w[2] == 0.0


def test_accumulation_weights_by_hand_and_empty():
    # tokens per micro-batch: 2 and 3 -> 2/5, 3/5; non-empty rows: 1 and 2 -> 1/3, 2/3.
    masks = [T_([[1, 1, 0], [0, 0, 0]]), T_([[1, 0, 0], [1, 1, 0]])]
    assert accumulation_weights(masks, "token-mean") == pytest.approx([0.4, 0.6])
    assert accumulation_weights(masks, "seq-mean-token-mean") == pytest.approx([1 / 3, 2 / 3])
    assert accumulation_weights([torch.zeros(2, 3)], "token-mean") == [0.0]
    with pytest.raises(ValueError, match="aggregation"):
        accumulation_weights(masks, "sum")
