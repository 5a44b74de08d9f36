"""Subprocess script for tests/test_rollout_vllm.py: a vLLM engine in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0, as the Plan runs it on CUDA) takes full weights as tensors
(rollout weight_sync "tensors"); prints one JSON line.

    VLLM_ENABLE_V1_MULTIPROCESSING=0 python tests/rollout_vllm_inproc_probe.py MODEL_DIR
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main(model_dir: str) -> dict:
    from rollout_vllm_probe import sync_round_trip

    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.rollout.vllm_backend import VLLMBackend

    tok = load_tokenizer(model_dir)
    model = load_causal_lm(model_dir, "float32")
    import torch

    hf = HFBackend(model, tok)
    torch.manual_seed(1234)  # the trainer's generator; the engine in this process must not move it
    before = torch.get_rng_state()
    vllm = VLLMBackend(model_dir, "float32", max_model_len=1024, seed=0, kv_cache_gib=1, weight_sync="tensors")
    vllm.generate([tok.encode("Hello")], n=2, max_tokens=4, temperature=1.0, top_p=1.0, seed=5)
    rng_kept = bool(torch.equal(before, torch.get_rng_state()))
    try:
        from vllm.v1.engine.core_client import InprocClient

        probe = tok.encode("Push the box onto the target: the box is at (2, 3), you stand at (1, 3), the target at (4, 3).")
        res = {"in_process": isinstance(vllm.llm.llm_engine.engine_core, InprocClient), "rng_kept": rng_kept}
        res["stale_gap"], res["synced_gap"], res["restored_gap"] = sync_round_trip(model, hf, vllm, probe, 1)
        return res
    finally:
        vllm.close()


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])), flush=True)
    os._exit(0)  # as rollout_vllm_probe.py: skip interpreter teardown once the result is out
