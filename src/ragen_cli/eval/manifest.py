"""The eval manifest: everything needed to reproduce an eval, stored at the top of eval.json.

ragen version, the policy (model / checkpoint path, its content hash, base model of an adapter,
endpoint URL), env names and configs, seeds, sampling parameters, date. Stdlib only.

Content hash: sha256 over the weight and adapter files of a directory, in sorted relative-path
order, of `relpath NUL sha256(file) LF` lines. It changes when any weight byte changes, and not
when the optimizer state, tokenizer or logs next to the weights change.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
from pathlib import Path
from typing import Any

from ragen_cli import __version__

# Files that hold a policy: full weights (safetensors, torch bins) and PEFT adapters.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
ADAPTER_FILES = ("adapter_config.json",)
_SKIP_NAMES = ("optimizer", "optim", "scheduler", "rng", "trainer_state", "training_args")


def is_weight_file(path: Path) -> bool:
    """A file whose bytes define the policy (not optimizer / RNG / trainer state)."""
    name = path.name
    if name in ADAPTER_FILES:
        return True
    if not name.endswith(WEIGHT_SUFFIXES):
        return False
    return "optim" not in name and not any(name.startswith(skip) for skip in _SKIP_NAMES)


def weight_files(directory: Path) -> list[Path]:
    """The weight and adapter files under `directory`, sorted by relative path (POSIX form)."""
    directory = Path(directory)
    found = [p for p in directory.rglob("*") if p.is_file() and is_weight_file(p)]
    found = [p for p in found if not any(part.startswith(_SKIP_NAMES) for part in p.relative_to(directory).parts[:-1])]
    return sorted(found, key=lambda p: p.relative_to(directory).as_posix())


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def content_hash(directory: Path) -> str:
    """`sha256:<hex>` over the weight and adapter files of `directory` (see the module doc)."""
    directory = Path(directory)
    files = weight_files(directory)
    if not files:
        raise FileNotFoundError(f"{directory} holds no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    outer = hashlib.sha256()
    for path in files:
        rel = path.relative_to(directory).as_posix()
        outer.update(f"{rel}\0{file_sha256(path)}\n".encode())
    return "sha256:" + outer.hexdigest()


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def build_manifest(
    *,
    policy: dict[str, Any],
    envs: list[dict[str, Any]],
    seeds: list[int],
    sampling: dict[str, Any],
    backend: str,
    date: str | None = None,
) -> dict[str, Any]:
    """The manifest dict. `policy` is `Policy.describe()` (kind, path, hash, ...); `envs` holds
    `{"name", "config"}`; `sampling` the temperature, top_p, samples, turn limits and seed."""
    return {
        "ragen_version": __version__,
        "date": date or utc_now(),
        "policy": dict(policy),
        "envs": [{"name": e["name"], "config": dict(e.get("config") or {})} for e in envs],
        "seeds": list(seeds),
        "sampling": dict(sampling),
        "backend": backend,
        "host": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
    }
