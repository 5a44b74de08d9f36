"""The built-in SmolLM2-135M-Instruct: converted from the GGUF, it answers like the real model,
and vLLM loads the same directory and agrees with transformers token for token."""

from __future__ import annotations

import json

import pytest
from rollout_vllm_probe import SMOLLM2_PROMPTS as PROMPTS  # tests/ is on sys.path
from rollout_vllm_probe import SMOLLM2_TOKENS as MAX_TOKENS

from ragen_cli.models import cache

pytestmark = pytest.mark.slow


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


def test_vllm_loads_it_and_agrees_with_transformers(hf, vllm_probe):
    """vLLM (ragen's engine settings, the engine in its process) serves the converted directory:
    its greedy tokens are transformers' (tests/rollout_vllm_probe.py's second engine)."""
    tok, model = hf
    prompts = [tok(p).input_ids for p in PROMPTS]
    assert vllm_probe["smollm2_greedy"] == [_greedy(model, ids, MAX_TOKENS) for ids in prompts]
    assert all(vllm_probe["smollm2_greedy"])
