"""Per-token terms read off a policy's logits: log-probs of the sampled tokens and the entropy.

Shapes: ``B`` rows, ``T`` tokens, ``V`` vocabulary; both return float32 ``[B,T]`` whatever the
logits' dtype, and keep the graph for the loss's backward."""

from __future__ import annotations

import torch


_CHUNK_ROWS = 1024


def _row_chunks(logits: torch.Tensor) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    flat = logits.reshape(-1, logits.shape[-1])
    n = flat.shape[0]
    return flat, [(i, min(i + _CHUNK_ROWS, n)) for i in range(0, n, _CHUNK_ROWS)]


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax distribution at each position: ``[B,T,V] -> [B,T]`` (float32).

    ``H = logsumexp(z) - sum softmax(z) z`` (stable for any logit scale; ``-inf`` logits of
    banned tokens contribute 0, with finite gradients). Entropy bonus of PPO,
    Schulman et al. 2017 eqn. 9 (``c2 S[pi](s_t)``).

    Memory: computed over chunks of 1024 positions in float32, so without autograd the extra
    memory is one ``1024 x V`` float32 block; under autograd each chunk's probabilities are kept
    for backward (about one float32 ``[B,T,V]`` in total, as verl).
    """
    if logits.dim() < 2:
        raise ValueError(f"logits must be [..., V], got shape {tuple(logits.shape)}")
    flat, chunks = _row_chunks(logits)
    parts = []
    for lo, hi in chunks:
        z = flat[lo:hi].float()
        probs = torch.softmax(z, dim=-1)
        z_finite = torch.where(probs > 0, z, 0.0)  # 0 * -inf (a banned token) would be NaN
        parts.append(torch.logsumexp(z, dim=-1) - (probs * z_finite).sum(-1))
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(logits.shape[:-1])


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Log-probability of ``labels[B,T]`` under ``logits[B,T,V]`` -> ``[B,T]`` (float32).

    ``log pi(y_t) = z_t[y_t] - logsumexp(z_t)``: a gather and a reduction per chunk of positions,
    never a full ``[B,T,V]`` log-softmax. ``logits[:, t]`` must already be the prediction for
    ``labels[:, t]`` (the caller shifts by one for a causal LM).
    """
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)}")
    flat, chunks = _row_chunks(logits)
    flat_labels = labels.reshape(-1)
    parts = []
    for lo, hi in chunks:
        z = flat[lo:hi].float()
        picked = z.gather(-1, flat_labels[lo:hi, None].long()).squeeze(-1)
        parts.append(picked - torch.logsumexp(z, dim=-1))
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(labels.shape)
