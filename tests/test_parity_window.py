"""The parity probe's sequences (`train.probe.probe_rows`, `probe_windows`): each probe row cut
to its last `rollout.parity_window` tokens, the sampled tokens in that window compared. Values
worked out by hand on two small rows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ragen_cli.train.batch import collate
from ragen_cli.train.probe import probe_rows, probe_windows


def _traj(n: int, sampled: list[int], group: int):
    """A row of n tokens (ids 1..n) whose tokens at `sampled` positions were sampled, each with
    log-prob -position/10."""
    return SimpleNamespace(
        input_ids=list(range(1, n + 1)), loss_mask=[int(i in sampled) for i in range(n)],
        old_logprobs=[-i / 10 if i in sampled else 0.0 for i in range(n)], answer_mask=[0] * n,
        turn_end=[max(sampled)], turn_rewards=[1.0], group=group)


def _batch():
    # row 0: 10 tokens, positions 7-9 sampled; row 1: 4 tokens, 2-3 sampled;
    # row 2: 12 tokens, only positions 1-2 sampled (outside a 5-token window)
    return collate([_traj(10, [7, 8, 9], 0), _traj(4, [2, 3], 0), _traj(12, [1, 2], 1)])


def test_a_window_keeps_the_last_tokens_and_their_sampled_ones():
    probe = probe_windows(_batch(), [0, 1], window=5)
    # row 0: tokens at positions 5..9 (ids 6..10); shifted column j predicts position 6 + j
    assert probe.input_ids[0].tolist() == [6, 7, 8, 9, 10]
    assert probe.mask[0].tolist() == [0, 1, 1, 1]
    assert probe.sample_logp[0].tolist() == pytest.approx([0.0, -0.7, -0.8, -0.9])
    # row 1 is shorter than the window: whole, right-padded with id 0 and mask 0
    assert probe.input_ids[1].tolist() == [1, 2, 3, 4, 0]
    assert probe.attention_mask[1].tolist() == [1, 1, 1, 1, 0]
    assert probe.mask[1].tolist() == [0, 1, 1, 0]
    assert probe.sample_logp[1].tolist() == pytest.approx([0.0, -0.2, -0.3, 0.0])


def test_window_zero_is_the_whole_row():
    batch = _batch()
    probe = probe_windows(batch, [0, 1], window=0)
    assert torch.equal(probe.input_ids, batch.input_ids[[0, 1], :10])
    assert probe.mask.sum().item() == 5


def test_rows_count_only_the_sampled_tokens_in_their_window():
    batch = _batch()
    # window 5: row 0 has 3, row 1 has 2, row 2 none (its sampled tokens are early)
    assert probe_rows(batch, 4, window=5) == [0, 1]
    assert probe_rows(batch, 100, window=5) == [0, 1]
    assert probe_rows(batch, 3, window=5) == [0]
    # whole rows: row 2's two early tokens count
    assert probe_rows(batch, 100, window=0) == [0, 1, 2]
