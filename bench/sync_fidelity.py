"""What share of a LoRA update a merged sync hands the engine, in bf16 and in fp32, measured on
the adapters a real run saved (train/sync.py's `sync/update_kept` and `sync/update_error`,
computed between two checkpoints instead of two syncs).

    .venv/bin/python bench/sync_fidelity.py RUN_DIR [--dtype bfloat16]

For each pair of consecutive checkpoints (step-a, step-b) of RUN_DIR (a LoRA run), the trainer's
change (alpha/r)(B_b A_b - B_a A_a) on every adapted layer is compared with the change of the
merged weights W + (alpha/r) B A an engine in each dtype would serve: bf16 (the merge before
this fix, and what vLLM would hold in bf16), fp32 (what `rollout.vllm_args.engine_dtype` serves a
bf16 trainer now). The adapters are read in the dtype the trainer held them (`--dtype`, bf16 for
a bf16 run: the tensors its forward computes with). One JSON line per pair and engine dtype.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def load_run_adapter(ckpt: Path, dtype: torch.dtype):
    """The run's base model with the checkpoint's adapter, as the trainer held it."""
    from peft import PeftModel

    from ragen_cli.models.load import load_causal_lm

    state = json.loads((ckpt / "state.json").read_text())
    base = load_causal_lm(state["base_model"], "float32")
    return PeftModel.from_pretrained(base, str(ckpt / "model")).to(dtype)


def fidelity(ckpt_a: Path, ckpt_b: Path, trainer_dtype: torch.dtype, engine_dtype: str) -> dict[str, float]:
    from ragen_cli.train.sync import SyncLedger

    ledger = SyncLedger("merged", engine_dtype)
    ledger.start(load_run_adapter(ckpt_a, trainer_dtype))
    return ledger.record(load_run_adapter(ckpt_b, trainer_dtype))


def main(argv: list[str] | None = None) -> None:
    from ragen_cli.train.checkpoint import list_checkpoints

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--dtype", default="bfloat16", help="the trainer's dtype (bfloat16 or float32)")
    args = ap.parse_args(argv)
    steps = list_checkpoints(Path(args.run_dir) / "checkpoints")
    if len(steps) < 2:
        raise SystemExit(f"{args.run_dir}: needs two checkpoints, found {len(steps)}")
    for (a, pa), (b, pb) in zip(steps, steps[1:]):
        for engine in ("bfloat16", "float32"):
            got = fidelity(pa, pb, getattr(torch, args.dtype), engine)
            print(json.dumps({"run": Path(args.run_dir).name, "from_step": a, "to_step": b, "engine": engine,
                              **{k.split("/")[1]: round(v, 4) for k, v in got.items()}}), flush=True)


if __name__ == "__main__":
    main()
