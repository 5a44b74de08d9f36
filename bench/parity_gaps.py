"""The weight-sync parity probe's three gaps, per precision, on a real engine and trainer.

    .venv/bin/python bench/parity_gaps.py                                  # smollm2-135m-instruct, fp32 and bf16
    .venv/bin/python bench/parity_gaps.py --model tiny-random --rows 8     # seconds, not minutes

For each precision: the trainer's model (transformers, with a LoRA adapter as the shipped
specs) and a vLLM engine in that dtype, both on the same weights; rollouts of the bandit env
sampled by the engine give the probe rows. Then, on each row's sampled tokens (the probe of
`train/stages.py`), the largest absolute log-prob gap:

- `noise`: trainer vs engine with the same weights (what the kernels disagree by);
- `stale`: after an update of the adapter (its B matrices set to N(0, `--update`^2); the
  A matrices are random as peft initialises them) that the engine has not received;
- `synced`: the same update after `sync` (merged weights, as on CPU).

A probe must pass every `synced` row and fail every `stale` one. Printed per precision: the
median and largest of each gap over the rows, how many rows the old rule (gap > 0.05 fails)
and the current rule (`rollout.backend.parity_tolerance`: gap > max(0.05, 4 x noise) fails)
get wrong, and the CPU's bf16 support (bf16 on a CPU without AVX512-BF16 or AMX is emulated and
slow; the numbers still show the kernels' disagreement). One JSON line per precision.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def cpu_bf16_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16", "avx512f"))


def probe_rows(engine, tok, rows: int):
    """(token ids, sampled-token mask on the shifted grid) of `rows` bandit trajectories."""
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    rollout = RolloutSpec(temperature=1.0, max_turns=1, max_tokens_per_turn=24, think=False)
    trajs = run_rollouts(engine, tok, EnvRef(name="bandit"), list(range(rows)), 1, rollout, 2048, 0)
    return [(t.input_ids, [bool(m) for m in t.loss_mask[1:]]) for t in trajs]


def gap(trainer, engine, ids, on) -> float:
    from ragen_cli.rollout.backend import parity_gap

    a, b = trainer.score(ids), engine.score(ids)
    return parity_gap([x for x, keep in zip(a, on) if keep], [x for x, keep in zip(b, on) if keep])


def measure(model_dir: Path, dtype: str, rows: int, update: float, seed: int) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model

    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.backend import parity_tolerance
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.rollout.vllm_backend import VLLMBackend
    from ragen_cli.train.lora import merged_state_dict

    torch.manual_seed(seed)
    tok = load_tokenizer(model_dir)
    base = load_causal_lm(model_dir, dtype)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    trainer = HFBackend(model, tok)
    engine = VLLMBackend(model_dir, dtype, max_model_len=2048, seed=seed, kv_cache_gib=1)
    t0 = time.perf_counter()
    try:
        engine.sync(merged_state_dict(model))  # the same weights on both sides (B = 0: the base)
        probes = probe_rows(engine, tok, rows)
        noise = [gap(trainer, engine, ids, on) for ids, on in probes]
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0.0, update)
        stale = [gap(trainer, engine, ids, on) for ids, on in probes]
        engine.sync(merged_state_dict(model))
        synced = [gap(trainer, engine, ids, on) for ids, on in probes]
    finally:
        engine.close()

    def summary(xs):
        return {"median": round(statistics.median(xs), 4), "max": round(max(xs), 4)}

    tol = [parity_tolerance(n, 0.05, 4.0) for n in noise]
    return {
        "precision": dtype, "model": str(model_dir.name), "rows": rows, "update_std": update,
        "cpu_flags": cpu_bf16_flags(), "seconds": round(time.perf_counter() - t0, 1),
        "noise": summary(noise), "stale": summary(stale), "synced": summary(synced),
        "old_rule_false_alarms": sum(g > 0.05 for g in synced), "old_rule_missed_stale": sum(g <= 0.05 for g in stale),
        "new_rule_false_alarms": sum(g > t for g, t in zip(synced, tol)),
        "new_rule_missed_stale": sum(g <= t for g, t in zip(stale, tol)),
        "synced_over_noise_max": round(max(s / max(n, 1e-12) for s, n in zip(synced, noise)), 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct", help="built-in model name or model directory")
    ap.add_argument("--precisions", default="float32,bfloat16")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--update", type=float, default=0.01, help="std of the adapter's B after the 'update'")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from ragen_cli.models.builtin import resolve_model

    for dtype in args.precisions.split(","):
        model_dir = Path(args.model) if Path(args.model).is_dir() else resolve_model(args.model, dtype)
        print(json.dumps(measure(model_dir, dtype, args.rows, args.update, args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
