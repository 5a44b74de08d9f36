"""Peak memory of one update step with and without gradient checkpointing (train.gradient_checkpointing).

One WebShop-sized update: SmolLM2-135M-Instruct with the WebShop spec's LoRA (rank 16), a
micro-batch of `--batch` trajectories of `--seq` tokens (WebShop's grow to 3-4k), log-probs and
entropy at the last `--sampled` columns (the trained reply tokens, as the trainer computes them),
one backward. Each setting runs in a fresh process, so its peak RSS (ru_maxrss) is its own; the
last line is JSON with both peaks, both times and the ratios (one run, same machine).

    .venv/bin/python bench/grad_ckpt_memory.py [--batch 2] [--seq 3000] [--sampled 300]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import torch
from ragen_cli.algos.logits import entropy_from_logits, logprobs_from_logits
from ragen_cli.models.builtin import resolve_model
from ragen_cli.models.load import load_causal_lm
from ragen_cli.spec.models import LoraSpec
from ragen_cli.train import lora
from ragen_cli.train.engine import enable_gradient_checkpointing

ckpt, B, T, K = sys.argv[1] == "on", int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
model = load_causal_lm(resolve_model("smollm2-135m-instruct"), "float32", "cpu")
if ckpt:
    enable_gradient_checkpointing(model)
model = lora.wrap(model, LoraSpec(rank=16, alpha=32)).train()
ids = torch.randint(0, 49152, (B, T), generator=torch.Generator().manual_seed(1))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
logits = model(input_ids=ids, use_cache=False, logits_to_keep=K + 1).logits[:, :-1]
loss = -logprobs_from_logits(logits, ids[:, T - K:]).mean() - 0.001 * entropy_from_logits(logits).mean()
loss.backward()
print(json.dumps({"peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "after_load_gb": base / 2**20, "seconds": time.perf_counter() - start}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=3000)
    ap.add_argument("--sampled", type=int, default=300)
    args = ap.parse_args()
    env = {**os.environ, "DS_ACCELERATOR": "cpu"}
    out = {"batch": args.batch, "seq": args.seq, "sampled": args.sampled}
    for mode in ("off", "on"):
        r = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.batch), str(args.seq), str(args.sampled)],
                           capture_output=True, text=True, env=env)
        if r.returncode:
            sys.exit(f"gradient checkpointing {mode}: exit {r.returncode}\n{r.stderr[-2000:]}")
        out[mode] = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"checkpointing {mode:3s}: peak RSS {out[mode]['peak_rss_gb']:.2f} GB "
              f"(after loading {out[mode]['after_load_gb']:.2f} GB), forward+backward {out[mode]['seconds']:.1f} s")
    out["peak_ratio_on_off"] = out["on"]["peak_rss_gb"] / out["off"]["peak_rss_gb"]
    grow = lambda m: out[m]["peak_rss_gb"] - out[m]["after_load_gb"]  # noqa: E731
    out["update_memory_ratio_on_off"] = grow("on") / grow("off")
    out["time_ratio_on_off"] = out["on"]["seconds"] / out["off"]["seconds"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
