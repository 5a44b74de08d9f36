"""What `ragen eval` evaluates: a base model, a training checkpoint, or an endpoint (`Policy`).

Checkpoints follow train/checkpoint.py: `RUN_DIR/checkpoints/step-<k>/` with `state.json`
(step, `base_model`, `lora`) and `model/`, a full HF directory or, with LoRA, a PEFT adapter
directory (`adapter_config.json` + `adapter_model.safetensors`) on `base_model`. The trainer
writes `.tmp-step-<k>/` and renames it when complete. Everything here only reads small JSON
files; weights are loaded by the backends.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragen_cli.eval.manifest import content_hash
from ragen_cli.models.verify import safetensors_shapes, weight_problems
from ragen_cli.train.checkpoint import state_problems

_STEP = re.compile(r"^(\.tmp-)?step-(\d+)$")
# config.json keys that must agree for two directories to be the same model architecture.
ARCH_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "intermediate_size", "vocab_size")


class EvalInputError(ValueError):
    """Bad input to `ragen eval` (exit code 2); the message names what is wrong."""


@dataclass(frozen=True)
class Policy:
    """One policy to evaluate; `describe()` goes into the manifest."""

    label: str
    kind: str  # "model", "checkpoint" (full weights), "lora-checkpoint", "endpoint"
    model_dir: Path | None = None  # full HF directory the backend loads (None: lora, endpoint)
    tokenizer_dir: Path | None = None
    base_dir: Path | None = None  # base model of a LoRA adapter
    adapter_dir: Path | None = None
    checkpoint: Path | None = None
    step: int | None = None
    endpoint: str | None = None
    content_hash: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "kind": self.kind, "content_hash": self.content_hash}
        for key in ("model_dir", "base_dir", "adapter_dir", "checkpoint", "step", "endpoint"):
            value = getattr(self, key)
            if value is not None:
                out[key] = str(value) if isinstance(value, Path) else value
        return {**out, **self.extra}


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalInputError(f"{what} {path} is missing") from None
    except ValueError as err:
        raise EvalInputError(f"{what} {path} is not valid JSON (half-written?): {err}") from None
    if not isinstance(data, dict):
        raise EvalInputError(f"{what} {path} is not a JSON object")
    return data


def arch_of(model_dir: Path) -> dict[str, Any]:
    """The architecture keys of a model directory's config.json."""
    config = _read_json(model_dir / "config.json", "model config")
    return {k: config.get(k) for k in ARCH_KEYS if k in config}


