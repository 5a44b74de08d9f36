"""Loading a resolved model directory with transformers (torch and transformers imported lazily).

`DS_ACCELERATOR=cpu` is set (when unset and no CUDA device is visible) before transformers is
imported: transformers imports DeepSpeed's accelerator probe, which otherwise prints "Setting
accelerator to CPU" warnings in every process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def set_ds_accelerator() -> None:
    """Set `DS_ACCELERATOR=cpu` if it is unset and no CUDA device is visible."""
    if "DS_ACCELERATOR" in os.environ:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["DS_ACCELERATOR"] = "cpu"


def import_deepspeed():
    """`import deepspeed` (the accelerator set first), without the `mlflow` import that DeepSpeed's
    autotuner makes at import time when mlflow is installed (the `trackers` extra): ragen never
    runs the autotuner, and that import was about 2.8 s of every trainer's start on a 2-core CPU
    (bench/deepspeed_import.py: a process that imports DeepSpeed, median 6.3 s, 3.6 s without it).
    mlflow stays importable: a run that logs to MLflow imports it when its sink opens
    (train/sinks.py)."""
    set_ds_accelerator()
    blocked = "mlflow" not in sys.modules and "deepspeed" not in sys.modules
    if blocked:
        sys.modules["mlflow"] = None  # `import mlflow` raises ImportError; the autotuner records has_mlflow = False
    try:
        import deepspeed
    finally:
        if blocked and "mlflow" in sys.modules and sys.modules["mlflow"] is None:
            del sys.modules["mlflow"]
    return deepspeed


TEMPLATE_KWARGS = "ragen_chat_template_kwargs"
"""The tokenizer attribute holding `model.chat_template_kwargs`, which `rollout.context.ChatFormat`
passes to every rendering: the template and its variables travel together."""


def load_tokenizer(path: str | Path, model=None):
    """The tokenizer of a model directory (with its chat template); pad token defaults to EOS.
    With the spec's `ModelSpec` as `model`, its `chat_template` replaces the directory's and its
    `chat_template_kwargs` go with it (the sampler, trainer, validation and eval all load here)."""
    set_ds_accelerator()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if model is not None and model.chat_template is not None:
        tok.chat_template = model.chat_template
    setattr(tok, TEMPLATE_KWARGS, dict(model.chat_template_kwargs) if model is not None else {})
    return tok


def load_causal_lm(path: str | Path, dtype: str = "float32", device: str = "cpu"):
    """A causal LM from a model directory, in `dtype` ("float32"/"fp32", "bfloat16"/"bf16", ...)
    on `device`, in eval mode (call `.train()` to train it). Strict: a missing, unexpected or
    mis-shaped tensor is a ValueError, never a randomly initialised weight."""
    from ragen_cli.models.cache import canonical_dtype

    set_ds_accelerator()
    import torch
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, canonical_dtype(dtype)),
                                                       output_loading_info=True)
    wrong = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if wrong:  # transformers would go on with random weights for what is missing
        parts = [f"{k.replace('_', ' ')}: {', '.join(map(str, sorted(v)[:5]))}" for k, v in wrong.items()]
        raise ValueError(f"model directory {path} cannot be loaded whole ({'; '.join(parts)})")
    return model.to(device).eval()
