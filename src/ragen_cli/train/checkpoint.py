"""Checkpoints: atomic, keep-last-n, resumable, and loadable without ragen.

`checkpoints/step-<k>/`:
- `model/`: the actor as a plain HF directory (config, safetensors, tokenizer files) that
  transformers and vLLM load; with LoRA, a PEFT adapter directory instead (`ragen export`
  merges it into a full model).
- `critic/`: the critic the same way (only when the estimator is GAE).
- `deepspeed/`: DeepSpeed's own engine checkpoints (tags `actor`, `critic`): weights,
  optimizer and lr-scheduler state, partitioned as the ZeRO stage needs.
- `rng.pt`: python, numpy and torch RNG states; `state.json`: step, env seed cursor, run
  settings changed by interventions, base model directory, metric history tail.

Writing: every rank writes into `.tmp-step-<k>/`, a barrier, then rank 0 renames it to
`step-<k>/` (a reader never sees a half-written checkpoint) and deletes all but the newest
`keep` checkpoints.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

CKPT_RE = re.compile(r"^step-(\d+)$")
HISTORY_TAIL = 100


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed from or exported; the message names it and the fix."""


def state_problems(state: dict) -> list[str]:
    """Type problems of the fields of a checkpoint's state.json that loading reads."""
    want = {"step": (int,), "lora": (bool,), "base_model": (str, type(None))}
    return [f"{k} must be {' or '.join('null' if t is type(None) else t.__name__ for t in types)}, got {state[k]!r}"
            for k, types in want.items()
            if k in state and (not isinstance(state[k], types) or (int in types and isinstance(state[k], bool)))]


def checkpoint_problems(ckpt: Path) -> list[str]:
    """Why checkpoint `ckpt` cannot be resumed from or exported, read from its files without
    loading an engine: state.json (JSON, field types), rng.pt, the DeepSpeed directory, and the
    model/ weights (full: every tensor the config needs, with its shape; LoRA: a readable
    adapter). Empty when it looks whole."""
    from ragen_cli.models.verify import safetensors_shapes, weight_problems

    try:
        state = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ["no state.json (half-written, or not a ragen checkpoint)"]
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return [f"state.json is not JSON ({exc})"]
    if not isinstance(state, dict):
        return ["state.json is not a JSON object"]
    problems = [f"state.json: {p}" for p in state_problems(state)]
    for name in ("rng.pt", "deepspeed"):
        if not (ckpt / name).exists():
            problems.append(f"{name} is missing")
    model = ckpt / "model"
    if not model.is_dir():
        return problems + ["model/ is missing"]
    if state.get("lora") is True:
        adapters = sorted(model.glob("adapter_model*.safetensors"))
        if not (model / "adapter_config.json").is_file() or not adapters:
            problems.append("model/ holds no LoRA adapter (adapter_config.json, adapter_model.safetensors)")
        problems += [f"model/{p}" for p in safetensors_shapes(adapters)[1]]
    else:
        problems += [f"model/: {p}" for p in weight_problems(model)]
    return problems


def check_checkpoint(ckpt: Path) -> None:
    """Raise CheckpointError naming `ckpt`, its problems and the way out when it is broken."""
    problems = checkpoint_problems(ckpt)
    if problems:
        older = [p for _, p in list_checkpoints(ckpt.parent) if p != ckpt]
        way_out = (f"move it aside (mv {ckpt} {ckpt.parent / ('broken-' + ckpt.name)}) to use the one before it, "
                   f"{older[-1].name}" if older else "no older checkpoint is left")
        raise CheckpointError(f"checkpoint {ckpt} is broken: {'; '.join(problems)}; {way_out}")


def list_checkpoints(ckpt_root: Path) -> list[tuple[int, Path]]:
    """(step, path) of the finished checkpoints under `ckpt_root`, oldest first."""
    if not ckpt_root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_root.iterdir() if p.is_dir() and (m := CKPT_RE.match(p.name))]
    return sorted(found)


def latest_checkpoint(ckpt_root: Path) -> Path | None:
    found = list_checkpoints(ckpt_root)
    return found[-1][1] if found else None