def arch_mismatch(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """`key: a vs b` for every architecture key both configs set differently."""
    return [f"{k}: {a[k]} vs {b[k]}" for k in ARCH_KEYS if k in a and k in b and a[k] != b[k]]


def looks_like_checkpoint(path: Path) -> bool:
    return bool(_STEP.match(path.name)) or (path / "state.json").exists() or path.parent.name == "checkpoints"


def _checkpoint_dir(path: Path) -> tuple[Path, int]:
    """The step directory and its step number; errors for missing or half-written ones."""
    m = _STEP.match(path.name)
    if m and m.group(1):
        raise EvalInputError(
            f"checkpoint {path} is half-written: the trainer writes .tmp-step-<k>/ and renames it to "
            f"step-<k>/ only when complete; use a finished step-<k> directory")
    if not path.exists():
        tmp = path.with_name(f".tmp-{path.name}")
        if tmp.exists():
            raise EvalInputError(f"checkpoint {path} does not exist yet: {tmp.name} is still being written")
        have = sorted(p.name for p in path.parent.glob("step-*")) if path.parent.is_dir() else []
        hint = f"; available: {', '.join(have)}" if have else ""
        raise EvalInputError(f"checkpoint {path} does not exist{hint}")
    if not path.is_dir():
        raise EvalInputError(f"checkpoint {path} is a file, not a checkpoint directory")
    step = int(m.group(2)) if m else -1
    return path, step


def _weights_present(model: Path, lora: bool) -> list[str]:
    """Missing-file messages for the model/ directory of a checkpoint."""
    need = ["adapter_config.json"] if lora else ["config.json"]
    missing = [f"model/{n}" for n in need if not (model / n).is_file()]
    pattern = "adapter_model.*" if lora else "*.safetensors"
    if not [p for p in model.glob(pattern) if p.stat().st_size > 0] and not list(model.glob("*.bin")):
        missing.append(f"model/{pattern}")
    return missing


def load_checkpoint(path: str | Path, base: str | None = None) -> Policy:
    """A `Policy` for checkpoint `path`, checked for completeness and for belonging to `base`
    (a model name or directory; default: the base model recorded in state.json)."""
    from ragen_cli.train.checkpoint import resolve_best

    ckpt, step = _checkpoint_dir(resolve_best(Path(path).expanduser()))
    if not (ckpt / "state.json").is_file():
        inner = [p.name for p in (*ckpt.glob("step-*"), *ckpt.glob("checkpoints/step-*")) if p.is_dir()]
        if inner:
            raise EvalInputError(f"{ckpt} is not a checkpoint but holds checkpoints; pick one of: "
                                 f"{', '.join(sorted(inner))}")
        raise EvalInputError(f"checkpoint {ckpt} is half-written or not a ragen checkpoint: no state.json")
    state = _read_json(ckpt / "state.json", "checkpoint state")
    bad = state_problems(state)
    if bad:
        raise EvalInputError(f"checkpoint state {ckpt / 'state.json'}: {'; '.join(bad)} (not written by ragen, or edited)")
    lora = bool(state.get("lora"))
    model = ckpt / "model"
    if not model.is_dir():
        raise EvalInputError(f"checkpoint {ckpt} has no model/ directory (missing weights)")
    missing = _weights_present(model, lora)
    if missing:
        raise EvalInputError(f"checkpoint {ckpt} is missing weights: {', '.join(missing)}")
    step = int(state.get("step", step))
    base_dir = _base_dir(ckpt, state, base)
    if lora:
        unreadable = safetensors_shapes(sorted(model.glob("adapter_model*.safetensors")))[1]
        if unreadable:
            raise EvalInputError(f"checkpoint {ckpt} has a broken adapter: {'; '.join(unreadable)}")
        policy = Policy(label=str(ckpt), kind="lora-checkpoint", tokenizer_dir=base_dir, base_dir=base_dir,
                        adapter_dir=model, checkpoint=ckpt, step=step, content_hash=content_hash(model))
        check_adapter_fits(policy, state.get("base_model"))
        return policy
    if base_dir is not None:
        bad = arch_mismatch(arch_of(model), arch_of(base_dir))
        if bad:
            raise EvalInputError(
                f"checkpoint {ckpt} belongs to another model: its weights differ from {base_dir} "
                f"({'; '.join(bad)})")
    broken = weight_problems(model)
    if broken:
        raise EvalInputError(f"checkpoint {ckpt} cannot be loaded whole, so it is not evaluated: {'; '.join(broken)}")
    tok = model if (model / "tokenizer_config.json").exists() else base_dir
    if tok is None:
        raise EvalInputError(f"checkpoint {ckpt} has no tokenizer files and its base model is unknown")
    return Policy(label=str(ckpt), kind="checkpoint", model_dir=model, tokenizer_dir=tok, base_dir=base_dir,
                  checkpoint=ckpt, step=step, content_hash=content_hash(model))


def _base_dir(ckpt: Path, state: dict, base: str | None) -> Path | None:
    """The base model directory: `base` if given, else state.json's `base_model` (required for
    LoRA, optional for full weights)."""
    from ragen_cli.models.builtin import ModelError, resolve_model

    ref = base or state.get("base_model")
    if not ref:
        if state.get("lora"):
            raise EvalInputError(f"LoRA checkpoint {ckpt} does not name its base model; pass --model BASE")
        return None
    try:
        return resolve_model(str(ref))
    except ModelError as err:
        how = "" if base else " (recorded in state.json; pass --model BASE if it moved)"
        raise EvalInputError(f"base model of checkpoint {ckpt}: {err}{how}") from None


def check_adapter_fits(policy: Policy, recorded_base: str | None) -> None:
    """A LoRA adapter must sit on the model it was trained on: compare the adapter's own
    `base_model_name_or_path` architecture (when that directory exists) with the base used."""
    config = _read_json(policy.adapter_dir / "adapter_config.json", "adapter config")
    trained_on = config.get("base_model_name_or_path") or recorded_base
    if not trained_on or not Path(trained_on).is_dir() or policy.base_dir is None:
        return
    bad = arch_mismatch(arch_of(Path(trained_on)), arch_of(policy.base_dir))
    if bad:
        raise EvalInputError(
            f"checkpoint {policy.checkpoint} belongs to another model: its adapter was trained on "
            f"{trained_on}, not {policy.base_dir} ({'; '.join(bad)})")


def model_policy(name_or_dir: str) -> Policy:
    """A `Policy` for a base model (built-in name, local HF directory or cached hub id)."""
    from ragen_cli.models.builtin import ModelError, resolve_model

    try:
        path = resolve_model(name_or_dir)
    except ModelError as err:
        raise EvalInputError(str(err)) from None
    return Policy(label=name_or_dir, kind="model", model_dir=path, tokenizer_dir=path,
                  content_hash=content_hash(path))
