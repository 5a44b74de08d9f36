"""DeepSpeed setup: the distributed environment, the actor, the critic and the reference.

CPU notes (docs/training.md, "DeepSpeed on CPU"):
- `DS_ACCELERATOR=cpu` must be set before transformers or deepspeed is imported, or DeepSpeed
  guesses the accelerator and warns everywhere.
- A single process still needs RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT, or
  `init_distributed` falls back to MPI discovery (`No module named 'mpi4py'`).
- `init_distributed` JIT-compiles DeepSpeed's shared-memory all-reduce op (`deepspeed_shm_comm`,
  about 25 s with g++ the first time per environment). DeepSpeed has no switch for it; a single
  process never all-reduces through it, so with WORLD_SIZE=1 we skip the build
  (`_skip_shm_build`). Several processes build it once and reuse TORCH_EXTENSIONS_DIR, unless
  `RAGEN_DS_SHM_COMM=0` (then gloo does the all-reduce: slower for big models, no compiler).
- The optimizer is torch's AdamW (`"torch_adam": true`), avoiding DeepSpeed's JIT-compiled
  FusedAdam (CUDA) and CPU Adam (offload); on CUDA torch's own fused kernel
  (compile/deepspeed_config.torch_adamw).
- Devices: DeepSpeed moves the actor and the critic to `cuda:LOCAL_RANK` (and casts them to the
  run's precision); the KL reference is moved by `place` as the Plan says (`plan.placement`).
- The DeepSpeed config is the Plan's, unchanged (`plan.deepspeed`: unmanaged gradient
  accumulation is pinned there, compile/deepspeed_config.unmanaged_accumulation).
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
from dataclasses import dataclass
from typing import Any

@dataclass
class Engines:
    """What the step loop trains and scores with. `critic` is None unless the estimator is
    GAE; `ref` is None unless kl_coef > 0 (with LoRA, `ref` is the actor's own module and
    `ref_adapter_off` is True: score under `disable_adapter()`)."""

    actor: Any
    critic: Any | None
    ref: Any | None
    ref_adapter_off: bool
    lora: bool


def free_port() -> int:
    """A TCP port that was free a moment ago (rendezvous of a single-process job)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def single_process_env() -> dict[str, str]:
    """The variables torch.distributed needs, for a process not started by a launcher."""
    return {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port())}


def _skip_shm_build() -> None:
    """Tell DeepSpeed's torch backend not to build the shm all-reduce op (single process only)."""
    import importlib

    # `deepspeed.comm.torch` as an attribute is the torch module (re-exported); take the module.
    ds_torch = importlib.import_module("deepspeed.comm.torch")
    ds_torch.build_shm_op = lambda: None


def _forget_destroyed_groups() -> None:
    """A vLLM engine in this process (CUDA, several ranks, `gpucheck`) destroys torch.distributed's
    process groups when it shuts down; DeepSpeed keeps references to the old ones
    (deepspeed.utils.groups) and its next engine would fail with "Group ... is not registered".
    With torch.distributed down again, drop those references so a new job starts cleanly."""
    import sys

    groups = sys.modules.get("deepspeed.utils.groups")
    release = getattr(groups, "_release_process_group_references", None)
    if callable(release):  # DeepSpeed 0.19.8: None means "the whole world was torn down"
        release(None)


