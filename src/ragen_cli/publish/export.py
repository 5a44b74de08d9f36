"""`ragen export`'s work: a full Hugging Face model directory from a checkpoint, adapter merged,
with its model card (publish/model_card.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ragen_cli.publish.model_card import write_card
from ragen_cli.train.checkpoint import CheckpointError, checkpoint_problems, resolve_best


def export(ckpt: Path, out: Path, repo: str | None = None) -> Path:
    """A full HF model directory from checkpoint `ckpt` (adapter merged when it is LoRA), with a
    model card README.md (publish/model_card.py; `repo`: the hub repo it is pushed to)."""
    from ragen_cli.train.lora import merge_adapter

    ckpt = resolve_best(ckpt)
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
        merge_adapter(Path(state["base_model"]), model, out)
    else:
        shutil.copytree(model, out, dirs_exist_ok=True)
    write_card(ckpt, out, repo)
    return out
