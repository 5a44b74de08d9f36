"""Which accelerator this machine has, decided without importing torch (it takes seconds)."""

from __future__ import annotations

import os
import shutil


def detect_device() -> str:
    """'cuda' when an NVIDIA driver is visible, else 'cpu'."""
    return "cuda" if shutil.which("nvidia-smi") and os.path.exists("/dev/nvidiactl") else "cpu"


def resolved(device: str) -> str:
    """A spec's `deepspeed.device` with `auto` resolved to this machine's device."""
    return detect_device() if device == "auto" else device
