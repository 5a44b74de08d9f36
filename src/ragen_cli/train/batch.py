"""Trajectories -> padded tensors, and micro-batched scoring with the trainer's models.

The token grid: a trajectory of L tokens predicts tokens 1..L-1 from positions 0..L-2, so every
per-token tensor here lives on the *shifted* grid of length T = max(L) - 1: column j holds
token j + 1 (its log-prob, its loss-mask bit, its reward) and the value of the state before it.
Token 0 is always prompt (the system message), never sampled, so nothing is lost.

Shapes: `B` trajectories, `T` shifted tokens, `V` vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ragen_cli.algos.losses import entropy_from_logits, logprobs_from_logits


@dataclass
class Batch:
    """A padded batch on the shifted grid (right padding, pad id 0, mask 0 on padding)."""

    input_ids: torch.Tensor  # [B, T+1] long
    attention_mask: torch.Tensor  # [B, T+1] long
    mask: torch.Tensor  # [B, T] float: 1 where token j+1 was sampled
    sample_logp: torch.Tensor  # [B, T] float: the rollout engine's log-probs (0 off-mask)
    turn_end: list[list[int]]  # per row, shifted indices of each turn's last sampled token
    turn_rewards: list[list[float]]
    group: list[int]

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, idx: list[int] | torch.Tensor) -> "Batch":
        """The sub-batch of rows `idx`, trimmed to its own longest row."""
        idx = torch.as_tensor(idx, dtype=torch.long)
        T1 = int(self.attention_mask[idx].sum(-1).max().item())
        return Batch(
            self.input_ids[idx, :T1], self.attention_mask[idx, :T1], self.mask[idx, : T1 - 1],
            self.sample_logp[idx, : T1 - 1], [self.turn_end[i] for i in idx.tolist()],
            [self.turn_rewards[i] for i in idx.tolist()], [self.group[i] for i in idx.tolist()],
        )

    @property
    def tokens(self) -> int:
        """Real (non-padding) tokens, prompt and reply."""
        return int(self.attention_mask.sum().item())


def collate(trajs) -> Batch:
    """Pad `Trajectory` objects (rollout/types.py) into one `Batch`."""
    if not trajs:
        raise ValueError("cannot collate an empty list of trajectories")
    L = max(len(t.input_ids) for t in trajs)
    B = len(trajs)
    ids = torch.zeros(B, L, dtype=torch.long)
    attn = torch.zeros(B, L, dtype=torch.long)
    mask = torch.zeros(B, L, dtype=torch.float32)
    logp = torch.zeros(B, L, dtype=torch.float32)
    for b, t in enumerate(trajs):
        n = len(t.input_ids)
        ids[b, :n] = torch.tensor(t.input_ids)
        attn[b, :n] = 1
        mask[b, :n] = torch.tensor(t.loss_mask, dtype=torch.float32)
        logp[b, :n] = torch.tensor(t.old_logprobs, dtype=torch.float32)
    return Batch(ids, attn, mask[:, 1:], logp[:, 1:], [[e - 1 for e in t.turn_end] for t in trajs],
                 [list(t.turn_rewards) for t in trajs], [t.group for t in trajs])


def micro_slices(n: int, micro: int) -> list[list[int]]:
    """Row indices 0..n-1 cut into consecutive micro-batches of at most `micro` rows."""
    return [list(range(i, min(i + micro, n))) for i in range(0, n, micro)]


def policy_forward(module, mb: Batch, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [B,T] of the batch's tokens under `module` (a causal LM), and entropy [B,T]."""
    logits = module(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits[:, :-1]
    logp = logprobs_from_logits(logits, mb.input_ids[:, 1:])
    entropy = entropy_from_logits(logits) if with_entropy else None
    return logp, entropy


def value_forward(module, mb: Batch) -> torch.Tensor:
    """Critic values [B,T]: column j is V(state before token j+1)."""
    out = module(input_ids=mb.input_ids, attention_mask=mb.attention_mask)
    return out.logits[:, :-1, 0].float()


@torch.no_grad()
def score(module, batch: Batch, micro: int, kind: str = "logp") -> torch.Tensor:
    """Log-probs ("logp") or values ("value") for the whole batch, `micro` rows at a time, on
    the batch's full grid [B,T] (0 off-mask)."""
    out = torch.zeros_like(batch.mask)
    was_training = module.training
    module.eval()
    for idx in micro_slices(len(batch), micro):
        mb = batch.rows(idx)
        values = policy_forward(module, mb, False)[0] if kind == "logp" else value_forward(module, mb)
        out[idx, : values.shape[1]] = values * mb.mask
    module.train(was_training)
    return out
