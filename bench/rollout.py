"""Rollout throughput: vLLM vs HF `generate` on multi-turn Sokoban, in one run.

    .venv/bin/python bench/rollout.py                       # P=8, N=4, 5 turns, SmolLM2, fp32
    .venv/bin/python bench/rollout.py --dtype bfloat16 --repeats 2

Both backends run the same workload (the driver, P groups x N copies, `max_tokens_per_turn`
tokens per turn, temperature 1) on the built-in model; rounds alternate vLLM, HF, vLLM, HF,
... so a change in machine load hits both. Each backend is warmed up once before timing. The
vLLM engine starts once (its start-up is reported, not counted). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--groups", type=int, default=8, help="P")
    ap.add_argument("--group-size", type=int, default=4, help="N")
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128, help="max tokens per turn")
    ap.add_argument("--repeats", type=int, default=1, help="timed rounds per backend")
    ap.add_argument("--env", default="sokoban")
    ap.add_argument("--vllm-duplicate", action="store_true",
                    help="vLLM: send the N copies of a prompt as N requests (n=1) instead of one request with n=N")
    return ap.parse_args()


def _round(backend, tok, args, seed: int) -> dict:
    from ragen_cli.rollout.driver import timed_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    rollout = RolloutSpec(max_turns=args.turns, max_tokens_per_turn=args.max_tokens, temperature=1.0)
    seeds = list(range(seed, seed + args.groups))
    trajs, stats = timed_rollouts(backend, tok, EnvRef(name=args.env), seeds, args.group_size,
                                  rollout, 4096, seed)
    return {"tokens": sum(t.num_generated for t in trajs), "seconds": stats["timing/rollout_s"],
            "turns": stats["episode/turns"], "format_error_ratio": stats["episode/format_error_ratio"],
            "prompt_tokens_last": sum(len(t.input_ids) - t.num_generated for t in trajs)}


def main() -> None:
    args = _args()
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.rollout.vllm_backend import VLLMBackend

    model_dir = resolve_model(args.model, args.dtype)
    tok = load_tokenizer(model_dir)
    hf = HFBackend(load_causal_lm(model_dir, args.dtype), tok, batch_size=args.groups * args.group_size)
    start = time.perf_counter()
    vllm = VLLMBackend(model_dir, args.dtype, max_model_len=4096, seed=0, kv_cache_gib=2)
    vllm.duplicate_prompts = args.vllm_duplicate
    startup = time.perf_counter() - start
    for backend in (hf, vllm):  # warm-up: one generate call each
        backend.generate([tok("warm up", add_special_tokens=False)["input_ids"]], n=2, max_tokens=8,
                         temperature=1.0, top_p=1.0, seed=0)
    rounds: dict[str, list[dict]] = {"hf": [], "vllm": []}
    for r in range(args.repeats):
        for name, backend in (("vllm", vllm), ("hf", hf)):
            rounds[name].append(_round(backend, tok, args, seed=1000 + 100 * r))
            print(name, rounds[name][-1], flush=True)
    rate = {k: sum(x["tokens"] for x in v) / sum(x["seconds"] for x in v) for k, v in rounds.items()}
    print(json.dumps({
        "workload": {"env": args.env, "P": args.groups, "N": args.group_size, "turns": args.turns,
                     "max_tokens_per_turn": args.max_tokens, "model": args.model, "dtype": args.dtype},
        "vllm_startup_s": round(startup, 1), "rounds": rounds,
        "tokens_per_s": {k: round(v, 1) for k, v in rate.items()},
        "ratio_vllm_over_hf": round(rate["vllm"] / rate["hf"], 2),
    }, indent=1))


if __name__ == "__main__":
    main()
