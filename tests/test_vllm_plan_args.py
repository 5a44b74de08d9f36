"""The rollout engine is built from the Plan: `vllm.LLM` receives exactly `plan.vllm` (with the
model directory filled in), the GPU memory share and the batch size included."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen_cli.compile.plan import compile_plan
from ragen_cli.spec.loader import load_spec

vllm = pytest.importorskip("vllm")

SPEC = """\
name: spy
model: {name: tiny-random, max_context: 1024, lora: {rank: 12, alpha: 24}}
env: {train: {name: bandit, groups: 4, group_size: 8}}
rollout: {backend: vllm, max_turns: 1, max_tokens_per_turn: 16, lora_sync: adapter}
deepspeed: {precision: fp32}
"""


class _Spy:
    seen: dict = {}

    def __init__(self, **kwargs):
        _Spy.seen = kwargs
        raise RuntimeError("spy: engine not started")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_engine_gets_exactly_the_plans_arguments(tmp_path: Path, monkeypatch, tiny_model_dir, device):
    from ragen_cli.rollout.vllm_args import GPU_MEMORY_FRACTION
    from ragen_cli.rollout.backend import make_backend

    path = tmp_path / "spy.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    plan = compile_plan(spec, device=device, cpu_count=2)
    monkeypatch.setattr(vllm, "LLM", _Spy)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # a quiet `ragen train` adds one argument: below
    with pytest.raises(RuntimeError, match="spy"):
        make_backend("vllm", tiny_model_dir, spec, engine_args=plan.vllm)
    assert _Spy.seen == {k: str(tiny_model_dir) if v == "{model_dir}" else v for k, v in plan.vllm.items()}
    assert _Spy.seen["max_num_seqs"] == 4 * 8 and _Spy.seen["max_lora_rank"] == 16  # rank 12 -> vLLM's 16
    if device == "cuda":
        assert _Spy.seen["gpu_memory_utilization"] == GPU_MEMORY_FRACTION and not _Spy.seen["enforce_eager"]
    else:
        assert "gpu_memory_utilization" not in _Spy.seen and _Spy.seen["enforce_eager"]


def test_without_a_plan_the_backend_builds_the_same_arguments(monkeypatch, tiny_model_dir):
    from ragen_cli.rollout.vllm_args import engine_kwargs
    from ragen_cli.rollout.vllm_backend import VLLMBackend

    monkeypatch.setattr(vllm, "LLM", _Spy)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    with pytest.raises(RuntimeError, match="spy"):
        VLLMBackend(tiny_model_dir, "float32", max_model_len=2048, seed=3, max_lora_rank=8)
    want = engine_kwargs(dtype="float32", max_model_len=2048, seed=3, device="cpu", lora_rank=8)
    assert _Spy.seen == {k: str(tiny_model_dir) if v == "{model_dir}" else v for k, v in want.items()}


def test_a_quiet_run_turns_off_the_weight_loading_bar(monkeypatch, tiny_model_dir):
    """`ragen train` without --verbose sets TQDM_DISABLE=1 (ragen_cli/quiet.py); vLLM hands its
    "Loading safetensors checkpoint shards" bar `disable=` itself, so the engine gets
    use_tqdm_on_load=False, and nothing else changes. A setting in the arguments wins."""
    from ragen_cli.rollout.vllm_args import engine_kwargs
    from ragen_cli.rollout.vllm_backend import VLLMBackend, quiet_load

    monkeypatch.setattr(vllm, "LLM", _Spy)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    with pytest.raises(RuntimeError, match="spy"):
        VLLMBackend(tiny_model_dir, "float32", max_model_len=2048, seed=3)
    want = engine_kwargs(dtype="float32", max_model_len=2048, seed=3, device="cpu")
    assert _Spy.seen == {**{k: str(tiny_model_dir) if v == "{model_dir}" else v for k, v in want.items()},
                         "use_tqdm_on_load": False}
    assert quiet_load({"seed": 1}, {"TQDM_DISABLE": "0"}) == {"seed": 1}
    assert quiet_load({"use_tqdm_on_load": True}, {"TQDM_DISABLE": "1"}) == {"use_tqdm_on_load": True}
