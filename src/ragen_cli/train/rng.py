"""The RNG states a checkpoint carries (rng.pt) for an exact resume.

python's `random`, numpy's global generator, torch's CPU generator and, when CUDA is in use,
every CUDA device's generator (the engine in the trainer's process reseeds the global torch RNG,
and sampling on a GPU draws from CUDA's). rng.pt is read with `torch.load(weights_only=True)`
and numpy's MT19937 state allowed, so reading a checkpoint never runs pickled code. Checkpoints
written before the CUDA states were kept still load (no "cuda" key).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable


def rng_state(cuda_states: Callable[[], list] | None = None) -> dict[str, Any]:
    """python, numpy and torch RNG states; with `cuda_states` (torch.cuda.get_rng_state_all when
    CUDA is in use) also every CUDA device's, under "cuda"."""
    import numpy as np
    import torch

    out = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if cuda_states is not None:
        out["cuda"] = list(cuda_states())
    return out


def cuda_rng_warning(saved: list | None, cuda_available: bool, device_count: int) -> str | None:
    """Whether to restore saved CUDA RNG states: None to restore (or nothing to restore), else
    the warning to give instead (sampling on CUDA then does not repeat the run exactly)."""
    if saved is None:
        return ("the checkpoint holds no CUDA RNG state (saved on CPU or by an older ragen): "
                "CUDA sampling will not repeat the interrupted run exactly") if cuda_available else None
    if not cuda_available:
        return f"the checkpoint holds the CUDA RNG states of {len(saved)} device(s) and CUDA is not available here: not restored"
    if len(saved) != device_count:
        return (f"the checkpoint holds the CUDA RNG states of {len(saved)} device(s), this process sees "
                f"{device_count}: not restored, so CUDA sampling will not repeat the interrupted run exactly")
    return None


def set_rng_state(state: dict[str, Any]) -> str | None:
    """Restore the RNG states of `rng_state`; returns the warning when CUDA's could not be."""
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    available = torch.cuda.is_available()
    warning = cuda_rng_warning(state.get("cuda"), available, torch.cuda.device_count() if available else 0)
    if warning is None and state.get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["cuda"])
    return warning


def read_rng(path: Path) -> Any:
    """rng.pt without running pickled code: tensors, tuples and numpy's MT19937 state only."""
    import numpy as np
    import torch

    numpy_state = [np._core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    with torch.serialization.safe_globals(numpy_state):
        return torch.load(path, weights_only=True)


def rng_file_problems(path: Path) -> list[str]:
    """rng.pt must load (weights_only) into the python / numpy / torch RNG states."""
    if not path.is_file():
        return ["rng.pt is missing"]
    try:
        payload = read_rng(path)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError, ... on garbage
        first = (str(exc).splitlines() or [""])[0][:120]
        return [f"rng.pt cannot be read ({type(exc).__name__}: {first})"]
    if not isinstance(payload, dict) or not {"python", "numpy", "torch"} <= payload.keys():
        return ["rng.pt does not hold the python, numpy and torch RNG states"]
    if str(getattr(payload["torch"], "dtype", None)) != "torch.uint8":
        return ["rng.pt: the torch RNG state is not a uint8 tensor"]
    return []
