"""Where a training step's time goes, and how close rollout and update run to this machine's peak.

    .venv/bin/python bench/step_profile.py                                  # specs/bandit.yaml, 6 steps
    .venv/bin/python bench/step_profile.py --steps 8 --set deepspeed.precision=fp32

Measures this machine's matmul peak in the run's precision (torch.matmul of square matrices,
the best of a few sizes, with the threads the run gets), then runs `ragen train SPEC` for
`--steps` steps (validation at the spec's cadence; --set overrides as `ragen
train`) and reads the run's own timers: `timing/*_s` in metrics.jsonl, and a checkpoint's time
from the gap between its step's metrics line and its `checkpoint` event. Prints per step, per
phase (rollout, old scores, collapse metrics, update, sync, parity probe, validation,
checkpoint), seconds and share of the step (the training step plus its validation and
checkpoint), and for rollout and update the achieved FLOP/s as a fraction of the peak. The last
line is one JSON object: precision, native_bf16, peak_gflops, step_s (median of the steady
steps, 4 on), warmup_s (slowest of the first 3), collapse_share (at the spec's cadence),
rollout_peak_frac, update_peak_frac, and val_0.9_s (seconds from the command's start to the
first validation line whose first env's success reaches 0.9; null if none).

FLOPs are counted on the tokens the kernels ran (not the model-FLOPs of MFU, which would count
every prompt token of every row): a forward pass costs 2 N per token, N the non-embedding
parameters (Kaplan et al. 2020, arXiv 2001.08361, sec. 2.1); attention's own O(T^2) term is left
out (a bandit row is ~340 tokens, where it is a few percent). The rollout counts
`perf/rollout_tokens` (every distinct token prefix of the step's trajectories once, as an ideal
prefix cache runs them; vLLM caches whole 32-token blocks, so it runs a little more) plus the
vocabulary projection (2 V d) per generated token. The
update counts `perf/update_tokens` (each group's shared prompt once with `train.share_prefix`,
every pass) at 2 N forward + 2 N backward through the activations + 2 N for weight gradients
when all weights train (the usual 6 N); with a LoRA adapter the frozen weights take no weight
gradient (4 N); gradient checkpointing adds a second forward (+2 N). The logits at the sampled
columns are left out of the update (16 of ~340 columns in a bandit row).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from base_model import SPECS

PHASES = ("rollout", "old_scores", "collapse", "update", "sync", "parity", "val", "checkpoint")
"""The phases, each read from `timing/<phase>_s` (checkpoint: from events.jsonl)."""

WARMUP_STEPS = 3
"""Steps 1..3 are the warm-up; the steady median is over the steps after them."""


# ---- the arithmetic (tests/test_step_profile.py) ----

def matmul_flops(m: int, k: int, n: int) -> float:
    """FLOPs of an [m,k] @ [k,n] matmul: m n multiply-adds of length k = 2 m k n."""
    return 2.0 * m * k * n


def peak_fraction(flops: float, seconds: float, peak_flops_per_s: float) -> float:
    """Achieved FLOP/s as a fraction of the peak; 0 for a phase that took no time."""
    if seconds <= 0 or peak_flops_per_s <= 0:
        return 0.0
    return flops / seconds / peak_flops_per_s


def body_params(config: dict) -> int:
    """Non-embedding parameters of a Llama-style decoder (SmolLM2, Qwen2) from its HF config:
    per layer q and o (d x d), k and v (d x kv each, kv = heads_kv x head_dim), gate, up and down
    (d x ff each); norms and biases are left out (under 0.1%)."""
    d, ff, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or d // heads
    kv = config.get("num_key_value_heads", heads) * head_dim
    return layers * (2 * d * d + 2 * d * kv + 3 * d * ff)


def rollout_flops(n_body: int, tokens: float, generated: float, vocab: int, d: int) -> float:
    """Forward FLOPs of the rollout: 2 N per token of the trajectories, plus the vocabulary
    projection 2 V d for each generated token."""
    return 2.0 * n_body * tokens + 2.0 * vocab * d * generated


def update_flops(n_body: int, tokens: float, lora: bool, grad_ckpt: bool) -> float:
    """Forward and backward FLOPs of the update: 2 N forward, 2 N backward through the
    activations, 2 N for weight gradients unless the weights are frozen (LoRA), 2 N more for
    the recomputed forward under gradient checkpointing."""
    per_token = 2 + 2 + (0 if lora else 2) + (2 if grad_ckpt else 0)
    return per_token * n_body * tokens


def step_phases(record: dict, checkpoint_s: float = 0.0) -> dict[str, float]:
    """Seconds of each phase of one step's metrics line (absent = 0), plus `other` (the rest of
    `timing/step_s`, which holds every phase but validation and checkpoint) and `total`."""
    out = {p: float(record.get(f"timing/{p}_s") or 0.0) for p in PHASES if p != "checkpoint"}
    out["checkpoint"] = checkpoint_s
    step = float(record.get("timing/step_s") or 0.0)
    inside = sum(v for p, v in out.items() if p not in ("val", "checkpoint"))
    out["other"] = max(step - inside, 0.0)
    out["total"] = step + out["val"] + checkpoint_s
    return out


def shares(phases: dict[str, float]) -> dict[str, float]:
    """Each phase's share of the step's `total` (0 for an empty step)."""
    total = phases["total"]
    return {p: (v / total if total > 0 else 0.0) for p, v in phases.items() if p != "total"}


def steady_median(step_s: list[float], warmup: int = WARMUP_STEPS) -> float:
    """Median step time after the first `warmup` steps (of all steps when there are no more)."""
    steady = step_s[warmup:] or step_s
    return statistics.median(steady) if steady else 0.0


def warmup_s(step_s: list[float], warmup: int = WARMUP_STEPS) -> float:
    """The slowest of the first `warmup` steps."""
    return max(step_s[:warmup], default=0.0)


def collapse_share(collapse_s: list[float], step_s: list[float], every: int) -> float:
    """Share of a step the collapse metrics take at their cadence: the median cost of a step
    that computes them, spread over `every` steps, over the median step."""
    if not collapse_s or not step_s or every <= 0:
        return 0.0
    return statistics.median(collapse_s) / every / statistics.median(step_s)


def first_reaching(metrics: list[dict], threshold: float) -> tuple[int, float, str] | None:
    """(step, time stamp, metric) of the first metrics line after step 0 whose validation success
    on the run's first validation env (the first `val/<env>/success` the run logged: the seen
    arms of the bandit) reaches `threshold`; None if none does."""
    key = next((k for r in metrics for k in r if k.startswith("val/") and k.endswith("/success")), None)
    for r in metrics:
        if key is not None and r["step"] >= 1 and r.get(key) is not None and r[key] >= threshold:
            return r["step"], r["time"], key
    return None


def checkpoint_seconds(metrics: list[dict], events: list[dict]) -> dict[int, float]:
    """Step -> seconds of its checkpoint: the `checkpoint` event's time stamp minus that step's
    metrics line (saved right after it is written; the health verdict between takes milliseconds)."""
    logged = {r["step"]: r["time"] for r in metrics if "time" in r}
    return {e["step"]: e["time"] - logged[e["step"]] for e in events
            if e.get("kind") == "checkpoint" and e["step"] in logged}


# ---- measuring ----

def measure_peak(dtype_name: str, sizes=(512, 1024, 2048), repeats: int = 5) -> float:
    """The best FLOP/s of torch.matmul on n x n matrices in `dtype_name` (median of `repeats`
    after a warm-up, best over `sizes`)."""
    import torch

    dtype = getattr(torch, dtype_name)
    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        torch.matmul(a, b)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - t0)
        best = max(best, matmul_flops(n, n, n) / statistics.median(times))
    return best


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="bandit", help="shipped spec name or a spec file")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--set", action="append", default=[], dest="sets", help="as `ragen train --set`")
    ap.add_argument("--keep", type=Path, default=None, help="run in this output dir and keep it (default: a temp dir)")
    args = ap.parse_args(argv)
    from ragen_cli.device import CPU_BF16_FLAGS, PRECISION_DTYPES, cpu_flags, resolve_precision, resolved
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.spec.loader import load_spec

    path = Path(args.spec) if args.spec.endswith((".yaml", ".yml")) else SPECS / f"{args.spec}.yaml"
    sets = [f"train.steps={args.steps}", "name=profile", *args.sets]
    spec = load_spec(path, sets)
    precision, _ = resolve_precision(spec.deepspeed.precision, resolved(spec.deepspeed.device))
    native = bool(set(CPU_BF16_FLAGS) & cpu_flags())
    peak = measure_peak(PRECISION_DTYPES[precision])
    print(f"matmul peak ({precision}): {peak / 1e9:.1f} GFLOP/s", flush=True)
    config = json.loads((resolve_model(spec.model.name, PRECISION_DTYPES[precision]) / "config.json").read_text())
    n_body, vocab, d = body_params(config), config["vocab_size"], config["hidden_size"]
    lora, ckpt = spec.model.lora is not None, spec.train.gradient_checkpointing
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        cmd = [str(Path(sys.executable).parent / "ragen"), "train", str(path)]
        cmd += [x for s in [*sets, f"output.dir={out}"] for x in ("--set", s)]
        t0, launched = time.perf_counter(), time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        metrics = _jsonl(out / "profile" / "metrics.jsonl")
        events = _jsonl(out / "profile" / "events.jsonl")
    ckpts = checkpoint_seconds(metrics, events)
    steps = [r for r in metrics if r["step"] >= 1 and "timing/step_s" in r]
    header = "step " + " ".join(f"{p:>11}" for p in (*PHASES, "other")) + "     total  roll%pk  upd%pk"
    print(header)
    fracs: dict[str, list[float]] = {"rollout": [], "update": []}
    for r in steps:
        ph = step_phases(r, ckpts.get(r["step"], 0.0))
        sh = shares(ph)
        generated = r.get("perf/rollout_tokens_per_s", 0.0) * ph["rollout"]
        roll = peak_fraction(rollout_flops(n_body, r.get("perf/rollout_tokens", generated), generated, vocab, d),
                             ph["rollout"], peak)
        upd_tokens = r.get("perf/update_tokens", r.get("perf/update_tokens_per_s", 0.0) * ph["update"])
        upd = peak_fraction(update_flops(n_body, upd_tokens, lora, ckpt), ph["update"], peak)
        fracs["rollout"].append(roll)
        fracs["update"].append(upd)
        cells = " ".join(f"{ph[p]:6.1f}s {100 * sh[p]:2.0f}%" for p in (*PHASES, "other"))
        print(f"{r['step']:4d} {cells} {ph['total']:8.1f}s {100 * roll:7.1f} {100 * upd:7.1f}")
    step_s = [r["timing/step_s"] for r in steps]
    steady = steps[WARMUP_STEPS:] or steps
    every = spec.monitor.collapse.every
    share = collapse_share([r["timing/collapse_s"] for r in steady if "timing/collapse_s" in r],
                           [r["timing/step_s"] for r in steady], every)
    reached = first_reaching(metrics, 0.9)
    print(f"command wall {wall:.0f}s; n_body {n_body / 1e6:.1f}M, lora {lora}, grad ckpt {ckpt}; first validation "
          + (f"{reached[2]} >= 0.9 at step {reached[0]}, {reached[1] - launched:.0f}s after the command's start"
             if reached else ">= 0.9: not within these steps"))
    print(json.dumps({
        "precision": precision, "native_bf16": native, "peak_gflops": round(peak / 1e9, 1),
        "step_s": round(steady_median(step_s), 2), "warmup_s": round(warmup_s(step_s), 2),
        "collapse_share": round(share, 3),
        "rollout_peak_frac": round(statistics.median(fracs["rollout"][WARMUP_STEPS:] or fracs["rollout"]), 4),
        "update_peak_frac": round(statistics.median(fracs["update"][WARMUP_STEPS:] or fracs["update"]), 4),
        "val_0.9_s": round(reached[1] - launched, 1) if reached else None,  # from the command's start
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
