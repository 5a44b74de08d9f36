"""Helpers the light `commands.py` needs (yaml only; no torch)."""

from __future__ import annotations

import yaml


def spec_yaml(spec) -> str:
    """The resolved spec (preset applied, every field explicit) as YAML: the run's spec.yaml."""
    header = f"# ragen train --resume <run dir>   (resolved spec of run '{spec.name}')\n"
    return header + yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
