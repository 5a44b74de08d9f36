"""train/sync.py: what share of an update reaches the rollout engine, measured on the weights;
and compile.launch.engine_dtype, the rule that serves merged LoRA weights in fp32."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ragen_cli.train.sync import Factors, Fidelity, SyncLedger, lora_layers, merged_weight


def test_fidelity_by_hand():
    t = torch.tensor([3.0, 4.0])  # |t|^2 = 25
    f = Fidelity()
    f.add(t, t)
    assert f.metrics() == {"sync/update_kept": 1.0, "sync/update_error": 0.0}
    half = Fidelity()
    half.add(t / 2, t)  # <t/2, t> / 25 = 0.5; |t/2 - t| / |t| = 0.5
    assert half.metrics() == {"sync/update_kept": 0.5, "sync/update_error": 0.5}
    side = Fidelity()
    side.add(torch.tensor([4.0, -3.0]), t)  # orthogonal: nothing kept; |(1, -7)| / 5 = sqrt(50) / 5
    m = side.metrics()
    assert m["sync/update_kept"] == 0.0 and m["sync/update_error"] == pytest.approx(2 ** 0.5)
    assert Fidelity().metrics() == {}  # no update, nothing to keep


def test_a_bf16_merge_rounds_a_small_update_back_to_the_weight():
    # W = 0.03125 = 2^-5: a bf16 step there is 2^-5 * 2^-7 = 2^-12 (2.44e-4). An update of 4e-5
    # (the rms of SmolLM2's first LoRA updates) is below half a step (1.22e-4): bf16 loses all
    # of it, fp32 (step 2^-28 at W) keeps it to ~4e-9.
    base = torch.full((2, 2), 2.0 ** -5, dtype=torch.bfloat16)
    a = torch.tensor([[1.0, 1.0]], dtype=torch.bfloat16)  # r = 1
    b = torch.tensor([[1.0], [1.0]], dtype=torch.bfloat16) * 0  # B = 0: the untrained adapter
    f0 = Factors(base, a, b, scale=4e-5)
    f1 = Factors(base, a, torch.ones(2, 1, dtype=torch.bfloat16), scale=4e-5)  # B A scale = 4e-5 everywhere
    assert torch.equal(merged_weight(f1, torch.bfloat16), merged_weight(f0, torch.bfloat16))
    kept32 = merged_weight(f1, torch.float32).double() - merged_weight(f0, torch.float32).double()
    assert kept32.sub(4e-5).abs().max() < 4e-9
    # above half a step the bf16 merge keeps one whole step: 2e-4 -> 2^-12
    f2 = Factors(base, a, torch.ones(2, 1, dtype=torch.bfloat16), scale=2e-4)
    assert (merged_weight(f2, torch.bfloat16).double() - 2.0 ** -5).eq(2.0 ** -12).all()


def _peft(tiny_model_dir, dtype):
    from peft import LoraConfig, get_peft_model

    from ragen_cli.models.load import load_causal_lm

    torch.manual_seed(0)
    model = load_causal_lm(tiny_model_dir, "float32")
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear")).to(dtype)


def _nudge(peft_model, size: float) -> None:
    """An update of `size` on every B (B starts at 0, so B A moves by about size * |A|)."""
    with torch.no_grad():
        for f in lora_layers(peft_model).values():
            f.b.add_(size)


@pytest.mark.parametrize("engine, kept_low, err_high", [("float32", 0.999, 1e-3), ("bfloat16", None, None)])
def test_merged_sync_keeps_the_update_only_in_fp32(tiny_model_dir, engine, kept_low, err_high):
    """A bf16 trainer's first update (every B from 0 to 3e-5: (alpha/r) B A ~ 2 * 4 * 3e-5 * 0.064
    = 1.5e-5 on weights of mean size 0.016, where half a bf16 step is 3e-5 to 6e-5): served
    merged in fp32 the engine carries all of it; in bf16 most rounds away (kept 0.23, error 0.92
    on this model)."""
    model = _peft(tiny_model_dir, torch.bfloat16)
    ledger = SyncLedger("merged", engine)
    ledger.start(model)
    _nudge(model, 3e-5)
    m = ledger.record(model)
    if engine == "float32":
        assert m["sync/update_kept"] > kept_low and m["sync/update_error"] < err_high
    else:
        assert m["sync/update_kept"] < 0.5 and m["sync/update_error"] > 0.5
    # the next sync measures the change since this one, not since the start
    _nudge(model, 0.0)
    assert ledger.record(model) == {}


def test_adapter_sync_is_measured_on_the_tensors_the_engine_loads(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    model = _peft(tiny_model_dir, torch.bfloat16)
    ledger = SyncLedger("adapter", "bfloat16")
    ledger.start(model)
    _nudge(model, 1e-3)
    model.save_pretrained(str(tmp_path / "a1"), safe_serialization=True)
    assert ledger.record(model, adapter_dir=tmp_path / "a1") == {"sync/update_kept": 1.0, "sync/update_error": 0.0}
    # an adapter file that misses half the update (every B written at half its value) is seen
    _nudge(model, 1e-3)
    model.save_pretrained(str(tmp_path / "a2"), safe_serialization=True)
    path = tmp_path / "a2" / "adapter_model.safetensors"
    saved = load_file(str(path))
    save_file({k: v * 0.75 if ".lora_B." in k else v for k, v in saved.items()}, str(path))
    # trainer: B 1e-3 -> 2e-3; engine: 1e-3 -> 1.5e-3 (a quarter off 2e-3): half the change kept
    m = ledger.record(model, adapter_dir=tmp_path / "a2")
    assert m["sync/update_kept"] == pytest.approx(0.5, abs=0.01)
    assert m["sync/update_error"] == pytest.approx(0.5, abs=0.01)


def test_engine_dtype_rule():
    from ragen_cli.compile.launch import engine_dtype

    assert engine_dtype("bf16", "merged", "vllm")[0] == "float32"  # the merge would round the update away
    assert engine_dtype("fp16", "merged", "auto")[0] == "float32"
    assert engine_dtype("fp32", "merged", "vllm")[0] == "float32"
    assert engine_dtype("bf16", "adapter", "vllm")[0] == "bfloat16"  # the trainer's own A and B
    assert engine_dtype("bf16", None, "vllm")[0] == "bfloat16"  # full weights: the trainer's own tensors
    assert engine_dtype("bf16", "merged", "hf")[0] == "bfloat16"  # the trainer's own module


@pytest.mark.parametrize("device, engine", [("cpu", "float32"), ("cuda", "bfloat16")])
def test_bandit_plan_serves_a_bf16_trainer_without_rounding(device, engine):
    """`make train`'s spec in bf16: on CPU (merged sync) the engine runs fp32; on a GPU (adapter
    sync, vLLM's LoRA) it runs the trainer's bf16 adapter. The Plan, vLLM's arguments and the
    placement say the same."""
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml")
    plan = compile_plan(spec, device=device, cpu_count=2, precision=("bf16", "test"))
    assert plan.precision == "bf16" and plan.lora_sync == ("merged" if device == "cpu" else "adapter")
    assert plan.vllm["dtype"] == engine == plan.placement["rollout"]["dtype"]
    assert plan.placement["actor"]["dtype"] == "bfloat16"
