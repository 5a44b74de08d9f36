"""The DeepSpeed JSON config of the actor (and of the critic when the advantage is GAE),
exactly as `deepspeed.initialize` receives it (train/engine.py passes it unchanged).

Gradient accumulation is unmanaged (`unmanaged_accumulation`): a mini-batch has a variable
number of micro-batches (the StarPO-S filter decides how many trajectories survive), so
`engine.step()` is the optimizer boundary and the caller pre-scales each micro-batch loss
(`backward(loss, scale_wrt_gas=False)`). DeepSpeed's batch identity, train_batch_size = micro x
grad_accum x world size, then holds with one micro-batch per "DeepSpeed batch"; the mini-batch
and its accumulation steps are the Plan's `sizes`.
"""

from __future__ import annotations

from typing import Any

from ragen_cli.spec.sizes import Sizes
from ragen_cli.spec.models import RunSpec

ADAM_BETAS = [0.9, 0.999]  # the reference's verl optimizer defaults
ADAM_EPS = 1e-8
QUIET_STEPS = 1 << 30  # steps_per_print: ragen logs its own metrics


def precision_block(precision: str) -> dict[str, Any]:
    """bf16 / fp16 engine blocks; fp32 needs none. fp16 uses dynamic loss scaling (loss_scale 0)."""
    if precision == "bf16":
        return {"bf16": {"enabled": True}}
    if precision == "fp16":
        return {"fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}}
    return {}


def zero_block(stage: int, offload: str, device: str) -> dict[str, Any]:
    block: dict[str, Any] = {"stage": stage}
    if offload == "cpu":
        block["offload_optimizer"] = {"device": "cpu", "pin_memory": device == "cuda"}
    return block


def torch_adamw(device: str, offload: str) -> dict[str, Any]:
    """Optimizer switches: always torch's AdamW (`torch_adam`). Without it DeepSpeed 0.19.8 picks
    its FusedAdam on CUDA and DeepSpeedCPUAdam with offload, ops it JIT-compiles at first use with
    nvcc / g++ and ninja, which a pip install does not bring (engine.get_optimizer_configuration).
    On CUDA without offload, torch's own fused kernel (`fused`, built into torch, nothing to
    compile); elsewhere torch's default (foreach) implementation."""
    return {"torch_adam": True, **({"fused": True} if device == "cuda" and offload == "none" else {})}


def scheduler_block(schedule: str, lr: float, warmup_steps: int, total_steps: int) -> dict[str, Any] | None:
    """DeepSpeed scheduler for `spec.train.schedule`, counted in optimizer steps.

    constant without warm-up needs no scheduler. DeepSpeed's schedulers warm up over at least
    2 steps (`max(2, warmup_num_steps)`) starting from lr 0, so linear and cosine schedules
    without warm-up still spend their first 2 optimizer steps ramping up (DeepSpeed 0.19.8).
    """
    warmup = {"warmup_num_steps": max(1, warmup_steps), "warmup_type": "linear"}
    if schedule == "constant":
        if warmup_steps == 0:
            return None
        return {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": lr, **warmup}}
    if schedule == "linear":
        return {
            "type": "WarmupDecayLR",
            "params": {"total_num_steps": total_steps, "warmup_min_lr": 0.0, "warmup_max_lr": lr, **warmup},
        }
    return {
        "type": "WarmupCosineLR",
        "params": {"total_num_steps": total_steps, "warmup_min_ratio": 0.0, "cos_min_ratio": 0.0, **warmup},
    }


def unmanaged_accumulation(config: dict[str, Any], world_size: int) -> dict[str, Any]:
    """`config` with unmanaged accumulation pinned (see the module doc): one micro-batch per
    DeepSpeed batch, `engine.step()` the optimizer boundary. Returns a new dict."""
    return {**config, "managed_gradient_accumulation": False, "gradient_accumulation_steps": 1,
            "train_batch_size": config["train_micro_batch_size_per_gpu"] * world_size}


def deepspeed_config(spec: RunSpec, sizes: Sizes, device: str, lr: float) -> dict[str, Any]:
    """One engine's config (actor with lr_actor, critic with lr_critic), as DeepSpeed receives it."""
    ds, train = spec.deepspeed, spec.train
    config: dict[str, Any] = {
        "train_batch_size": sizes.mini_batch,
        "train_micro_batch_size_per_gpu": sizes.micro_batch,
        "gradient_accumulation_steps": sizes.grad_accum_steps,
        "gradient_clipping": train.grad_clip,
        "zero_optimization": zero_block(ds.zero_stage, ds.offload, device),
        **precision_block(ds.precision),
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": lr,
                "betas": list(ADAM_BETAS),
                "eps": ADAM_EPS,
                "weight_decay": train.weight_decay,
                **torch_adamw(device, ds.offload),
            },
        },
        "steps_per_print": QUIET_STEPS,
        "wall_clock_breakdown": False,
    }
    scheduler = scheduler_block(train.schedule, lr, train.warmup_steps, sizes.total_optimizer_steps)
    if scheduler:
        config["scheduler"] = scheduler
    return unmanaged_accumulation(config, sizes.world_size)
