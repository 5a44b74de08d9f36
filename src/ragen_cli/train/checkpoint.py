"""Checkpoints: atomic, keep-last-n, resumable, and loadable without ragen.

`checkpoints/step-<k>/`:
- `model/`: the actor as a plain HF directory (config, safetensors, tokenizer files) that
  transformers and vLLM load; with LoRA, a PEFT adapter directory instead (`ragen export`
  merges it into a full model).
- `critic/`: the critic the same way (only when the estimator is GAE).
- `deepspeed/`: DeepSpeed's own engine checkpoints (tags `actor`, `critic`): weights,
  optimizer and lr-scheduler state, partitioned as the ZeRO stage needs.
- `ahead-<rank>.json`: with `rollout.max_staleness`, each process's share of the batch rolled out
  during the last update (train/ahead.py).
- `rng.pt`: python, numpy and torch RNG states, and every CUDA device's when CUDA is in use
  (read back with `torch.load(weights_only=True)`); `state.json`: step, env seed cursor, run
  settings changed by interventions, base model directory, DeepSpeed tags, metric history tail.

Writing, safe against a kill -9 at any moment and a full disk: rank 0 clears what killed saves
left (`.tmp-step-*`, `.old-step-*`); every rank writes into `.tmp-step-<k>/`, a barrier; rank 0
writes state.json last, fsyncs every file and directory, renames the directory to `step-<k>/`
(an existing `step-<k>/` is first renamed aside, then deleted) and fsyncs `checkpoints/`, then
prunes to the newest `keep` (each renamed aside before it is deleted). So a `step-<k>/` is
whole; `latest_checkpoint` also requires its state.json. A failed write is a
CheckpointWriteError naming the cause; the earlier checkpoints are untouched.

A health rollback to step r deletes the checkpoints of steps after r (`abandon_after`): they
hold the branch the run abandoned, and `--resume` must continue the restored one. The run's best
(`checkpoint.keep_best`) goes back to the restored checkpoint's, and `best` with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

from ragen_cli.train.durable import fsync, fsync_tree, remove_dir, storage_hint
from ragen_cli.train.rng import read_rng, rng_file_problems, rng_state, set_rng_state

CKPT_RE = re.compile(r"^step-(\d+)$")
LEFTOVER_RE = re.compile(r"^\.(tmp|old)-step-\d+$")  # what a killed save or prune leaves
HISTORY_TAIL = 100


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed from or exported; the message names it and the fix."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (disk full, file-size limit, ...); the earlier ones are intact."""


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
    problems += rng_file_problems(ckpt / "rng.pt")
    problems += deepspeed_problems(ckpt, state)
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


def deepspeed_tags(ckpt: Path, state: dict) -> list[str]:
    """The DeepSpeed tags a checkpoint must hold: state.json's `deepspeed_tags`; for checkpoints
    written before that key, `actor`, and `critic` when a critic/ was exported."""
    tags = state.get("deepspeed_tags")
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        return tags
    return ["actor"] + (["critic"] if (ckpt / "critic").is_dir() else [])


def deepspeed_problems(ckpt: Path, state: dict) -> list[str]:
    """Each tag's directory must hold DeepSpeed's model states (`*model_states.pt`, non-empty)."""
    if not (ckpt / "deepspeed").is_dir():
        return ["deepspeed/ is missing"]
    problems = []
    for tag in deepspeed_tags(ckpt, state):
        files = list((ckpt / "deepspeed" / tag).glob("*model_states.pt"))
        if not any(f.stat().st_size > 0 for f in files):
            problems.append(f"deepspeed/{tag}/ holds no DeepSpeed model states (*model_states.pt)")
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
    """The newest complete checkpoint: a `step-<k>/` holding its state.json (written last)."""
    found = [p for _, p in list_checkpoints(ckpt_root) if (p / "state.json").is_file()]
    return found[-1] if found else None


def prune(ckpt_root: Path, keep: int, protect: int | None = None) -> list[Path]:
    """Delete all but the newest `keep` checkpoints and the one of step `protect` (the best,
    `checkpoint.keep_best`); returns the deleted paths. Each is renamed aside first, so a kill
    mid-delete leaves a `.old-step-*` (cleared later), never a half step-*."""
    old = [p for k, p in list_checkpoints(ckpt_root)[:-keep] if k != protect] if keep > 0 else []
    for p in old:
        remove_dir(p)
    return old


def abandon_after(ckpt_root: Path, step: int) -> list[Path]:
    """After a rollback to step `step`: delete the checkpoints of later steps, the branch the run
    abandoned, so that `--resume` (newest step first) and pruning never take one of them; returns
    their paths. All are renamed aside (`.old-step-*`, cleared by the next save if a kill stops
    the deletion) before any is deleted, so only a kill between two renames leaves one behind."""
    later = [p for k, p in list_checkpoints(ckpt_root) if k > step]
    aside = [p.with_name(f".old-{p.name}") for p in later]
    for p, a in zip(reversed(later), reversed(aside)):  # newest first
        shutil.rmtree(a, ignore_errors=True)
        p.rename(a)
    if later:
        fsync(ckpt_root)
    for a in aside:
        shutil.rmtree(a, ignore_errors=True)
    return later


