"""A training step's metrics that are not the update's maths: rewards, reply diversity, template
collapse, the update's stats in the metrics table's names and their mean over processes, the
trajectories kept for the run directory, and the ranks' parameter checksums. Every name is
defined once in monitor/metrics.py."""

from __future__ import annotations

import time

import torch

from ragen_cli.algos.losses import explained_variance
from ragen_cli.train.validate import chose_high_ev_share


def engine_tokens(seqs: list[list[int]]) -> int:
    """Tokens a rollout engine with a prefix cache runs for these trajectories: every distinct
    token prefix once (the size of their token trie: a prompt shared by samples, or by groups
    up to where their states differ, runs once). In sorted order a sequence shares the most with
    the one before it, so the trie adds its length less that common prefix."""
    total, prev = 0, []
    for ids in sorted(seqs):
        lcp = 0
        while lcp < min(len(ids), len(prev)) and ids[lcp] == prev[lcp]:
            lcp += 1
        total += len(ids) - lcp
        prev = ids
    return total


def critic_stats(values, returns, mask) -> dict[str, float]:
    return {"critic/explained_var": explained_variance(values, returns, mask)}


def in_group_std(values: list[float], groups: list[int]) -> float:
    """Mean over groups of the population std of a group's values (the filter's definition)."""
    from ragen_cli.algos.masked import group_index, group_moments

    _, inverse, num_groups = group_index(torch.tensor(groups))
    return group_moments(torch.tensor(values, dtype=torch.float64), inverse, num_groups, unbiased=False)[2].mean().item()


def reward_stats(trajs) -> dict[str, float]:
    r = torch.tensor([t.episode_reward for t in trajs], dtype=torch.float64)
    task = [t.task_reward for t in trajs]
    out = {"reward/mean": r.mean().item(), "reward/std": r.std(unbiased=False).item(),
           "reward/min": r.min().item(), "reward/max": r.max().item(),
           "reward/task_mean": sum(task) / len(task),
           "reward/task_in_group_std": in_group_std(task, [t.group for t in trajs])}
    high = chose_high_ev_share(trajs)
    if high is not None:
        out["train/chose_high_ev"] = high
    return out


def collapse_metrics(run, trajs, step: int) -> dict[str, float]:
    """The template-collapse metrics (monitor/collapse.py) on this step's rollouts, every
    `monitor.collapse.every` steps; scored with the actor before its update."""
    from ragen_cli.monitor.collapse import cross_stats
    from ragen_cli.train.cross_score import cross_matrix, pairs

    cfg = run.spec.monitor.collapse
    if cfg.every == 0 or step % cfg.every:
        return {}
    start = time.perf_counter()
    prompts, weights, replies, own = pairs(trajs, cfg.replies, cfg.groups)
    if len(prompts) < 2 or not replies:
        return {}
    cross = cross_matrix(run.engines.actor.module, prompts, replies, run.rank, run.world)
    return {**cross_stats(cross, own, weights), "timing/collapse_s": time.perf_counter() - start}


def diversity_stats(trajs) -> dict[str, float]:
    from ragen_cli.monitor.diversity import distinct_n, identical_share

    replies = [turn.reply for t in trajs for turn in t.turns]
    out = {"diversity/distinct_2": distinct_n(replies, 2), "diversity/identical_share": identical_share(replies)}
    return {k: v for k, v in out.items() if v is not None}


def update_metrics(actor: dict, critic: dict | None) -> dict[str, float]:
    """Rename the update's stats into the metrics table's names."""
    out = {
        "actor/entropy": actor.get("entropy"), "actor/answer_entropy": actor.get("answer_entropy"),
        "actor/grad_norm": actor.get("grad_norm"),
        "actor/clip_frac_low": actor.get("clipfrac_low"), "actor/clip_frac_high": actor.get("clipfrac_high"),
        "actor/approx_kl": actor.get("approx_kl"), "actor/policy_loss": actor.get("policy_loss"),
        "actor/lr": actor.get("lr"),
    }
    if "kl_ref" in actor:
        out["actor/kl_ref"] = actor["kl_ref"]
    for key in ("is_truncated_frac", "is_masked_frac", "is_weight_mean", "is_ess"):  # rollout correction on
        if key in actor:
            out[f"actor/{key}"] = actor[key]
    if critic is not None:
        out.update({"critic/value_loss": critic.get("value_loss"), "critic/grad_norm": critic.get("grad_norm"),
                    "critic/lr": critic.get("lr")})
    return {k: v for k, v in out.items() if v is not None}


def rank_mean(run, stats: dict[str, float]) -> dict[str, float]:
    """The mean over processes of each update stat (each rank trains on its share of the rows;
    a stat a rank lacks, e.g. answer entropy without answer tokens, is averaged over the others),
    so rank 0's metrics, and the health verdict read from them, speak for the whole batch."""
    if run.world == 1:
        return stats
    parts: list = [None] * run.world
    torch.distributed.all_gather_object(parts, stats)
    keys = {k for part in parts for k in part}
    return {k: sum(p[k] for p in parts if k in p) / sum(k in p for p in parts) for k in sorted(keys)}


def sample_records(trajs, k: int) -> list[dict]:
    """`k` trajectories spread evenly over the batch (all groups represented), as JSON records."""
    if k <= 0 or not trajs:
        return []
    stride = max(1, len(trajs) // k)
    return [t.to_record(with_tokens=False) for t in trajs[::stride][:k]]


def rank_checksums(run) -> list[float]:
    """A checksum of the actor's trainable parameters from every process (equal when the ranks
    stayed in lockstep); [own] for a single process."""
    with torch.no_grad():
        params = [p for p in run.engines.actor.module.parameters() if p.requires_grad]
        own = float(sum(p.double().sum() + (p.double() ** 2).sum() for p in params))
    if run.world == 1:
        return [own]
    out: list = [None] * run.world
    torch.distributed.all_gather_object(out, own)
    return out
