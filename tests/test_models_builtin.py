"""Model resolution and the tiny-random built-in (real conversions, real loads)."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest

from ragen_cli.models import builtin, cache
from ragen_cli.models.builtin import ModelError, resolve_model


@pytest.fixture
def tmp_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(builtin, "_verified", set())
    return tmp_path / "cache" / "models"


def test_tiny_random_architecture_and_tokenizer(tiny_model_dir):
    from ragen_cli.models.load import load_tokenizer

    cfg = json.loads((tiny_model_dir / "config.json").read_text())
    # head_dim = hidden 64 / 2 heads = 32, the smallest the vLLM CPU attention kernel accepts
    assert (cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]) == (64, 2, 32)
    assert (cfg["num_hidden_layers"], cfg["intermediate_size"], cfg["vocab_size"]) == (2, 128, 49152)
    assert cfg["tie_word_embeddings"] is True and cfg["max_position_embeddings"] == 4096
    tok = load_tokenizer(tiny_model_dir)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    # SmolLM2's ChatML template adds its default system prompt when none is given
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    # ids of SmolLM2-135M-Instruct's special tokens: <|endoftext|> 0, <|im_start|> 1, <|im_end|> 2
    assert (tok.convert_tokens_to_ids("<|im_start|>"), tok.eos_token_id, tok.pad_token_id) == (1, 2, 2)


def test_tiny_random_loads_and_generates(tiny_model_dir):
    import torch

    from ragen_cli.models.load import load_causal_lm

    model = load_causal_lm(tiny_model_dir, "fp32")
    # embeddings 49152*64 + per layer (4 attn 64*64 + 3 mlp 64*128 + 2 norms 64) * 2 + final norm 64
    assert sum(p.numel() for p in model.parameters()) == 49152 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    out = model.generate(torch.tensor([[1, 4093, 198]]), max_new_tokens=4, do_sample=False)
    assert out.shape == (1, 7)


def test_bf16_variant_is_the_fp32_weights_cast(tiny_model_dir):
    import torch

    from ragen_cli.models.load import load_causal_lm

    bf16_dir = resolve_model("tiny-random", "bf16")
    assert bf16_dir.name == "tiny-random-bfloat16"
    fp32 = load_causal_lm(tiny_model_dir, "float32").state_dict()
    bf16 = load_causal_lm(bf16_dir, "bfloat16").state_dict()
    assert bf16["model.embed_tokens.weight"].dtype == torch.bfloat16
    for name, tensor in fp32.items():
        assert torch.equal(bf16[name], tensor.to(torch.bfloat16)), name


def _resolve_tiny(cache_dir: str) -> str:
    import os

    os.environ["RAGEN_CACHE"] = cache_dir
    return str(resolve_model("tiny-random"))


@pytest.fixture(scope="module")
def raced_cache(tmp_path_factory) -> Path:
    """Two processes resolve tiny-random into one empty cache at the same time."""
    root = tmp_path_factory.mktemp("raced")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        paths = pool.map(_resolve_tiny, [str(root)] * 2)
    assert paths == [str(root / "models" / "tiny-random-float32")] * 2
    return root / "models"


@pytest.mark.slow
def test_concurrent_first_use_ends_with_one_valid_dir(raced_cache):
    names = sorted(p.name for p in raced_cache.iterdir())
    # the model and the shared tokenizer extract, each with its lock file, and no temp leftovers
    assert names == [".smollm2-tokenizer", ".smollm2-tokenizer.lock", ".tiny-random-float32.lock", "tiny-random-float32"]
    assert cache.verify_dir(raced_cache / "tiny-random-float32") == []


@pytest.mark.slow
def test_tiny_random_is_deterministic(raced_cache, tiny_model_dir, tmp_cache):
    """Another conversion, in another cache and process, is byte-identical to the raced one.

    The tokenizer here comes from the session cache's own GGUF extraction (made independently,
    perhaps days ago), so extracting it is checked for determinism too, without paying 5 s twice.
    """
    shutil.copytree(tiny_model_dir.parent / ".smollm2-tokenizer", tmp_cache / ".smollm2-tokenizer")
    again = resolve_model("tiny-random")
    assert again.parent == tmp_cache
    first = cache.read_checksums(raced_cache / "tiny-random-float32")
    assert cache.read_checksums(again) == first
    assert set(first) >= {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"}


def test_damaged_cache_is_converted_again(tiny_model_dir, tmp_cache, capsys):
    shutil.copytree(tiny_model_dir.parent / ".smollm2-tokenizer", tmp_cache / ".smollm2-tokenizer")
    shutil.copytree(tiny_model_dir, tmp_cache / "tiny-random-float32")
    weights = tmp_cache / "tiny-random-float32" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # flip the bits of one byte of the last tensor
    weights.write_bytes(bytes(data))
    assert resolve_model("tiny-random") == tmp_cache / "tiny-random-float32"
    assert "is damaged" in capsys.readouterr().err
    assert weights.read_bytes() == (tiny_model_dir / "model.safetensors").read_bytes()


def test_local_dir_resolves_to_itself(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == tmp_path.resolve()


def test_bad_references_raise_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never the network in tests
    with pytest.raises(ModelError, match=r"unknown model 'tiny-randon'.*Did you mean 'tiny-random'\?"):
        resolve_model("tiny-randon")
    with pytest.raises(ModelError, match="has no config.json"):
        resolve_model(str(tmp_path))
    (tmp_path / "w.bin").write_bytes(b"")
    with pytest.raises(ModelError, match="is a file"):
        resolve_model(str(tmp_path / "w.bin"))
    with pytest.raises(ModelError, match="nor in the Hugging Face cache, and HF_HUB_OFFLINE is set.*huggingface-cli download"):
        resolve_model("HuggingFaceTB/not-cached-here")
    with pytest.raises(ModelError, match="unknown dtype 'int4'"):
        resolve_model("tiny-random", "int4")


def test_hub_id_resolves_to_its_snapshot_in_the_hf_cache(tmp_path):
    """The on-disk layout of the Hugging Face cache: refs/main names the snapshot to use."""
    import os
    import subprocess
    import sys

    repo = tmp_path / "hub" / "models--acme--tiny"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    code = "from ragen_cli.models.builtin import resolve_model; print(resolve_model('acme/tiny'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(snapshot)


def test_train_with_an_uncached_hub_model_offline_is_exit_2_before_anything_starts(tmp_path):
    import os
    import subprocess
    import sys

    spec = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    ragen = Path(sys.executable).parent / "ragen"
    out = subprocess.run([str(ragen), "train", str(spec), "--set", "model.name=acme/not-cached",
                          "--set", f"output.dir={tmp_path / 'runs'}"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "HF_HUB_OFFLINE is set" in out.stderr and "huggingface-cli download acme/not-cached" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_tokenizer_extraction_does_not_depend_on_hf_hub_offline(tmp_path):
    # transformers records how a tokenizer was loaded (local_files_only follows HF_HUB_OFFLINE);
    # the extraction drops it, so caches made with and without the variable are identical
    import os
    import subprocess
    import sys

    code = "import sys; from pathlib import Path; from ragen_cli.models.convert import _extract_tokenizer; " \
           "p = Path(sys.argv[1]); p.mkdir(); _extract_tokenizer(p)"
    for name, offline in (("on", "1"), ("off", None)):
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
        if offline:
            env["HF_HUB_OFFLINE"] = offline
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], check=True, env=env, timeout=300)
    on, off = tmp_path / "on" / "tokenizer_config.json", tmp_path / "off" / "tokenizer_config.json"
    assert on.read_bytes() == off.read_bytes() and b"local_files_only" not in on.read_bytes()
