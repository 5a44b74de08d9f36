"""Readable rendering of a Plan for `ragen train --dry-run` (rich, no heavy imports)."""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from ragen_cli.compile.plan import Plan
from ragen_cli.compile.sizes import SIZE_LABELS



def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def sizes_table(plan: Plan) -> Table:
    table = Table(title="Batch sizes", show_header=False, title_justify="left")
    table.add_column("size")
    table.add_column("value", justify="right")
    for key, value in plan.sizes.to_dict().items():
        table.add_row(SIZE_LABELS.get(key, key), str(value))
    return table


def algorithm_table(plan: Plan, provenance: Mapping[str, str]) -> Table:
    """Each algorithm value and who set it: default, preset, user (the spec file) or --set."""
    table = Table(title="Algorithm (which value won)", title_justify="left")
    table.add_column("field")
    table.add_column("value", justify="right")
    table.add_column("set by")
    style = {"default": "dim", "preset": "cyan", "user": "bold", "--set": "bold magenta"}
    for key, value in _flat(plan.algorithm).items():
        source = provenance.get(key, "default")
        table.add_row(key, json.dumps(value), f"[{style.get(source, '')}]{source}[/]")
    return table


def launch_text(plan: Plan) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(plan.env.items()))
    if plan.launch.kind == "in-process":
        return f"{env}\none process, in this process (world size 1)".strip()
    return f"{env} \\\n  {shlex.join(plan.launch.argv)}".strip()


def plan_renderable(plan: Plan, provenance: Mapping[str, str]) -> Group:
    parts: list[Any] = [
        f"[bold]{plan.name}[/] -> {plan.run_dir}   device: {plan.device}   "
        f"LoRA: {'yes' if plan.lora else 'no'}   reference model: {'yes' if plan.needs_reference else 'no'}",
        sizes_table(plan),
        algorithm_table(plan, provenance),
        Panel(Syntax(json.dumps(plan.deepspeed, indent=2), "json"), title="DeepSpeed config (actor)", title_align="left"),
    ]
    if plan.critic_deepspeed is not None:
        critic_lr = plan.critic_deepspeed["optimizer"]["params"]["lr"]
        parts.append(f"Critic: same DeepSpeed config with lr {critic_lr}")
    parts.append(Panel(Syntax(json.dumps(plan.vllm, indent=2), "json"), title="vLLM engine", title_align="left"))
    parts.append(Panel(launch_text(plan), title="Launch", title_align="left"))
    return Group(*parts)


def print_plan(plan: Plan, provenance: Mapping[str, str] | None = None, console: Console | None = None) -> None:
    """Print the plan readably; `provenance` comes from `spec.loader.load(...).provenance`."""
    (console or Console()).print(plan_renderable(plan, provenance or {}))
