"""Readable rendering of a Plan for `ragen train --dry-run` (rich, no heavy imports)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Mapping, Sequence

from rich.columns import Columns
from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from ragen_cli.compile.estimate import Estimate, duration
from ragen_cli.compile.inert import Inert
from ragen_cli.compile.plan import Plan
from ragen_cli.spec.presets import flatten
from ragen_cli.spec.sizes import SIZE_LABELS



def sizes_table(plan: Plan) -> Table:
    table = Table(title="Batch sizes", show_header=False, title_justify="left")
    table.add_column("size")
    table.add_column("value", justify="right")
    for key, value in plan.sizes.to_dict().items():
        table.add_row(SIZE_LABELS.get(key, key), str(value))
    if plan.template:
        table.add_row(f"chat template: {plan.template}", "per turn" if plan.turn_rows else "per episode")
    if plan.turn_rows:
        table.add_row("update rows (rollout.update_context window, or the template): one per turn; mini and micro "
                      "batches count these rows, the filter and the kept count trajectories", "per turn")
    return table


def algorithm_table(plan: Plan, provenance: Mapping[str, str]) -> Table:
    """Each algorithm value and who set it: default, preset, user (the spec file) or --set."""
    table = Table(title="Algorithm (which value won)", title_justify="left")
    table.add_column("field")
    table.add_column("value", justify="right")
    table.add_column("set by")
    style = {"default": "dim", "preset": "cyan", "user": "bold", "--set": "bold magenta"}
    for key, value in flatten(plan.algorithm).items():
        source = provenance.get(key, "default")
        table.add_row(key, json.dumps(value), f"[{style.get(source, '')}]{source}[/]")
    table.add_row("(precision in use)", json.dumps(plan.precision), f"[dim]{plan.precision_why}[/]")
    table.add_row("(rollout IS cap in use)", json.dumps(plan.rollout_is_cap),
                  "[dim]rollout_is + precision + rollout.max_staleness[/]")
    if plan.placement:
        table.add_row("(the engine during the update)", plan.placement["rollout"].get("during_update", "idle"),
                      f"[dim]rollout.max_staleness {plan.max_staleness}, rollout.sleep[/]")
    return table


def launch_text(plan: Plan) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(plan.env.items()))
    if plan.launch.kind == "in-process":
        return "\n".join(x for x in (env, "one process, in this process (world size 1; rendezvous on a free port picked at start)") if x)
    command = shlex.join(plan.launch.argv)
    return f"{env} \\\n  {command}" if env else command


def compact_json(data: Any) -> str:
    """Indented JSON with short lists kept on one line (`"betas": [0.9, 0.999]`)."""
    text = json.dumps(data, indent=2)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)


def _n(count: int, noun: str) -> str:
    """3, 'turn' -> '3 turns'; 1, 'micro batch' -> '1 micro batch'."""
    return f"{count:,} {noun}{'' if count == 1 else 'es' if noun.endswith('ch') else 's'}"


def summary_lines(plan: Plan, spec: Any, estimate: Estimate) -> list[str]:
    """The dry run's first lines: what a step holds, and how long it and the run should take."""
    z, r = plan.sizes, spec.rollout
    tokens = z.trajectories_per_step * r.max_turns * r.max_tokens_per_turn
    step = (f"{plan.name}: {_n(spec.train.steps, 'step')} of {z.trajectories_per_step} trajectories "
            f"({spec.env.train.groups} groups x {spec.env.train.group_size}), each at most {_n(r.max_turns, 'turn')} "
            f"x {_n(r.max_tokens_per_turn, 'token')} ({tokens:,} generated tokens a step at most); the update "
            f"trains {'up to ' if z.kept_groups_vary else ''}{z.kept_trajectories} kept trajectories in "
            f"{_n(z.optimizer_steps_per_step, 'optimizer step')} a step, {z.total_optimizer_steps:,} in the run.")
    if estimate.step_s is None:
        return [step, f"Estimated time: none ({estimate.basis})."]
    return [step, f"Estimated time: ~{duration(estimate.step_s)} a step, ~{duration(estimate.run_s)} for the run with "
                  f"validation and start ({estimate.basis}; episodes that end early make it shorter)."]


