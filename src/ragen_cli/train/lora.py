"""LoRA through peft: wrap a model, save only the adapter, merge an adapter for export.

With LoRA on, the trainable parameters are the adapter's A and B matrices (plus, for the
critic, its value head); checkpoints and weight syncs carry the adapter only (a PEFT adapter
directory: `adapter_config.json` + `adapter_model.safetensors`, which peft and vLLM's
`LoRARequest` both load). The reference policy for KL is the actor with the adapter disabled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


MODEL_PREFIX = "base_model.model."
"""What peft puts before the wrapped model's own module names."""


@dataclass(frozen=True)
class Factors:
    """One LoRA-adapted layer: its base weight W (out x in, or in x out with `transpose`: GPT-2's
    Conv1D, and an embedding's vocab x dim), the adapter's A (r x in) and B (out x r), and alpha / r."""

    base: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    scale: float
    transpose: bool = False


def lora_delta(f: Factors, dtype: torch.dtype | None = None) -> torch.Tensor:
    """(alpha / r) B A in `dtype` (from A and B as stored, upcast first: the product is not
    rounded to the adapter's own dtype), laid out like the base weight. In fp32 its relative
    error (~1e-7) is far below any share of an update the metrics resolve."""
    import torch

    dtype = dtype or torch.float32
    d = (f.b.to(dtype) @ f.a.to(dtype)) * f.scale
    return d.T if f.transpose else d


def merged_weight(f: Factors, dtype: torch.dtype) -> torch.Tensor:
    """W + (alpha / r) B A, summed in fp32 and returned in `dtype` (the engine's): the weight a
    merged sync hands the engine. In fp32 the sum keeps the update to ~1e-7 of a weight; cast
    to bf16 it keeps only the parts of the update above half a bf16 step of W."""
    return (f.base.float() + lora_delta(f)).to(dtype)


def lora_layers(peft_model) -> dict[str, Factors]:
    """Every layer of `peft_model` with the active adapter, by module name (the trainer's own
    tensors, not copies)."""
    from peft.tuners.lora import LoraLayer

    adapter = peft_model.active_adapter
    out = {}
    for name, mod in peft_model.named_modules():
        if not isinstance(mod, LoraLayer):
            continue
        if adapter in mod.lora_A:
            out[name] = Factors(mod.get_base_layer().weight, mod.lora_A[adapter].weight, mod.lora_B[adapter].weight,
                                float(mod.scaling[adapter]), bool(getattr(mod, "fan_in_fan_out", False)))
        elif adapter in getattr(mod, "lora_embedding_A", {}):
            # an embedding's adapter: A (r x vocab), B (dim x r), delta (B A)^T (peft's Embedding.get_delta_weight)
            out[name] = Factors(mod.get_base_layer().weight, mod.lora_embedding_A[adapter],
                                mod.lora_embedding_B[adapter], float(mod.scaling[adapter]), True)
    return out


def lora_config(lora_spec, task_type: str = "CAUSAL_LM"):
    """peft `LoraConfig` from the spec's `model.lora` section."""
    from peft import LoraConfig

    targets = lora_spec.target_modules
    # The critic's value head is trained in full (modules_to_save), so it gets no adapter.
    extra = {"exclude_modules": ["score"], "modules_to_save": ["score"]} if task_type == "TOKEN_CLS" else {}
    return LoraConfig(
        r=lora_spec.rank,
        lora_alpha=lora_spec.alpha,
        lora_dropout=lora_spec.dropout,
        target_modules=targets if targets == "all-linear" else list(targets),
        task_type=task_type,
        bias="none",
        **extra,
    )


def wrap(model, lora_spec, task_type: str = "CAUSAL_LM"):
    """`model` with fresh LoRA adapters (B = 0, so the wrapped model starts equal to `model`)."""
    from peft import get_peft_model

    tied = getattr(model.config, "tie_word_embeddings", False) and model.get_output_embeddings() is not None
    embedding = type(model.get_input_embeddings()).__name__
    targets = lora_spec.target_modules
    if tied and targets != "all-linear" and any(name in ("embed_tokens", "wte", "word_embeddings") for name in targets):
        raise ValueError(f"model.lora.target_modules names the input embedding ({embedding}), which this model ties "
                         "to its output layer: the trainer's output layer would not see the adapter, while a merged "
                         "sync, the engine and an export would (peft issue 2777); leave the embedding out")
    return get_peft_model(model, lora_config(lora_spec, task_type))


def save_adapter(peft_model, out_dir: str | Path) -> Path:
    """Write the adapter only (safetensors) to `out_dir`."""
    out = Path(out_dir)
    peft_model.save_pretrained(str(out), safe_serialization=True)
    return out


def merged_state_dict(peft_model) -> dict:
    """The base model's state dict under its own (Hugging Face) names with the active adapter
    folded in, W + (alpha / r) B A per adapted layer, summed in fp32 and returned in fp32
    (`merged_weight`; in bf16 the sum would round most of an RL update away, and
    `rollout.vllm_args.engine_dtype` serves these weights in fp32 for that reason). Computed on the
    side: the module is not merged and unmerged, so the trained weights never pick up that
    round-off. Adapter tensors themselves are left out."""
    import torch

    prefix = MODEL_PREFIX
    with torch.no_grad():
        layers = lora_layers(peft_model)
        out = {}
        for key, value in peft_model.state_dict().items():
            if ".lora_" in key:
                continue
            owner, _, leaf = key.rpartition(".")
            if owner.endswith(".base_layer"):
                layer = owner[: -len(".base_layer")]
                if leaf == "weight" and layer in layers:
                    value = merged_weight(layers[layer], torch.float32)
                key = f"{layer}.{leaf}"
            out[key.removeprefix(prefix)] = value.detach()
    return out


def merge_adapter(base_dir: str | Path, adapter_dir: str | Path, out_dir: str | Path) -> Path:
    """Load base + adapter, fold the adapter into the weights, save a plain HF directory
    (safetensors, tokenizer files) that transformers and vLLM load without peft."""
    import shutil

    from peft import PeftModel

    from ragen_cli.models.load import load_causal_lm

    base = load_causal_lm(base_dir, "float32", "cpu")
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    out = Path(out_dir)
    merged.save_pretrained(str(out), safe_serialization=True)
    copy_tokenizer_files(Path(base_dir), out, shutil.copy2)
    return out


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja", "vocab.json", "merges.txt", "generation_config.json")


def copy_tokenizer_files(src: Path, dst: Path, copy) -> None:
    """Copy the tokenizer files a model directory needs (those that exist) from src to dst."""
    for name in TOKENIZER_FILES:
        if (src / name).exists() and not (dst / name).exists():
            copy(src / name, dst / name)
