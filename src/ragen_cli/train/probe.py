"""The parity probe's sequences (`rollout.parity_tokens`, `rollout.parity_window`): which rows of
a step's batch it reads and the window of each it sends (train/sync.py runs the probe)."""

from __future__ import annotations

import torch

from ragen_cli.train.batch import Batch


def probe_rows(batch: Batch, min_tokens: int, window: int = 0) -> list[int]:
    """The parity probe's rows: from the start of the batch until their probe windows
    (`probe_windows`) hold at least `min_tokens` sampled tokens (`rollout.parity_tokens`), or
    every row with any."""
    rows, total = [], 0
    lengths = batch.attention_mask.sum(-1).tolist()
    for r, n in enumerate(lengths):
        count = int(batch.mask[r, window_start(int(n), window): int(n) - 1].sum().item())
        if count > 0:
            rows.append(r)
            total += count
        if total >= min_tokens:
            break
    return rows


def window_start(n: int, window: int) -> int:
    """First token of the probe window of a row of `n` tokens: its last `window` (0: all)."""
    return max(0, n - window) if window > 0 else 0


def probe_windows(batch: Batch, rows: list[int], window: int) -> Batch:
    """The probe's sequences: of each row in `rows`, its last `window` tokens (0: the whole row),
    with the row's sampled tokens in them as the tokens to compare (`rollout.parity_window`). The
    probe asks whether both sides compute the same function, which any input shows; a window
    spares the engine the row's long prompt, whose every position `prompt_logprobs` scores."""
    sub = batch.rows(rows)
    if window <= 0:
        return sub
    lengths = [int(n) for n in sub.attention_mask.sum(-1).tolist()]
    starts = [window_start(n, window) for n in lengths]
    W = max(n - s for n, s in zip(lengths, starts))
    ids = torch.zeros(len(rows), W, dtype=sub.input_ids.dtype)
    attn = torch.zeros(len(rows), W, dtype=sub.attention_mask.dtype)
    mask = torch.zeros(len(rows), W - 1, dtype=sub.mask.dtype)
    logp = torch.zeros(len(rows), W - 1, dtype=sub.sample_logp.dtype)
    for i, (n, s) in enumerate(zip(lengths, starts)):
        ids[i, : n - s], attn[i, : n - s] = sub.input_ids[i, s:n], 1
        mask[i, : n - s - 1], logp[i, : n - s - 1] = sub.mask[i, s : n - 1], sub.sample_logp[i, s : n - 1]
    # one group: the windows run as one forward (they share no prompt; per-group parts would be
    # one forward call per row)
    return Batch(ids, attn, mask, logp, [[] for _ in rows], [[] for _ in rows], [0] * len(rows))