def plan_renderable(plan: Plan, provenance: Mapping[str, str], summary: Sequence[str] = ()) -> Group:
    parts: list[Any] = [*(f"[bold]{line}[/]" for line in summary),
        f"[bold]{plan.name}[/] -> {plan.run_dir}   device: {plan.device}   "
        f"LoRA: {'yes' if plan.lora else 'no'}   reference model: {'yes' if plan.needs_reference else 'no'}",
        Columns([sizes_table(plan), algorithm_table(plan, provenance)]),
    ]
    panels = [Panel(Syntax(compact_json(plan.deepspeed), "json"), title="DeepSpeed config (actor)", title_align="left",
                    expand=False),
              Panel(Syntax(compact_json(plan.vllm), "json"), title="vLLM engine", title_align="left", expand=False)]
    parts.append(Columns(panels))
    parts.append(f"DeepSpeed's gradient_accumulation_steps is 1: ragen accumulates the "
                 f"{_n(plan.sizes.grad_accum_steps, 'micro batch')} of an optimizer step itself and calls engine.step() "
                 "once per optimizer step (the filter can change how many a step has).")
    rollout = (plan.placement or {}).get("rollout")
    if rollout and "why" in rollout:
        parts.append(f"Engine dtype {rollout['dtype']} (training in {plan.precision}): {rollout['why']}.")
    if plan.critic_deepspeed is not None:
        critic_lr = plan.critic_deepspeed["optimizer"]["params"]["lr"]
        parts.append(f"Critic: same DeepSpeed config with lr {critic_lr}")
    parts.append(Panel(launch_text(plan), title="Launch", title_align="left"))
    return Group(*parts)


def inert_table(inert: Sequence[Inert]) -> Table:
    """The spec's settings without effect in this Plan (compile/inert.py), each with why."""
    table = Table(title="Settings with no effect in this Plan", title_justify="left", title_style="bold yellow")
    table.add_column("field")
    table.add_column("why")
    for item in inert:
        table.add_row(item.field, item.why)
    return table


def plan_estimate(plan: Plan, spec: Any) -> Estimate:
    """`compile.estimate.estimate` for this Plan on this machine (its cores, its CPU's bf16)."""
    import os

    from ragen_cli.compile.estimate import estimate
    from ragen_cli.compile.inert import single_pass
    from ragen_cli.device import CPU_BF16_FLAGS, cpu_flags

    val, z = spec.env.val, plan.sizes
    passes = (0 if single_pass(spec, plan) else 1) + (1 if plan.needs_reference else 0)
    return estimate(spec.model.name, plan.device, plan.precision, bool(set(CPU_BF16_FLAGS) & cpu_flags()),
                    os.cpu_count() or 1, z.trajectories_per_step, z.kept_trajectories, spec.rollout.max_turns, passes,
                    spec.algorithm.adv_estimator == "gae", spec.train.steps, val.episodes * max(1, len(val.envs)),
                    val.every)


def print_plan(plan: Plan, provenance: Mapping[str, str] | None = None, console: Console | None = None,
               inert: Sequence[Inert] = (), spec: Any = None) -> None:
    """Print the plan readably; `provenance` comes from `spec.loader.load(...).provenance`,
    `inert` from `compile.inert.inert_settings`; with the `spec`, a summary and an estimate of
    the run's time open it (`summary_lines`)."""
    out = console or Console()
    summary = summary_lines(plan, spec, plan_estimate(plan, spec)) if spec is not None else ()
    out.print(plan_renderable(plan, provenance or {}, summary))
    if inert:
        out.print(inert_table(inert))
