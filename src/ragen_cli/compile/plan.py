"""RunSpec -> Plan: everything a run needs decided before it starts, pure and deterministic.

`compile_plan(spec, device="cpu", cpu_count=2)` gives the same Plan for the same inputs; only
`device=None` / `cpu_count=None` look at the machine (see `launch.resolve_device`), and the
template check loads the model's tokenizer when it is on this machine (compile/template.py).

The Plan is what runs: DeepSpeed receives `deepspeed` / `critic_deepspeed` as they are, the
engines take `precision` and `placement`, the update reads `turn_rows`, and nothing rewrites the
Plan at run time. A run checks the decisions it can check again (`check_runs_as_planned`) and
stops with `PlanMismatch` when the machine disagrees.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from ragen_cli.compile.deepspeed_config import deepspeed_config
from ragen_cli.compile.template import TemplateCheck, template_check
from ragen_cli.compile.launch import (Launch, launch_command, lora_sync_mode, process_env, resolve_device, vllm_args,
                                      vllm_sleeps, weight_sync_mode)
from ragen_cli.spec.sizes import Sizes, derive_sizes, filter_args
from ragen_cli.device import PRECISION_DTYPES, resolve_precision, with_precision
from ragen_cli.rollout.context import trains_per_turn
from ragen_cli.rollout.vllm_args import engine_dtype
from ragen_cli.spec.models import RunSpec


@dataclass(frozen=True)
class Plan:
    """The compiled run. `critic_deepspeed` is None unless the advantage estimator is GAE."""

    name: str
    run_dir: str
    device: str
    sizes: Sizes
    deepspeed: dict[str, Any]
    critic_deepspeed: dict[str, Any] | None
    needs_reference: bool
    lora: bool
    vllm: dict[str, Any]
    env: dict[str, str]
    launch: Launch
    algorithm: dict[str, Any]
    rollout_is_cap: float | None = None
    precision: str = "fp32"
    precision_why: str = ""
    vllm_sleep: bool = False
    lora_sync: str | None = None  # "merged" | "adapter" with LoRA (rollout.lora_sync resolved), else None
    weight_sync: str = "file"  # "file" | "tensors": how full weights reach vLLM (launch.weight_sync_mode)
    turn_rows: bool = False  # the update trains one row per turn, as sampled (update_context window, or the template)
    template: str = ""  # what the chat-template check found (compile/template.py)
    placement: dict[str, dict[str, str]] | None = None  # engine -> {device, dtype} (`placement`)
    max_staleness: int = 0  # rollout.max_staleness: > 0, the engine generates the next step's rollouts during the update

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["launch"]["argv"] = list(self.launch.argv)
        return out

    def to_json(self) -> str:
        """Stable JSON (what `ragen train --json` prints and the run directory's plan.json holds)."""
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        data = json.loads(text)
        data["sizes"] = Sizes(**data["sizes"])
        data["launch"] = Launch(data["launch"]["kind"], tuple(data["launch"]["argv"]))
        return cls(**data)


def compile_plan(spec: RunSpec, device: str | None = None, cpu_count: int | None = None,
                 precision: tuple[str, str] | None = None, template: TemplateCheck | None = None,
                 node_rank: int | None = None) -> Plan:
    """Compile a validated spec. `device`: 'cpu' | 'cuda' (None: the spec's, 'auto' detected);
    `precision`: (precision, why) (None: `deepspeed.precision` resolved on this machine);
    `template`: the chat-template check (None: `template_check(spec)`, which loads the tokenizer
    only for a model that is not a built-in with its own template); `node_rank`: this node's place in
    a run whose nodes each start their own ranks (`ragen train --node-rank`; `launch.launch_command`)."""
    template = template or template_check(spec)
    device = device or resolve_device(spec)
    cpu_count = cpu_count or os.cpu_count() or 1
    precision, precision_why = precision or resolve_precision(spec.deepspeed.precision, device)
    spec = with_precision(spec, precision)
    env, ds, a = spec.env.train, spec.deepspeed, spec.algorithm
    sizes = derive_sizes(
        groups=env.groups,
        group_size=env.group_size,
        nodes=ds.nodes,
        procs_per_node=ds.procs_per_node,
        micro_batch=spec.train.micro_batch,
        mini_batch=spec.train.mini_batch,
        ppo_epochs=a.ppo_epochs,
        online_k=a.online_k,
        steps=spec.train.steps,
        mini_batches=a.mini_batches,
        **filter_args(a.filter),
    )
    critic = deepspeed_config(spec, sizes, device, spec.train.lr_critic) if a.adv_estimator == "gae" else None
    lora_sync, sleep = lora_sync_mode(spec, device), vllm_sleeps(spec, device)
    return Plan(
        name=spec.name,
        run_dir=str(PurePosixPath(spec.output.dir) / spec.name),
        device=device,
        sizes=sizes,
        deepspeed=deepspeed_config(spec, sizes, device, spec.train.lr_actor),
        critic_deepspeed=critic,
        needs_reference=a.kl_coef > 0,
        lora=spec.model.lora is not None,
        vllm=vllm_args(spec, device, lora_sync, sleep),
        env=process_env(spec, device, cpu_count),
        launch=launch_command(spec, node_rank),
        algorithm=a.model_dump(),
        rollout_is_cap=rollout_is_cap(a.rollout_is, a.rollout_is_cap, precision, spec.rollout.max_staleness),
        precision=precision,
        precision_why=precision_why,
        vllm_sleep=sleep,
        lora_sync=lora_sync,
        weight_sync=weight_sync_mode(device),
        turn_rows=update_turn_rows(spec, template.stable),
        template=template.why,
        placement=placement(device, precision, a.adv_estimator == "gae", a.kl_coef > 0, spec.model.lora is not None,
                            spec.rollout.backend, lora_sync, during_update(spec, sleep)),
        max_staleness=spec.rollout.max_staleness,
    )


def update_turn_rows(spec: RunSpec, stable: bool | None) -> bool:
    """Whether the update trains one row per turn (`Plan.turn_rows`): as the rollout rules say
    (`rollout.context.trains_per_turn`), and always for an agent env, whose requests may each
    start a row of their own (rollout/endpoint.py)."""
    from ragen_cli.rollout.agent_driver import is_agent_env

    return trains_per_turn(spec.rollout.update_context, stable) or is_agent_env(spec.env.train)


class PlanMismatch(RuntimeError):
    """The machine running a Plan found a decision other than the Plan's: compile it where it runs."""


def check_runs_as_planned(plan: Plan, world_size: int, turn_rows: bool) -> None:
    """Raise `PlanMismatch` unless this job's process count and the per-turn-rows decision of its
    loaded chat template (`rollout.context.trains_per_turn`) are the Plan's."""
    if world_size != plan.sizes.world_size:
        raise PlanMismatch(f"the Plan was compiled for {plan.sizes.world_size} process(es), this job has {world_size}")
    if turn_rows != plan.turn_rows:
        raise PlanMismatch(f"the Plan trains {'one row per turn' if plan.turn_rows else 'whole episodes'} "
                           f"({plan.template or 'template not checked'}), but the chat template loaded here needs "
                           f"{'one row per turn' if turn_rows else 'whole episodes'}: compile the Plan where the "
                           "model's tokenizer is (ragen train does, after fetching the model)")


RANK_DEVICE = "cuda:{local_rank}"
"""A rank's GPU: DeepSpeed puts each rank's engines on cuda:LOCAL_RANK (`placement_device`)."""


def during_update(spec: RunSpec, sleeps: bool) -> str:
    """What the rollout engine does while the trainer updates: `generates` the next step's
    rollouts (`rollout.max_staleness` > 0; it shares the rank's device, awake, in the memory share
    vLLM was given), `sleeps` (vLLM on CUDA, its memory handed to DeepSpeed) or waits `idle`."""
    if spec.rollout.max_staleness > 0:
        return "generates"
    return "sleeps" if sleeps else "idle"


def placement(device: str, precision: str, critic: bool, reference: bool, lora: bool, backend: str,
              lora_sync: str | None = None, during: str = "idle") -> dict[str, dict[str, str]]:
    """Where each engine of a rank lives and in what dtype: the one rule the runtime obeys
    (docs/internals.md, "Where tensors live"). On CUDA every engine of a rank shares that rank's
    GPU: the actor and critic (DeepSpeed moves them there and casts them to the run's precision),
    the KL reference (a frozen copy moved beside the actor, in its dtype; with LoRA the actor
    itself with the adapter off) and the rollout engine (vLLM on the rank's GPU through its
    external launcher with several ranks; HF generate samples with the actor's own module), in
    the dtype `launch.engine_dtype` gives it (fp32 for merged LoRA weights of a bf16 trainer), and
    what the engine does during the update (`during_update`)."""
    dev = RANK_DEVICE if device == "cuda" else "cpu"
    dtype = PRECISION_DTYPES[precision]
    out = {"actor": {"device": dev, "dtype": dtype}}
    if critic:
        out["critic"] = {"device": dev, "dtype": dtype}
    if reference:
        out["reference"] = {"device": dev, "dtype": dtype, "module": "actor, adapter off" if lora else "frozen copy"}
    engine, why = engine_dtype(precision, lora_sync, backend)
    out["rollout"] = {"device": dev, "dtype": engine, "module": "actor" if backend == "hf" else "engine", "why": why,
                      "during_update": during}
    return out


def placement_device(entry: dict[str, str], local_rank: int) -> str:
    """A placement entry's device for the process with `local_rank` ("cuda:{local_rank}" -> cuda:1)."""
    return entry["device"].format(local_rank=local_rank)


def rollout_is_cap(mode: str, cap: float, precision: str, max_staleness: int = 0) -> float | None:
    """The rollout importance-weight cap the update uses, or None for no correction:
    `algorithm.rollout_is` on -> the cap, off -> None, auto -> the cap unless the run is fp32
    (where engine and trainer agree to ~1e-6 nats and the weights would all be 1) and samples
    on-policy (`rollout.max_staleness` 0: with overlap the tokens come from the previous policy)."""
    if mode == "auto":
        mode = "off" if precision == "fp32" and max_staleness == 0 else "on"
    return cap if mode == "on" else None
