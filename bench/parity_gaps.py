"""The weight-sync check (rollout/parity.py) on a real engine and trainer: fresh, stale and
half-synced engines, per precision and update size.

    .venv/bin/python bench/parity_gaps.py                                  # smollm2-135m-instruct, fp32 and bf16
    .venv/bin/python bench/parity_gaps.py --model tiny-random              # seconds, not minutes

For each precision: the trainer's model (transformers, with a LoRA adapter as the shipped specs)
and a vLLM engine in that dtype, both on the same weights; bandit rollouts sampled by the engine
give the probe rows, cut into disjoint probes of at least `--tokens` sampled tokens (as the run's
`rollout.parity_tokens`). For each update size (the adapter's B matrices set to N(0, u^2); the A
matrices are random as peft initialises them), each probe is judged (`judge_sync`) with the
engine in three states:

- `fresh`: after the full sync (merged weights, as on CPU): must pass;
- `stale`: before any sync: must fail once the update is decidable (moved above the noise);
- `half`: only the even-numbered layers' new weights synced (a half-applied sync): must fail
  once the update moves the log-probs well above the kernels' noise.

Printed: one JSON line per precision and update size with the probe numbers (noise, gap, moved,
lag: medians), the verdict counts and every probe's raw numbers ([tokens, noise, gap, old,
moved] per engine state, for judging another rule on the same measurements); the CPU's bf16 flags (bf16 on a CPU without
AVX512-BF16 or AMX is emulated and slow; the numbers still show the kernels' disagreement).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path


def cpu_bf16_flags() -> list[str]:
    from ragen_cli.device import CPU_BF16_FLAGS, cpu_flags

    return sorted(set(CPU_BF16_FLAGS) & cpu_flags())


def probe_sets(engine, tok, rows: int, tokens: int, window: int):
    """Disjoint probes, each a list of (ids, sampled-token mask on the shifted grid) rows holding
    at least `tokens` sampled tokens, from `rows` bandit trajectories, each cut to its last
    `window` tokens as the run's probe cuts them (`rollout.parity_window`; 0: whole rows)."""
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec
    from ragen_cli.train.probe import window_start as _window_start

    rollout = RolloutSpec(temperature=1.0, max_turns=1, max_tokens_per_turn=32, think=False)
    trajs = run_rollouts(engine, tok, EnvRef(name="bandit"), list(range(rows)), 1, rollout, 2048, 0)
    probes, current, count = [], [], 0
    for t in trajs:
        start = _window_start(len(t.input_ids), window)
        on = [bool(m) for m in t.loss_mask[start + 1:]]
        if not any(on):
            continue
        current.append((t.input_ids[start:], on))
        count += sum(on)
        if count >= tokens:
            probes.append(current)
            current, count = [], 0
    return probes


def logprobs(scorer, probe) -> list[float]:
    out: list[float] = []
    for ids, on in probe:
        out += [x for x, keep in zip(scorer.score(ids), on) if keep]
    return out


def half_state(new: dict, old: dict) -> dict:
    """The new weights of even-numbered layers, the old ones elsewhere (a half-applied sync)."""
    def layer(name: str) -> int | None:
        m = re.search(r"layers\.(\d+)\.", name)
        return int(m.group(1)) if m else None

    return {k: (new[k] if (layer(k) is not None and layer(k) % 2 == 0) else old[k]) for k in new}


def measure(model_dir: Path, dtype: str, rows: int, tokens: int, updates: list[float], seed: int,
            window: int = 0) -> list[dict]:
    import torch
    from peft import LoraConfig, get_peft_model

    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.rollout.parity import judge_sync
    from ragen_cli.rollout.vllm_backend import VLLMBackend
    from ragen_cli.train.lora import merged_state_dict

    torch.manual_seed(seed)
    tok = load_tokenizer(model_dir)
    base = load_causal_lm(model_dir, dtype)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    trainer = HFBackend(model, tok)
    engine = VLLMBackend(model_dir, dtype, max_model_len=2048, seed=seed, kv_cache_gib=1)
    out = []
    try:
        old_state = {k: v.clone() for k, v in merged_state_dict(model).items()}
        engine.sync(old_state)  # the same weights on both sides (B = 0: the base)
        probes = probe_sets(engine, tok, rows, tokens, window)
        for u in updates:
            t0 = time.perf_counter()
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.zero_()
            engine.sync(old_state)
            base_t = [logprobs(trainer, p) for p in probes]
            base_e = [logprobs(engine, p) for p in probes]
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0.0, u)
            new_t = [logprobs(trainer, p) for p in probes]
            new_state = merged_state_dict(model)
            judged = {}
            for state_name, state in (("stale", None), ("half", half_state(new_state, old_state)), ("fresh", new_state)):
                if state is not None:
                    engine.sync(state)
                after = [logprobs(engine, p) for p in probes]
                judged[state_name] = [judge_sync(bt, be, nt, ea, 0.05, 3.0)
                                      for bt, be, nt, ea in zip(base_t, base_e, new_t, after)]

            def med(xs):
                return round(statistics.median(xs), 5)

            row = {"precision": dtype, "model": model_dir.name, "update_std": u, "window": window, "probes": len(probes),
                   "tokens_per_probe": med([c.tokens for c in judged["fresh"]]), "cpu_bf16_flags": cpu_bf16_flags(),
                   "noise": med([c.noise for c in judged["fresh"]]), "moved": med([c.moved for c in judged["fresh"]]),
                   "decidable": sum(c.decidable for c in judged["fresh"])}
            for state_name, checks in judged.items():
                row[f"{state_name}_gap"] = med([c.gap for c in checks])
                row[f"{state_name}_lag"] = med([c.lag for c in checks]) if checks[0].moved > 0 else None
                row[f"{state_name}_verdicts"] = {v: sum(c.verdict == v for c in checks) for v in ("ok", "lagging", "off")}
            # each probe's raw numbers, so another rule can be judged on the same measurements
            row["probes_raw"] = {name: [[c.tokens, round(c.noise, 6), round(c.gap, 6), round(c.old, 6), round(c.moved, 6)]
                                        for c in checks] for name, checks in judged.items()}
            row["seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps(row), flush=True)
            out.append(row)
    finally:
        engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct", help="built-in model name or model directory")
    ap.add_argument("--precisions", default="float32,bfloat16")
    ap.add_argument("--rows", type=int, default=48, help="bandit trajectories to cut into probes")
    ap.add_argument("--tokens", type=int, default=64, help="sampled tokens per probe (rollout.parity_tokens)")
    ap.add_argument("--updates", default="0,0.0005,0.002,0.01,0.03", help="std of the adapter's B after each 'update'")
    from ragen_cli.spec.models import RolloutSpec

    ap.add_argument("--window", type=int, default=RolloutSpec().parity_window,
                    help="tokens of each row the probe scores, its last ones (rollout.parity_window; 0: whole rows)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from ragen_cli.models.builtin import resolve_model

    for dtype in args.precisions.split(","):
        model_dir = Path(args.model) if Path(args.model).is_dir() else resolve_model(args.model, dtype)
        measure(model_dir, dtype, args.rows, args.tokens, [float(u) for u in args.updates.split(",")], args.seed,
                args.window)
    return 0


if __name__ == "__main__":
    sys.exit(main())
