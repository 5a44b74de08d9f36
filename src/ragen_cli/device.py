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


PRECISION_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
"""`deepspeed.precision` -> torch / vLLM dtype name: the one table of it."""

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""/proc/cpuinfo flags of a CPU with native bf16 matmul (without them torch emulates bf16,
about 100x slower than fp32 on this project's 2-core AMD EPYC)."""


CPU_BF16_ENV = "RAGEN_CPU_BF16"
"""Make this machine's CPU answer as another kind would: `1` reports the CPU_BF16_FLAGS (so
`precision: auto` resolves to bf16, emulated if the CPU lacks them), `0` removes them (auto ->
fp32); unset, /proc/cpuinfo decides. The test suite sets 0 unless told otherwise (tests/conftest.py)."""


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU feature flags from the given text, or this machine's (/proc/cpuinfo, with the
    CPU_BF16_ENV override); empty where there is none."""
    if cpuinfo is not None:
        return _flags(cpuinfo)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = _flags(f.read())
    except OSError:
        flags = set()
    forced = os.environ.get(CPU_BF16_ENV)
    if forced not in (None, "", "0", "1"):
        raise ValueError(f"{CPU_BF16_ENV}={forced!r}: use 1 (native bf16), 0 (none) or leave it unset")
    if forced:
        flags = flags | set(CPU_BF16_FLAGS) if forced == "1" else flags - set(CPU_BF16_FLAGS)
    return flags


def _flags(cpuinfo: str) -> set[str]:
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def cuda_capability() -> float | None:
    """The first GPU's compute capability from nvidia-smi (8.0 for an A100), or None."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return float(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def choose_precision(requested: str, device: str, flags: set[str], capability: float | None) -> tuple[str, str]:
    """(precision, why) for `deepspeed.precision` on this machine. `auto`: bf16 on a GPU of
    compute capability >= 8.0 (Ampere and later) and on a CPU with native bf16 matmul
    (CPU_BF16_FLAGS), fp32 otherwise (fp16 needs loss scaling that RL updates do not like)."""
    if requested != "auto":
        return requested, "set in the spec"
    if device == "cuda":
        if capability is not None and capability >= 8.0:
            return "bf16", f"auto: GPU compute capability {capability:g} has bf16"
        return "fp32", f"auto: GPU compute capability {capability if capability is not None else 'unknown'} has no bf16"
    native = sorted(set(CPU_BF16_FLAGS) & flags)
    if native:
        return "bf16", f"auto: this CPU has native bf16 ({', '.join(native)})"
    return "fp32", "auto: this CPU has no native bf16 (no avx512_bf16 or amx_bf16 flag), where bf16 is emulated and slow"


def resolve_precision(requested: str, device: str) -> tuple[str, str]:
    """`choose_precision` with this machine's CPU flags and GPU capability."""
    if requested != "auto":
        return requested, "set in the spec"
    precision, why = choose_precision(requested, device, cpu_flags(), cuda_capability() if device == "cuda" else None)
    forced = os.environ.get(CPU_BF16_ENV) if device == "cpu" else None
    return precision, f"{why} [{CPU_BF16_ENV}={forced}]" if forced else why


def with_precision(spec, precision: str):
    """`spec` with `deepspeed.precision` replaced by a resolved value (what every part that
    builds a model, engine or DeepSpeed config reads)."""
    return spec.model_copy(update={"deepspeed": spec.deepspeed.model_copy(update={"precision": precision})})
