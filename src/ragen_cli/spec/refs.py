"""Do the names in a spec resolve here? The model (built-in, local directory, hub id) and envs.

Imports of `ragen_cli.models.builtin` and `ragen_cli.envs.registry` are lazy (inside the
functions) so that loading `ragen_cli.spec` stays light.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator

# Used only when ragen_cli.models.builtin cannot be imported (it lists the same two names).
FALLBACK_BUILTIN_MODELS = ("smollm2-135m-instruct", "tiny-random")
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def builtin_model_names() -> list[str]:
    try:
        from ragen_cli.models.builtin import BUILTIN_MODELS
    except ImportError:
        return list(FALLBACK_BUILTIN_MODELS)
    return sorted(BUILTIN_MODELS)


def model_problems(name: str) -> list[str]:
    """Empty when `name` is a built-in, a local HF directory with config.json, or a hub id."""
    builtins = builtin_model_names()
    if name in builtins:
        return []
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        if (path / "config.json").is_file():
            return []
        return [f"directory '{name}' has no config.json, so it is not a Hugging Face model directory"]
    if name.startswith((".", "/", "~")) or path.exists():
        return [f"no model directory at '{name}' (relative paths start at {Path.cwd()})"]
    if HUB_ID.match(name):
        return []
    close = difflib.get_close_matches(name, builtins, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else f"; built-in models: {', '.join(builtins)}"
    return [f"unknown model '{name}': not a built-in, a local directory or a hub id (org/name){hint}"]


def hub_cache_problem(name: str) -> str:
    """With HF_HUB_OFFLINE set, a hub id whose snapshot is not in the local Hugging Face cache
    cannot be loaded (training would stop at the model): why, with the closest cached id; else ''."""
    if not HUB_ID.match(name) or Path(os.path.expanduser(name)).exists():
        return ""
    from ragen_cli.models.builtin import hub_offline

    if not hub_offline():
        return ""
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return ""
    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return ""
    cache = Path(HF_HUB_CACHE)
    cached = [d.name[len("models--"):].replace("--", "/", 1) for d in cache.glob("models--*")] if cache.is_dir() else []
    close = difflib.get_close_matches(name, cached, n=1, cutoff=0.8)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return (f"'{name}' is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set, so it cannot be "
            f"downloaded{hint} (fetch it with `huggingface-cli download {name}` where the hub is reachable)")


@contextlib.contextmanager
def cwd_on_path() -> Iterator[None]:
    """Let `my_env:MyEnv` import `my_env.py` from the directory ragen runs in."""
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def env_problems(name: str, config: dict[str, Any]) -> list[str]:
    """Messages from the env registry's `check_env` (empty when the env builds with `config`)."""
    with cwd_on_path():
        try:
            from ragen_cli.envs.registry import check_env
        except ImportError:
            return _fallback_env_problems(name)
        try:
            return list(check_env(name, config))
        except Exception as exc:  # a user's env module may raise anything while importing
            return [f"env '{name}' failed to load: {type(exc).__name__}: {exc}"]


def _fallback_env_problems(name: str) -> list[str]:
    """Until envs/registry.py exists: `module:Class` must import; built-in names pass."""
    if ":" not in name:
        return []
    module, _, attr = name.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr, None)
    except Exception as exc:
        return [f"cannot import module '{module}': {type(exc).__name__}: {exc}"]
    return [] if found is not None else [f"module '{module}' has no attribute '{attr}'"]
