"""Shared fixtures. The built-in models are converted once into the user's model cache
(`$RAGEN_CACHE`, default `~/.cache/ragen`) and reused by later runs (see models/builtin.py)."""

from __future__ import annotations

import os
from pathlib import Path

# Tests never reach the Hugging Face hub: a hub id resolves from a (fake) local cache or is an error.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The `tiny-random` built-in (fp32): 2 layers, hidden 64, head_dim 32, SmolLM2 tokenizer."""
    from ragen_cli.models.builtin import resolve_model

    return resolve_model("tiny-random", "float32")


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The `smollm2-135m-instruct` built-in (fp32); the first use converts it (about 30 s)."""
    from ragen_cli.models.builtin import resolve_model

    return resolve_model("smollm2-135m-instruct", "float32")
