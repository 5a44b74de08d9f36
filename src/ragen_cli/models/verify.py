"""Strict weight checks: a model directory is loaded whole or not at all.

transformers fills a missing tensor with random values and only warns; vLLM may do the same or
fail deep inside its loader. Both read safetensors files whose headers name every tensor and its
shape, so the check needs no tensor data: compare the headers with the tensors the config's
architecture expects (built on the meta device, no memory), and name every missing, unexpected
or mis-shaped tensor, and every unreadable file.
"""

from __future__ import annotations

from pathlib import Path


def safetensors_shapes(files: list[Path]) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """{tensor name: shape} over `files` (headers only), and one message per unreadable file."""
    from safetensors import safe_open

    shapes: dict[str, tuple[int, ...]] = {}
    bad = []
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as st:
                for name in st.keys():
                    shapes[name] = tuple(st.get_slice(name).get_shape())
        except Exception as exc:  # safetensors raises its own error types for garbage / truncation
            bad.append(f"{f.name} is not a readable safetensors file ({type(exc).__name__}: {str(exc)[:120]})")
    return shapes, bad


def expected_shapes(model_dir: Path) -> dict[str, tuple[int, ...]]:
    """The tensors a checkpoint of `model_dir`'s config must hold (tied weights excluded)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(model_dir))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    out = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        for tied in ("lm_head.weight",):
            out.pop(tied, None)
    return out


def weight_problems(model_dir: str | Path) -> list[str]:
    """Why `model_dir` (a full HF model directory with safetensors weights) cannot be loaded
    strictly; empty when every expected tensor is present with its shape and nothing else is."""
    model_dir = Path(model_dir)
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return [f"no *.safetensors files in {model_dir}"]
    have, bad = safetensors_shapes(files)
    if bad:
        return bad
    try:
        want = expected_shapes(model_dir)
    except Exception as exc:  # a broken config.json: transformers' own message says what
        return [f"config.json cannot be read as a model config ({type(exc).__name__}: {str(exc)[:160]})"]
    problems = []
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want) - {"lm_head.weight"})
    shaped = sorted(k for k in set(want) & set(have) if want[k] != have[k])
    if missing:
        problems.append(f"{len(missing)} tensor(s) missing: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    if extra:
        problems.append(f"{len(extra)} unexpected tensor(s): {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    for k in shaped[:5]:
        problems.append(f"{k} has shape {list(have[k])}, the config needs {list(want[k])}")
    return problems
