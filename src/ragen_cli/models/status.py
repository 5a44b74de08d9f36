"""The state of the model cache and of the machine's resources (stdlib only)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ragen_cli.models import cache
from ragen_cli.models.builtin import BUILTIN_MODELS, builtin_dir
from ragen_cli.models import doctor
from ragen_cli.models.doctor import MIN_FREE_DISK_GB, MIN_FREE_MEM_GB, Check

LISTED_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class CachedModel:
    name: str
    dtype: str
    path: Path
    size: int  # bytes
    problems: tuple[str, ...]  # empty when intact


def cached_models(*, full: bool = False) -> list[CachedModel]:
    """The converted built-ins present in the cache (`full` re-hashes their files)."""
    found = []
    for name in BUILTIN_MODELS:
        for dtype in LISTED_DTYPES:
            path = builtin_dir(name, dtype)
            if path.is_dir():
                found.append(CachedModel(name, dtype, path, cache.dir_size(path), tuple(cache.verify_dir(path, full=full))))
    return found


def check_model_cache() -> list[Check]:
    entries = cached_models(full=True)
    if not entries:
        return [Check("model cache", "ok", f"{cache.models_dir()}: empty; built-ins are converted on first use "
                      "(SmolLM2 about 30 s, tiny-random about 10 s)")]
    checks = []
    for e in entries:
        label = f"model {e.name} ({e.dtype})"
        if e.problems:
            checks.append(Check(label, "warn", f"{e.problems[0]}; it is converted again on next use",
                                f"rm -rf {e.path}  (or let the next run rebuild it)"))
        else:
            checks.append(Check(label, "ok", f"{e.path} ({e.size / 1e6:.0f} MB, checksums verified)"))
    return checks


def check_disk(path: Path | None = None) -> Check:
    path = path or cache.cache_root()
    probe = path
    while not probe.exists():
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1e9
    detail = f"{free_gb:.1f} GB free at {probe}"
    if free_gb < MIN_FREE_DISK_GB:
        return Check("disk", "fail", detail + f" (need {MIN_FREE_DISK_GB:.0f} GB for models and checkpoints)",
                     "free space, or point RAGEN_CACHE at a larger disk")
    return Check("disk", "ok", detail)


def mem_available_gb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """MemAvailable from /proc/meminfo in GB (1e9 bytes), or None where there is no such file."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory() -> Check:
    free = mem_available_gb()
    cpus = os.cpu_count() or 1
    if free is None:
        return Check("memory", "warn", f"cannot read /proc/meminfo; {cpus} CPUs")
    detail = f"{free:.1f} GB available, {cpus} CPUs"
    if free < MIN_FREE_MEM_GB:
        return Check("memory", "warn", detail + f" (SmolLM2 training with vLLM rollouts wants {MIN_FREE_MEM_GB:.0f} GB)",
                     "close other programs, use LoRA or bf16, or the tiny-random model")
    return Check("memory", "ok", detail)


def run_doctor(env: dict[str, str]) -> list[Check]:
    """Every check, in the order `ragen doctor` prints them."""
    probes = doctor.run_probes()
    torch_info = probes["torch"].data() or {}
    checks = [doctor.check_torch(probes["torch"]), *doctor.check_packages(), doctor.check_vllm(probes["vllm"])]
    checks += doctor.check_deepspeed(probes["deepspeed"])
    checks.append(doctor.check_ds_accelerator(env, torch_info.get("cuda_available")))
    checks += check_model_cache()
    checks += [check_disk(), check_memory()]
    return checks
