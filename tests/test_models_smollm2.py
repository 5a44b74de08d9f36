"""The built-in SmolLM2-135M-Instruct: converted from the GGUF, it answers like the real model,
and vLLM loads the same directory and agrees with transformers token for token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ragen_cli.models import cache

pytestmark = pytest.mark.slow

PROMPTS = ["The capital of France is", "def fibonacci(n):"]
MAX_TOKENS = 12

VLLM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from vllm import LLM, SamplingParams

    if __name__ == "__main__":
        model_dir, prompts = sys.argv[1], json.loads(sys.argv[2])
        llm = LLM(model=model_dir, enforce_eager=True, dtype="float32", max_model_len=512, seed=0)
        params = SamplingParams(temperature=0.0, max_tokens=int(sys.argv[3]))
        outs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
        print("RESULT " + json.dumps([list(o.outputs[0].token_ids) for o in outs]))
    """
)


@pytest.fixture(scope="module")
def hf(smollm2_dir):
    from ragen_cli.models.load import load_causal_lm, load_tokenizer

    return load_tokenizer(smollm2_dir), load_causal_lm(smollm2_dir, "float32")


def _greedy(model, ids: list[int], n: int) -> list[int]:
    import torch

    out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False)
    return out[0, len(ids):].tolist()


def test_conversion_is_complete_and_verified(smollm2_dir):
    cfg = json.loads((smollm2_dir / "config.json").read_text())
    # SmolLM2-135M: 30 layers, hidden 576, 9 query / 3 key-value heads of 64
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (30, 576, 9, 3)
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["dtype"] == "float32"
    assert cache.verify_dir(smollm2_dir) == []


def test_greedy_answer_is_sensible(hf):
    tok, model = hf
    # 134.5M parameters (FEASIBILITY.md); the tied lm_head is counted once
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == 134.5
    ids = tok(PROMPTS[0]).input_ids
    assert "Paris" in tok.decode(_greedy(model, ids, 8))
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   add_generation_prompt=True, tokenize=False)
    reply = tok.decode(_greedy(model, tok(chat).input_ids, 16), skip_special_tokens=True)
    assert "Paris" in reply


def test_vllm_loads_it_and_agrees_with_transformers(hf, smollm2_dir, tmp_path):
    tok, model = hf
    prompts = [tok(p).input_ids for p in PROMPTS]
    script = tmp_path / "vllm_greedy.py"
    script.write_text(VLLM_SCRIPT)
    # the engine in the script's process, as a training run's Plan starts it (compile/launch.py)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run([sys.executable, str(script), str(smollm2_dir), json.dumps(prompts), str(MAX_TOKENS)],
                          capture_output=True, text=True, timeout=300, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    vllm_ids = json.loads(lines[-1].removeprefix("RESULT "))
    assert vllm_ids == [_greedy(model, ids, MAX_TOKENS) for ids in prompts]
