"""Subprocess script for tests/test_sync_parity.py: a real 2-step run (tiny-random, vLLM engine in
this process, DeepSpeed, LoRA merged sync), with the real weight sync (`none`) or one that
pushes only layer 0's weights from step 2 on (`half`, injected at `sync.push_weights`). Prints
one JSON line: the error type (or null) and the run directory. Its own process: an in-process
vLLM engine must not share one with other tests' imports.

    python tests/sync_fault_run.py OUT_DIR none|half|stale [fp32|bf16]
    python tests/sync_fault_run.py OUT_DIR none,half        # both runs, into OUT_DIR/none and OUT_DIR/half

`stale`: no weight sync at all from step 2 on. The precision defaults to fp32; the tests run
both (bf16: a bf16 trainer whose merged LoRA an fp32 engine serves). Several faults run one after the other
in this process, each run's engine closed before the next opens (a second engine starts in a
few seconds: its imports are done); one RESULT line each, with its fault.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))


def main(out: Path, fault: str, precision: str = "fp32") -> dict:
    from test_train_e2e import TINY, run_tiny

    from ragen_cli.train import sync as stages  # the module the loop pushes weights through
    from ragen_cli.train.lora import merged_state_dict

    real_push, calls = stages.push_weights, []
    if fault in ("half", "stale"):

        def half_sync(run, tag):  # step 1 syncs as it should; from step 2 on, layer 0 only
            calls.append(tag)
            if len(calls) == 1:
                return real_push(run, tag)
            if fault == "half":
                state = merged_state_dict(run.engines.actor.module)
                run.backend.sync({k: v for k, v in state.items() if "layers.1." not in k})
            return {}

        stages.push_weights = half_sync
    sets = [s for s in TINY if not s.startswith("rollout.backend")] + [
        "rollout.backend=vllm", "model.lora={rank: 8, alpha: 16}", "train.steps=2", "train.lr_actor=1e-2",
        "algorithm.entropy_coef=1.0", "algorithm.adv_estimator=grpo", "checkpoint.every=0",
        f"deepspeed.precision={precision}"]
    try:
        run_tiny(out, sets)
    except Exception as exc:  # the test reads the run directory for the rest
        return {"fault": fault, "error": type(exc).__name__, "message": str(exc)}
    finally:
        stages.push_weights = real_push
    return {"fault": fault, "error": None}


if __name__ == "__main__":
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process (as in a run)
    faults = sys.argv[2].split(",")
    for name in faults:
        where = Path(sys.argv[1]) / name if len(faults) > 1 else Path(sys.argv[1])
        print("RESULT " + json.dumps(main(where, name, *sys.argv[3:4])), flush=True)
    os._exit(0)  # skip interpreter teardown once the result is out (as the vLLM probes)
