"""What the benches share: the shipped specs, and the base model behind the sampling benches
(its tokenizer and a vLLM engine: fp32, 1024 tokens, 2 GiB of KV cache, as `ragen train`
builds them for rollouts)."""

from __future__ import annotations

from pathlib import Path

SPECS = Path(__file__).resolve().parent.parent / "specs"


def shipped_spec(name: str, overrides: list[str] | None = None):
    """The validated `RunSpec` of specs/NAME.yaml, or of the file NAME when it ends in .yaml
    (a spec that is not shipped, e.g. one a run is trying out), with `--set`-style overrides."""
    from ragen_cli.spec.loader import load_spec

    return load_spec(Path(name) if name.endswith((".yaml", ".yml")) else SPECS / f"{name}.yaml", overrides or [])


def tokenizer_and_engine(model: str):
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.vllm_backend import VLLMBackend

    model_dir = resolve_model(model, "float32")
    return load_tokenizer(model_dir), VLLMBackend(model_dir, "float32", max_model_len=1024, seed=0, kv_cache_gib=2)
