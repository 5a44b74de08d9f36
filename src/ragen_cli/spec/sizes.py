"""Derived batch sizes: pure integer arithmetic, no spec import (spec validation uses it too).

Symbols: P groups (initial states) per step, N rollouts per group, W processes in the job
(nodes x procs_per_node), m micro batch per process, M mini batch (trajectories per optimizer
step), K kept trajectories after the StarPO-S filter.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


def kept_groups(groups: int, keep_ratio: float) -> int:
    """Groups kept by the StarPO-S filter: floor(keep_ratio * P), at least one.

    The reference keeps `int(rollout_filter_ratio * env_groups)` groups (0.25 x 8 = 2). The 1e-9
    guards float products such as 0.29 * 100 = 28.999999999999996 from losing a group.
    """
    return max(1, min(groups, math.floor(keep_ratio * groups * (1 + 1e-9))))


def filter_kept_groups(groups: int, keep_ratio: float, strategy: str = "top_k", value: float | None = None,
                       include_zero: bool = True) -> int | None:
    """Groups the filter keeps every step (`algos.filter.select_groups`), or None when the number
    varies from step to step: top_p and min_p keep what clears a threshold, and without zero-score
    groups (include_zero false) fewer candidates may remain than top_k would take."""
    if not include_zero or value is None and strategy != "top_k":
        return None
    if strategy == "top_k":
        return kept_groups(groups, keep_ratio)
    if strategy == "top_k_abs":
        return max(1, min(groups, int(value)))
    return None


def mini_batch_rows(kept: int, world: int, mini_batch: int | None, mini_batches: int = 1) -> int:
    """Rows of one mini-batch (one optimizer step) on each process: `train.mini_batch`
    trajectories when set, else the kept batch cut into `algorithm.mini_batches` parts (the
    reference's ppo_mini_batch_size = train batch / 4); at least one row. The trainer's loop and
    the Plan's sizes both read this."""
    total = mini_batch or kept // mini_batches
    return max(1, total // world)


def filter_max_groups(groups: int, keep_ratio: float, strategy: str = "top_k", value: float | None = None) -> int:
    """The most groups the filter can keep in a step: what it keeps when every group is a
    candidate (include_zero drops candidates, never adds them), or all for top_p and min_p."""
    return filter_kept_groups(groups, keep_ratio, strategy, value) or groups


def filter_args(f) -> dict:
    """The keyword arguments `derive_sizes` and `size_problems` take from `algorithm.filter`."""
    return {"keep_ratio": f.keep_ratio, "strategy": f.strategy, "value": f.value, "include_zero": f.include_zero}


# One line of meaning per derived size (the dry-run table and docs/spec.md show these).
SIZE_LABELS = {
    "world_size": "processes (nodes x procs per node)",
    "trajectories_per_step": "trajectories per step (P x N)",
    "kept_groups": "groups kept by the filter (the most it can keep when kept_groups_vary)",
    "kept_groups_vary": "1 when the filter keeps a varying number of groups (top_p, min_p, include_zero false)",
    "kept_trajectories": "trajectories kept (groups x N)",
    "mini_batch": "mini batch (trajectories per optimizer step)",
    "micro_batch": "micro batch per process",
    "grad_accum_steps": "gradient accumulation steps (done by ragen: DeepSpeed's JSON has 1)",
    "optimizer_steps_per_update": "optimizer steps per update",
    "updates_per_step": "updates per rollout batch (online-k)",
    "optimizer_steps_per_step": "optimizer steps per training step",
    "total_optimizer_steps": "optimizer steps in the run",
    "micro_batches_per_update": "micro batches per process per update",
}


@dataclass(frozen=True)
class Sizes:
    """Every derived size of one training step (names match the docs/spec.md glossary)."""

    world_size: int
    trajectories_per_step: int
    kept_groups: int
    kept_trajectories: int
    kept_groups_vary: int
    mini_batch: int
    micro_batch: int
    grad_accum_steps: int
    optimizer_steps_per_update: int
    updates_per_step: int
    optimizer_steps_per_step: int
    total_optimizer_steps: int
    micro_batches_per_update: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def derive_sizes(
    *,
    groups: int,
    group_size: int,
    keep_ratio: float,
    nodes: int,
    procs_per_node: int,
    micro_batch: int,
    mini_batch: int | None,
    ppo_epochs: int,
    online_k: int,
    steps: int,
    strategy: str = "top_k",
    value: float | None = None,
    include_zero: bool = True,
    mini_batches: int = 1,
) -> Sizes:
    """All sizes from the spec's numbers. Assumes `size_problems(...)` found nothing. When the
    filter keeps a varying number of groups, the sizes are those of a step that keeps the most it
    can (`filter_max_groups`)."""
    world = nodes * procs_per_node
    fixed = filter_kept_groups(groups, keep_ratio, strategy, value, include_zero)
    kept_g = filter_max_groups(groups, keep_ratio, strategy, value) if fixed is None else fixed
    kept = kept_g * group_size
    mini = mini_batch_rows(kept, world, mini_batch, mini_batches) * world
    micro_batch = min(micro_batch, mini // world)  # a micro batch is at most a mini-batch's share
    opt_per_update = (kept // mini) * ppo_epochs
    return Sizes(
        world_size=world,
        trajectories_per_step=groups * group_size,
        kept_groups=kept_g,
        kept_trajectories=kept,
        kept_groups_vary=int(fixed is None),
        mini_batch=mini,
        micro_batch=micro_batch,
        grad_accum_steps=mini // (micro_batch * world),
        optimizer_steps_per_update=opt_per_update,
        updates_per_step=online_k,
        optimizer_steps_per_step=opt_per_update * online_k,
        total_optimizer_steps=opt_per_update * online_k * steps,
        micro_batches_per_update=(kept // (micro_batch * world)) * ppo_epochs,
    )


def size_problems(
    *, groups: int, group_size: int, keep_ratio: float, world: int, micro_batch: int, mini_batch: int | None,
    strategy: str = "top_k", value: float | None = None, include_zero: bool = True, mini_batches: int = 1,
) -> list[tuple[str, str]]:
    """Batch-size rules as [(key path, message)]; empty when the sizes divide evenly.

    A filter that keeps a varying number of groups has no fixed kept count to divide: each
    process trains an equal share of any number of whole groups only when N is a multiple of
    the world size (the last micro and mini batch of a step may then be short)."""
    per_pass = micro_batch * world
    fixed = filter_kept_groups(groups, keep_ratio, strategy, value, include_zero)
    if fixed is None:
        out = []
        if group_size % world:
            out.append((
                "env.train.group_size",
                f"the filter ({strategy}{'' if include_zero else ', include_zero false'}) keeps a varying number of "
                f"groups, so every process gets an equal share only if group_size {group_size} is a multiple of the "
                f"world size {world}",
            ))
        if mini_batch is not None and mini_batch % per_pass:
            out.append(("train.mini_batch", f"mini_batch {mini_batch} is not a multiple of micro_batch x world size = "
                        f"{micro_batch} x {world} = {per_pass}"))
        return out
    kept = fixed * group_size
    rule = f"floor({keep_ratio} x {groups} groups)" if strategy == "top_k" else f"top_k_abs {value:g} of {groups}"
    how = f"{rule} = {fixed} groups x {group_size} = {kept}"
    if mini_batch is None and mini_batches > 1:
        if kept % (mini_batches * world):
            return [(
                "algorithm.mini_batches",
                f"the {kept} kept trajectories ({how}) do not split into {mini_batches} mini batches with an equal "
                f"share on each of {world} process(es): {kept} is not a multiple of {mini_batches * world}",
            )]
        rows = kept // (mini_batches * world)
        micro = min(micro_batch, rows)
        if rows % micro:
            return [("train.micro_batch", f"a mini batch's {rows} rows per process ({kept} kept / {mini_batches} mini "
                     f"batches / {world} process(es)) do not split into micro batches of {micro_batch}")]
        return []
    if kept < per_pass:
        return [(
            "train.micro_batch",
            f"the {kept} kept trajectories ({how}) are fewer than one micro batch on every process "
            f"(micro_batch {micro_batch} x world size {world} = {per_pass}); lower micro_batch or keep more",
        )]
    if mini_batch is None:
        if kept % per_pass:
            return [(
                "train.micro_batch",
                f"the {kept} kept trajectories ({how}) do not split into micro batches of "
                f"{micro_batch} on {world} process(es): {kept} is not a multiple of {per_pass}",
            )]
        return []
    out = []
    if mini_batch % per_pass:
        out.append((
            "train.mini_batch",
            f"mini_batch {mini_batch} is not a multiple of micro_batch x world size = {micro_batch} x {world} = {per_pass}",
        ))
    if mini_batch > kept or kept % mini_batch:
        out.append((
            "train.mini_batch",
            f"the {kept} kept trajectories ({how}) do not split into mini batches of {mini_batch}",
        ))
    return out
