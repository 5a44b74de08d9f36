"""Subprocess script for tests/test_overlap.py: real runs (tiny-random, vLLM engine in this process,
DeepSpeed, LoRA merged sync as the shipped specs) with `rollout.max_staleness`, one after the
other, each printing one RESULT line (its name and error, or null). Its own process: an
in-process vLLM engine must not share one with other tests' imports.

    python tests/overlap_run.py OUT_DIR

Runs, into OUT_DIR/<name>: `whole` (3 steps, k = 1), `split` (1 step, then resumed to 3, k = 1)
and `sequential` (3 steps, k = 0).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

RUNS = {"whole": [(3, False)], "split": [(1, False), (3, True)], "sequential": [(3, False)]}


def main(out: Path, name: str) -> dict:
    from test_train_e2e import TINY, run_tiny

    k = 0 if name == "sequential" else 1
    sets = [s for s in TINY if not s.startswith("rollout.backend")] + [
        "rollout.backend=vllm", "model.lora={rank: 8, alpha: 16}", "train.lr_actor=1e-2",
        "algorithm.entropy_coef=1.0", "algorithm.adv_estimator=grpo", f"rollout.max_staleness={k}"]
    try:
        for steps, resume in RUNS[name]:
            run_tiny(out / name, sets + [f"train.steps={steps}"], resume=resume)
    except Exception as exc:  # the test reads the run directory for the rest
        return {"run": name, "error": type(exc).__name__, "message": str(exc)}
    return {"run": name, "error": None}


if __name__ == "__main__":
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process (as in a run)
    for run in RUNS:
        print("RESULT " + json.dumps(main(Path(sys.argv[1]), run)), flush=True)
    os._exit(0)  # skip interpreter teardown once the results are out (as the vLLM probes)
