"""The update stage: `online_k` x `ppo_epochs` passes over the kept batch, each pass cut into
mini-batches (one optimizer step each) and micro-batches (one forward/backward each).

Loss of one micro-batch (PPO eqn. 9 with StarPO's KL term, RAGEN section 3):
    L = L_clip(ratio, adv) - entropy_coef * H + kl_coef * KL(pi || pi_ref)
each term aggregated by `algorithm.loss_agg`; with the rollout correction on (`Plan.rollout_is_cap`),
L_clip's tokens are weighted by `rollout_is_weights` at `algorithm.rollout_is_level` and
`rollout_is_mode`. A micro-batch's loss is weighted by its share of the mini-batch (masked tokens
for token-mean, non-empty rows for the seq-mean modes) before backward, so the accumulated
gradient equals the gradient of the mini-batch's aggregate.

Rows are taken in batch order, without shuffling: the batch is already a filtered set of whole
groups, and a fixed order keeps a resumed run bit-identical to an uninterrupted one.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from ragen_cli.algos.losses import (IS_SUMS, aggregate, effective_sample_size, kl, policy_loss, rollout_is_weights,
                                    value_loss)
from ragen_cli.train.batch import Batch, micro_slices, policy_forward, value_forward


def share(mb_mask: torch.Tensor, mini_mask: torch.Tensor, agg: str) -> float:
    """Weight of a micro-batch in its mini-batch: its fraction of masked tokens (token-mean) or of
    rows with at least one masked token (seq-mean-*)."""
    if agg == "token-mean":
        num, den = mb_mask.sum(), mini_mask.sum()
    else:
        num, den = (mb_mask.sum(-1) > 0).sum(), (mini_mask.sum(-1) > 0).sum()
    return float(num / den) if den > 0 else 0.0


class Averager:
    """Weighted running means of named stats (weights: micro-batch shares). Values may be floats
    or 0-d tensors on the engine's device; tensors are summed where they are and read once, in
    `means`."""

    def __init__(self) -> None:
        self.total: dict[str, float | torch.Tensor] = defaultdict(float)
        self.weight: dict[str, float] = defaultdict(float)

    def add(self, stats: dict[str, float | torch.Tensor], w: float = 1.0) -> None:
        for key, value in stats.items():
            self.total[key] = self.total[key] + w * (value.detach() if isinstance(value, torch.Tensor) else float(value))
            self.weight[key] += w

    def means(self) -> dict[str, float]:
        return {k: float(self.total[k]) / self.weight[k] for k in self.total if self.weight[k] > 0}


def passes(spec) -> int:
    """online_k updates of ppo_epochs passes each, all against the same old log-probs."""
    return spec.algorithm.online_k * spec.algorithm.ppo_epochs


def shares_prefix(spec) -> bool:
    """Whether the update's forwards run a group's prompt once (`train.share_prefix`): not under
    gradient checkpointing, which turns the KV cache off in training mode."""
    return spec.train.share_prefix and not spec.train.gradient_checkpointing


def _actor_micro(engine, mb: Batch, rows, old_logp, adv, ref_logp, spec,
                 is_cap: float | None = None) -> tuple[torch.Tensor, dict]:
    """Loss of one micro-batch and its stats (0-d tensors), computed on the engine's device: `mb`,
    `old_logp`, `adv` and `ref_logp` may live elsewhere (the CPU); what the loss reads goes there."""
    a = spec.algorithm
    share = shares_prefix(spec)
    logp, entropy = policy_forward(engine, mb, with_entropy=True, share_prefix=share)
    dev, T = logp.device, logp.shape[1]
    on = mb.to(dev)

    def mine(x: torch.Tensor) -> torch.Tensor:
        return x[rows, :T].to(dev)

    old = logp.detach() if old_logp is None else mine(old_logp)  # None: single pass (stages.single_pass)
    weights, is_stats = None, {}
    if is_cap is not None:  # the engine drew the tokens: correct for its mismatch with pi_old
        weights, is_stats = rollout_is_weights(old, on.sample_logp[:, :T], on.mask, is_cap, a.rollout_is_level,
                                               a.rollout_is_mode, a.rollout_is_lower)
    pg, stats = policy_loss(logp, old, mine(adv), on.mask, a.clip_low, a.clip_high,
                            a.dual_clip_c, a.loss_agg, weights)
    stats.update(is_stats)
    ent = aggregate(entropy, on.mask, a.loss_agg)
    loss = pg - a.entropy_coef * ent
    stats = {**stats, "policy_loss": pg.detach(), "entropy": ent.detach()}
    if mb.answer_mask is not None and mb.answer_mask.sum() > 0:
        am = on.answer_mask[:, :T]
        stats["answer_entropy"] = (entropy.detach() * am).sum() / am.sum()
    if ref_logp is not None:
        kl_ref = aggregate(kl(logp, mine(ref_logp), a.kl_estimator), on.mask, a.loss_agg)
        loss = loss + a.kl_coef * kl_ref
        stats["kl_ref"] = kl_ref.detach()
    return loss, stats


def actor_update(engine, batch: Batch, old_logp, adv, ref_logp, spec, mini_rows: int,
                 lr_scale: float = 1.0, is_cap: float | None = None) -> dict[str, float]:
    """Train the actor on `batch` (this process's rows); returns mean stats incl. grad_norm and
    the learning rate used. `is_cap`: the rollout importance-weight cap (Plan.rollout_is_cap),
    None for no correction; with it, `is_ess`: the weights' effective sample size over this
    process's rows (`effective_sample_size` of their sums over every micro-batch: the passes
    repeat the same weights, which leaves the ratio unchanged)."""
    sums: dict[str, torch.Tensor | float] = defaultdict(float)

    def micro_loss(mb: Batch, rows: list[int]):
        loss, stats = _actor_micro(engine, mb, rows, old_logp, adv, ref_logp, spec, is_cap)
        for key in IS_SUMS:
            if key in stats:
                sums[key] = sums[key] + stats.pop(key)
        return loss, stats

    out = _optimise(engine, batch, spec, mini_rows, micro_loss, lr_scale)
    if sums:
        out["is_ess"] = effective_sample_size(*(sums[k] for k in IS_SUMS))
    return out


def critic_update(engine, batch: Batch, old_values, returns, spec, mini_rows: int,
                  lr_scale: float = 1.0) -> dict[str, float]:
    """Train the critic on `batch` with the clipped value loss; returns mean stats."""
    a = spec.algorithm

    def micro_loss(mb: Batch, rows: list[int]):
        values = value_forward(engine, mb)  # on the critic's device; its targets go there
        dev, T = values.device, values.shape[1]
        loss, st = value_loss(values, old_values[rows, :T].to(dev), returns[rows, :T].to(dev), mb.mask.to(dev),
                              a.value_clip, a.loss_agg)
        return loss, {**st, "value_loss": loss.detach()}

    return _optimise(engine, batch, spec, mini_rows, micro_loss, lr_scale)


def scaled_step(engine, lr_scale: float) -> float:
    """`engine.step()` with every learning rate times `lr_scale` (a health intervention,
    monitor/intervene.py); returns the first group's rate used.

    A DeepSpeed LR scheduler rewrites the rates from its own schedule after every step, so the
    scale applies to the rate the schedule set for this step; without a scheduler the rate is
    put back after the step. Either way the scale never compounds across steps."""
    groups = engine.optimizer.param_groups
    base = [g["lr"] for g in groups]
    for g, lr in zip(groups, base):
        g["lr"] = lr * lr_scale
    engine.step()
    if getattr(engine, "lr_scheduler", None) is None:
        for g, lr in zip(groups, base):
            g["lr"] = lr
    return float(base[0] * lr_scale)


def _optimise(engine, batch: Batch, spec, mini_rows: int, micro_loss, lr_scale: float) -> dict[str, float]:
    """online_k x ppo_epochs passes; each pass one optimizer step per mini-batch, the gradient
    accumulated over micro-batches, each micro loss weighted by its share of the mini-batch."""
    stats, norms = Averager(), []
    engine.train()
    for _ in range(passes(spec)):
        for mini in micro_slices(len(batch), mini_rows):
            mini_mask = batch.mask[mini]
            for rel in micro_slices(len(mini), spec.train.micro_batch):
                rows = [mini[i] for i in rel]
                mb = batch.rows(rows)
                loss, st = micro_loss(mb, rows)
                w = share(mb.mask, mini_mask, spec.algorithm.loss_agg)
                engine.backward(loss * w, scale_wrt_gas=False)
                stats.add(st, w)
            lr = scaled_step(engine, lr_scale)
            norms.append(engine.get_global_grad_norm())
    out = stats.means()
    out["grad_norm"] = _mean_norm(norms)
    out["lr"] = lr
    return out


def _mean_norm(norms: list) -> float | None:
    values = [float(n) for n in norms if n is not None]
    return sum(values) / len(values) if values else None
