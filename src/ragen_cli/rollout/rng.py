"""The trainer's random state is the trainer's: rollout engines draw and seed on their own.

vLLM seeds torch's global generators when it builds an engine (`set_random_seed(seed)` in its
worker), and that engine runs in the trainer's process on CUDA (and with several ranks); the HF
backend seeds per chunk to make sampling reproducible. Either would reset the trainer's CPU and
CUDA generators (LoRA dropout, the critic head's init, anything random in the update), so a
resumed run, whose generators come back from the checkpoint, would diverge from an uninterrupted
one. Both run inside `kept_rng`, which puts every generator back as it was.
"""

from __future__ import annotations

import contextlib


def rng_devices(cuda_available: bool, device_count: int) -> list[int]:
    """The CUDA devices whose generators `kept_rng` saves: all of them where CUDA is up (vLLM and
    `torch.manual_seed` seed every device), none on a CPU-only machine."""
    return list(range(device_count)) if cuda_available else []


@contextlib.contextmanager
def kept_rng():
    """The block may seed and draw; torch's CPU and CUDA generators are restored after it.

    Not off the main thread: there the block is the rollout that overlaps the update
    (train/ahead.py), and the update owns the generators meanwhile (LoRA dropout): restoring
    them when the rollout ends would rewind its draws at a moment set by timing. That rollout is
    vLLM's, whose per-request seeds draw from its own generators, and its engine was built (and
    seeded the global ones) on the main thread, inside this guard."""
    import threading

    import torch

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    cuda = torch.cuda.is_available()
    with torch.random.fork_rng(devices=rng_devices(cuda, torch.cuda.device_count() if cuda else 0)):
        yield
