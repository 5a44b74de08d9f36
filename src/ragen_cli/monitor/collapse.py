"""Template-collapse statistics from a cross-scoring matrix (RAGEN-2, arXiv 2604.06268).

RAGEN-2 separates two ways a policy can narrow:
- *entropy collapse*: replies become near-deterministic for each input (low H(Z|X));
- *template collapse*: replies stop depending on the input (low I(X;Z)), whatever their entropy.

Both are estimated by scoring sampled replies z_i under every prompt x_j of the batch with the
trainer's forward pass (teacher forcing). With l_ij the mean per-token log-prob of reply i under
prompt j, own(i) the column of the prompt reply i was sampled from and p_j the empirical share of
prompt j among the batch's initial states (RAGEN-2 `collapse_metrics.py`):

    matched_i  = l_{i,own(i)}                               log p(z_i | x_i)
    marginal_i = log sum_j p_j exp(l_ij)                     log p_mix(z_i)
    I(X;Z)    ~= mean_i (matched_i - marginal_i)             nats per token, <= H(X)
    H(Z|X)    ~= -mean_i matched_i                           nats per token
    retrieval  = mean_i [argmax_j l_ij == own(i)]            chance: sum_j p_j^2 for i ~ p

Departures from RAGEN-2, and why:
1. Identical prompts (two initial states that render the same text, e.g. Bandit's arm orders
   across groups) form one column weighted by how many groups share it (p_j), so each distinct
   prompt is scored once; RAGEN-2 scores every group and merges signatures afterwards, with a
   uniform mixture over groups. The estimate is the same; the cost is lower.
2. `mi_norm = I / H(X)` is reported beside I, so one threshold serves batches with 2 or 16
   distinct initial states (H(X) = log 2 or log 16 under a uniform p).
3. Ties in retrieval count as a fraction (1/k for a k-way tie including the own column), so a
   reply scored identically under every prompt counts as chance, not as a hit.

Pure functions over plain lists (monitor/ imports no torch); the scoring itself is in
train/cross_score.py.
"""

from __future__ import annotations

import math


def logsumexp(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def prompt_entropy(weights: list[float]) -> float:
    """H(X) in nats of the empirical prompt distribution (weights need not sum to 1)."""
    total = sum(weights)
    return -sum(w / total * math.log(w / total) for w in weights if w > 0)


def cross_stats(cross: list[list[float]], own: list[int], weights: list[float]) -> dict[str, float]:
    """The statistics above from `cross[i][j]` (mean per-token log-prob of reply i under prompt
    j), `own[i]` (reply i's column) and `weights[j]` (how many initial states show prompt j).

    Returns {} with fewer than two distinct prompts (nothing to tell apart)."""
    n_cols = len(weights)
    if n_cols < 2 or not cross:
        return {}
    if any(len(row) != n_cols for row in cross) or len(own) != len(cross):
        raise ValueError("cross must be len(own) rows of len(weights) columns")
    total = sum(weights)
    logp = [math.log(w / total) for w in weights]
    matched = [row[j] for row, j in zip(cross, own)]
    marginal = [logsumexp([x + lp for x, lp in zip(row, logp)]) for row in cross]
    hits = 0.0
    for row, j in zip(cross, own):
        best = max(row)
        ties = [k for k, x in enumerate(row) if x == best]
        hits += (1.0 / len(ties)) if j in ties else 0.0
    mi = sum(a - b for a, b in zip(matched, marginal)) / len(cross)
    h_x = prompt_entropy(weights)
    return {
        "collapse/mi": mi,
        "collapse/mi_norm": mi / h_x,
        "collapse/cond_entropy": -sum(matched) / len(cross),
        "collapse/retrieval_acc": hits / len(cross),
        "collapse/retrieval_chance": sum((w / total) ** 2 for w in weights),
        "collapse/prompts": float(n_cols),
    }


def spread_sample(n: int, k: int) -> list[int]:
    """`k` indices spread evenly over range(n) (all of them when k >= n)."""
    if k >= n:
        return list(range(n))
    return [int(i * n / k) for i in range(k)]