def prune(ckpt_root: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` checkpoints; returns the deleted paths."""
    old = [p for _, p in list_checkpoints(ckpt_root)[:-keep]] if keep > 0 else []
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    return old


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _export_module(module, out: Path, lora: bool, model_dir: Path) -> None:
    """HF directory (full weights) or PEFT adapter directory (LoRA) of `module`."""
    from ragen_cli.train.lora import copy_tokenizer_files, save_adapter

    if lora:
        save_adapter(module, out)
    else:
        module.save_pretrained(str(out), safe_serialization=True)
        copy_tokenizer_files(model_dir, out, shutil.copy2)


def save(ckpt_root: Path, step: int, engines, state: dict[str, Any], model_dir: Path, keep: int, rank: int = 0) -> Path:
    """Write checkpoint `step` atomically; returns its final path."""
    import torch

    tmp, final = ckpt_root / f".tmp-step-{step}", ckpt_root / f"step-{step}"
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier()
    exclude = engines.lora
    engines.actor.save_checkpoint(str(tmp / "deepspeed"), tag="actor", save_latest=False, exclude_frozen_parameters=exclude)
    if engines.critic is not None:
        engines.critic.save_checkpoint(str(tmp / "deepspeed"), tag="critic", save_latest=False, exclude_frozen_parameters=exclude)
    if rank == 0:
        _export_module(engines.actor.module, tmp / "model", engines.lora, model_dir)
        if engines.critic is not None:
            _export_module(engines.critic.module, tmp / "critic", engines.lora, model_dir)
        torch.save(rng_state(), tmp / "rng.pt")
        full = {**state, "step": step, "base_model": str(model_dir), "lora": engines.lora}
        full["history"] = full.get("history", [])[-HISTORY_TAIL:]
        (tmp / "state.json").write_text(json.dumps(full, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        prune(ckpt_root, keep)
    _barrier()
    return final


def load(ckpt: Path, engines) -> dict[str, Any]:
    """Restore engines (weights, optimizer, scheduler) and RNG from `ckpt`; returns state.json.
    A checkpoint whose files are broken is a CheckpointError naming it (checked first from the
    files, then whatever DeepSpeed or torch cannot read)."""
    import torch

    check_checkpoint(ckpt)
    strict = not engines.lora
    try:
        for tag, engine in (("actor", engines.actor), ("critic", engines.critic)):
            if engine is None:
                continue
            path, _ = engine.load_checkpoint(str(ckpt / "deepspeed"), tag=tag, load_module_strict=strict,
                                             load_optimizer_states=True, load_lr_scheduler_states=True)
            if path is None:
                raise FileNotFoundError(f"no DeepSpeed state for the {tag}")
        set_rng_state(torch.load(ckpt / "rng.pt", weights_only=False))
    except Exception as exc:  # truncated .pt files: torch's and DeepSpeed's own errors
        raise CheckpointError(f"checkpoint {ckpt} cannot be loaded ({type(exc).__name__}: {str(exc)[:200]}); "
                              f"move it aside to resume from the one before it") from exc
    return json.loads((ckpt / "state.json").read_text())


def export(ckpt: Path, out: Path) -> Path:
    """A full HF model directory from checkpoint `ckpt` (adapter merged when it is LoRA)."""
    from ragen_cli.train.lora import merge_adapter

    state_file, model = ckpt / "state.json", ckpt / "model"
    if not state_file.is_file() or not model.is_dir():
        raise FileNotFoundError(f"{ckpt} is not a ragen checkpoint (no state.json / model/)")
    problems = checkpoint_problems(ckpt)
    if problems:
        raise CheckpointError(f"checkpoint {ckpt} is broken, nothing exported: {'; '.join(problems)}")
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"output directory {out} exists and is not empty")
    state = json.loads(state_file.read_text())
    if state.get("lora"):
        return merge_adapter(Path(state["base_model"]), model, out)
    shutil.copytree(model, out, dirs_exist_ok=True)
    return out