def init_distributed(plan_env: dict[str, str] | None = None) -> tuple[int, int]:
    """Initialise DeepSpeed's process group (gloo on CPU); returns (rank, world_size).

    `plan_env` (the Plan's process environment) fills in what a launcher did not set; a single
    process gets a free MASTER_PORT so that concurrent runs on one machine do not collide."""
    for key, value in (plan_env or {}).items():
        os.environ.setdefault(key, value)
    if os.environ.get("WORLD_SIZE", "1") == "1":
        os.environ.update(single_process_env())
    import torch

    from ragen_cli.models.load import import_deepspeed

    deepspeed = import_deepspeed()

    if torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()

    _forget_destroyed_groups()
    if int(os.environ["WORLD_SIZE"]) == 1 or os.environ.get("RAGEN_DS_SHM_COMM") == "0":
        _skip_shm_build()
    backend = "gloo" if not torch.cuda.is_available() else "nccl"
    deepspeed.init_distributed(dist_backend=backend, verbose=False)
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def _record_grad_norm(engine) -> None:
    """DeepSpeed computes the fp32 ZeRO-0 grad norm in `clip_fp32_gradients` and drops it; keep it
    so `engine.get_global_grad_norm()` answers for every stage and precision."""
    from deepspeed.runtime.utils import clip_grad_norm_

    def clip() -> None:
        norm = clip_grad_norm_(parameters=engine.module.parameters(), max_norm=engine.gradient_clipping(), mpu=engine.mpu)
        engine._global_grad_norm = float(norm)

    engine.clip_fp32_gradients = clip


def _initialize(model, config: dict):
    """A DeepSpeed engine on the Plan's config as it stands (a copy: DeepSpeed keeps the dict)."""
    from ragen_cli.models.load import import_deepspeed

    deepspeed = import_deepspeed()
    params = [p for p in model.parameters() if p.requires_grad]
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=params, config=copy.deepcopy(config))
    _record_grad_norm(engine)
    return engine


def enable_gradient_checkpointing(model):
    """transformers' gradient checkpointing, non-reentrant (it needs no input that requires grad,
    so it works under a frozen embedding, as with LoRA); returns the model."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def build_engines(spec, plan, model_dir, world_size: int) -> Engines:
    """Actor (+ LoRA), critic when GAE, reference when KL is on; weights seeded by spec.train.seed
    (the critic's value head and LoRA's B-init are the only random parts). `world_size` is the
    job's process count, which must be the Plan's: its DeepSpeed batch sizes are computed for it
    (`compile.plan.check_runs_as_planned`)."""
    import torch

    from ragen_cli.models.load import load_causal_lm
    from ragen_cli.train import lora as lora_mod
    from ragen_cli.train.value import load_value_model

    from ragen_cli.compile.plan import check_runs_as_planned

    check_runs_as_planned(plan, world_size, plan.turn_rows)
    torch.manual_seed(spec.train.seed)
    use_lora = spec.model.lora is not None
    actor_model = load_causal_lm(model_dir, "float32", "cpu")
    if spec.train.gradient_checkpointing:
        enable_gradient_checkpointing(actor_model)
    if use_lora:
        actor_model = lora_mod.wrap(actor_model, spec.model.lora)
    ref = None
    if plan.needs_reference and not use_lora:
        ref = copy.deepcopy(actor_model).eval().requires_grad_(False)
    actor = _initialize(actor_model, plan.deepspeed)
    if ref is not None:  # the frozen copy goes where the Plan puts it: beside the actor, in its dtype
        ref = place(ref, plan.placement["reference"])
    critic = None
    if plan.critic_deepspeed is not None:
        critic_model = load_value_model(model_dir, spec.model.lora)
        if spec.train.gradient_checkpointing:
            enable_gradient_checkpointing(critic_model)
        critic = _initialize(critic_model, plan.critic_deepspeed)
    if use_lora and plan.needs_reference:
        ref = actor.module
    return Engines(actor, critic, ref, use_lora and plan.needs_reference, use_lora)


def place(module, entry: dict[str, str]):
    """`module` moved to its Plan placement (`compile.plan.placement`) on this process's device."""
    import torch

    from ragen_cli.compile.plan import placement_device

    device = placement_device(entry, int(os.environ.get("LOCAL_RANK", "0")))
    return module.to(device=torch.device(device), dtype=getattr(torch, entry["dtype"]))


def ref_context(engines: Engines):
    """Context in which `engines.ref` scores as the reference policy."""
    if engines.ref_adapter_off:
        return engines.ref.disable_adapter()
    return contextlib.nullcontext()