BEST = "best"
"""`checkpoints/best`: a relative link to the best step's `step-<k>/` (`checkpoint.keep_best`)."""


def mark_best(ckpt_root: Path, step: int) -> Path:
    """Point `checkpoints/best` at `step-<step>/` (replaced atomically: a new link, renamed over
    the old one); returns the link."""
    link, tmp = ckpt_root / BEST, ckpt_root / f".{BEST}-{step}"
    tmp.unlink(missing_ok=True)
    os.symlink(f"step-{step}", tmp)
    os.replace(tmp, link)
    fsync(ckpt_root)
    return link


def unmark_best(ckpt_root: Path) -> None:
    """Remove `checkpoints/best` (its checkpoint was abandoned by a rollback and no earlier best is kept)."""
    (ckpt_root / BEST).unlink(missing_ok=True)
    fsync(ckpt_root)


def resolve_best(path: Path) -> Path:
    """`path` itself, or for a `best` link (`checkpoints/best`) the step directory it names."""
    return path.parent / os.readlink(path) if path.name == BEST and path.is_symlink() else path


def clear_leftovers(ckpt_root: Path) -> list[Path]:
    """Delete what killed saves and prunes left (`.tmp-step-*`, `.old-step-*`). Only the run's
    one writer calls it (the run directory lock), before it starts a save."""
    found = [p for p in ckpt_root.iterdir() if LEFTOVER_RE.match(p.name)] if ckpt_root.is_dir() else []
    for p in found:
        shutil.rmtree(p, ignore_errors=True)
    return found


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


def save(ckpt_root: Path, step: int, engines, state: dict[str, Any], model_dir: Path, keep: int, rank: int = 0,
         files: dict[str, str] | None = None) -> Path:
    """Write checkpoint `step` atomically (see the module docstring); returns its final path.
    `files`: this process's own text files (name -> content; the batch rolled out ahead,
    train/ahead.py). Any failure is a CheckpointWriteError; the half-written `.tmp-step-<k>/` is removed."""
    import torch

    tmp, final = ckpt_root / f".tmp-step-{step}", ckpt_root / f"step-{step}"
    try:
        if rank == 0:
            ckpt_root.mkdir(parents=True, exist_ok=True)
            clear_leftovers(ckpt_root)
            tmp.mkdir()
        _barrier()
        for name, text in (files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        exclude = engines.lora
        tags = ["actor"] + (["critic"] if engines.critic is not None else [])
        for tag in tags:
            getattr(engines, tag).save_checkpoint(str(tmp / "deepspeed"), tag=tag, save_latest=False,
                                                  exclude_frozen_parameters=exclude)
        if rank == 0:
            _export_module(engines.actor.module, tmp / "model", engines.lora, model_dir)
            if engines.critic is not None:
                _export_module(engines.critic.module, tmp / "critic", engines.lora, model_dir)
            torch.save(rng_state(torch.cuda.get_rng_state_all if torch.cuda.is_available() else None), tmp / "rng.pt")
            full = {**state, "step": step, "base_model": str(model_dir), "lora": engines.lora, "deepspeed_tags": tags}
            full["history"] = full.get("history", [])[-HISTORY_TAIL:]
            (tmp / "state.json").write_text(json.dumps(full, indent=1))  # last: marks the checkpoint whole
            fsync_tree(tmp)
            if final.exists():  # saved again (after a rollback): the old one goes aside, then away
                old = ckpt_root / f".old-{final.name}"
                final.rename(old)
                tmp.rename(final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(final)
            fsync(ckpt_root)
            prune(ckpt_root, keep, protect=state.get("best_step"))
    except Exception as exc:
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointWriteError(_write_failure(ckpt_root, step, exc)) from exc
    _barrier()
    return final


def _write_failure(ckpt_root: Path, step: int, exc: Exception) -> str:
    """'checkpoint step-K could not be written to ROOT (cause); the newest kept is ...; what to do'."""
    kept = latest_checkpoint(ckpt_root)
    first = (str(exc).splitlines() or ["-"])[0][:200]
    return (f"checkpoint step-{step} could not be written to {ckpt_root} ({type(exc).__name__}: {first}); "
            + (f"the newest complete checkpoint, {kept.name}, is intact" if kept else "no earlier checkpoint exists")
            + storage_hint(ckpt_root, exc))


def load(ckpt: Path, engines) -> dict[str, Any]:
    """Restore engines (weights, optimizer, scheduler) and RNG from `ckpt`; returns state.json.
    A checkpoint whose files are broken is a CheckpointError naming it (checked first from the
    files, then whatever DeepSpeed or torch cannot read)."""
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
        warning = set_rng_state(read_rng(ckpt / "rng.pt"))
    except Exception as exc:  # truncated .pt files: torch's and DeepSpeed's own errors
        raise CheckpointError(f"checkpoint {ckpt} cannot be loaded ({type(exc).__name__}: {str(exc)[:200]}); "
                              f"move it aside to resume from the one before it") from exc
    if warning:
        warnings.warn(f"{ckpt}: {warning}", RuntimeWarning, stacklevel=2)
    return json.loads((ckpt / "state.json").read_text())
