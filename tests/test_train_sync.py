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


# ----------------------------------------------------------------- what the engine holds (issue 72, items 5, 6)
def test_engine_names_and_expected_sums_of_fused_layers_by_hand():
    from ragen_cli.rollout.weight_sums import engine_name, expected_sums

    packed = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
    assert engine_name("model.layers.0.self_attn.k_proj.weight", packed) == "model.layers.0.self_attn.qkv_proj.weight"
    assert engine_name("model.layers.3.mlp.up_proj.weight", packed) == "model.layers.3.mlp.gate_up_proj.weight"
    assert engine_name("model.norm.weight", packed) == "model.norm.weight"
    tensors = {"a.q_proj.weight": torch.tensor([1.0, -2.0]), "a.k_proj.weight": torch.tensor([3.0]),
               "a.v_proj.weight": torch.tensor([-0.5]), "b.weight": torch.tensor([[2.0, 2.0]])}
    # qkv: sum 1 - 2 + 3 - 0.5 = 1.5; squares 1 + 4 + 9 + 0.25 = 14.25; |.| 1 + 2 + 3 + 0.5 = 6.5
    assert expected_sums(tensors, packed) == {"a.qkv_proj.weight": (1.5, 14.25, 6.5), "b.weight": (4.0, 8.0, 4.0)}


def test_a_push_is_checked_against_what_the_engine_read_back():
    from ragen_cli.rollout.weight_sums import compare, update_kept

    expected = {"w": (1.5, 14.25, 6.5), "v": (4.0, 8.0, 4.0), "u": (0.0, 2.0, 2.0)}
    sizes = {"w": 4, "v": 2, "u": 2}
    same = compare(expected, dict(expected), sizes)
    assert same.ok and same.held == 1.0
    # "v" kept its old values (its sums are the last push's), "u" was never loaded: 4 of 8 elements held
    engine = {"w": expected["w"], "v": (3.9, 7.6, 3.9)}
    bad = compare(expected, engine, sizes)
    assert (bad.missing, bad.differ, bad.held, bad.ok) == (("u",), ("v",), 0.5, False)
    assert bad.message() == ("the rollout engine does not serve the trained weights: 1 pushed weight(s) not loaded "
                             "by the engine (u); 1 engine weight(s) differ from the pushed ones (v) (0.500000 of the "
                             "pushed elements held)")
    # summation order alone (a fused layer summed in parts): ~1e-16 relative, within the tolerance
    assert compare(expected, {**expected, "w": (1.5 + 1e-15, 14.25, 6.5)}, sizes).ok
    # update_kept: the first push counts every parameter as moved; then only the moved ones count,
    # and nothing moved is no metric at all
    assert update_kept(None, same) == {"sync/update_kept": 1.0}
    moved = compare({**expected, "w": (1.6, 14.3, 6.6)}, {**expected, "w": (1.6, 14.3, 6.6)}, sizes)
    assert update_kept(same, moved) == {"sync/update_kept": 1.0} and update_kept(moved, moved) == {}
    # the update moved w (4 elements) and v (2); the engine kept v's old values: 4 of 6 held
    now = compare({**expected, "w": (1.6, 14.3, 6.6), "v": (4.1, 8.2, 4.1)},
                  {**expected, "w": (1.6, 14.3, 6.6)}, sizes)
    assert update_kept(same, now) == {"sync/update_kept": pytest.approx(4 / 6)}


def test_full_weight_ledger_reads_the_engine_and_says_nothing_when_nothing_moved():
    from ragen_cli.rollout.weight_sums import compare

    ledger = SyncLedger(None, "float32")
    model = torch.nn.Linear(2, 2)
    assert ledger.record(model) == {}  # an engine that reports nothing (the HF backend): no claim
    e = {"w": (1.0, 1.0, 1.0)}
    assert ledger.record(model, engine=compare(e, e, {"w": 1})) == {"sync/update_kept": 1.0}
    assert ledger.record(model, engine=compare(e, e, {"w": 1})) == {}  # a step where nothing moved


def test_an_embedding_lora_is_merged_into_the_pushed_weights_and_measured(tiny_model_dir):
    """With `embed_tokens` among the targets peft gives the embedding `lora_embedding_A` / `_B`
    (not `lora_A`): the merged push must fold it in as peft's own merge does, and the ledger
    must count its change."""
    from peft import LoraConfig, get_peft_model

    from ragen_cli.models.load import load_causal_lm
    from ragen_cli.train.lora import merged_state_dict

    torch.manual_seed(0)
    model = get_peft_model(load_causal_lm(tiny_model_dir, "float32"),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["embed_tokens", "q_proj"],
                                      init_lora_weights=False))
    layers = lora_layers(model)
    assert "base_model.model.model.embed_tokens" in layers
    emb = model.base_model.model.model.embed_tokens
    delta = (emb.lora_embedding_B["default"] @ emb.lora_embedding_A["default"]).T * 2.0  # alpha / r = 2
    merged = merged_state_dict(model)
    base = emb.get_base_layer().weight
    assert float(delta.abs().max()) > 1e-3  # a real change to carry
    assert torch.allclose(merged["model.embed_tokens.weight"], base + delta, atol=1e-6)
    # the ledger measures the embedding's change too: a push that keeps the old embedding is seen
    ledger = SyncLedger("merged", "float32")
    ledger.start(model)
    with torch.no_grad():
        emb.lora_embedding_B["default"].mul_(2.0)  # the embedding's delta doubles; q_proj's stays
    full = merged_state_dict(model)
    assert ledger.record(model, pushed=full) == {"sync/update_kept": pytest.approx(1.0, abs=1e-5),
                                                 "sync/update_error": pytest.approx(0.0, abs=1e-3)}
    with torch.no_grad():
        emb.lora_embedding_B["default"].mul_(2.0)
    stale = {**merged_state_dict(model), "model.embed_tokens.weight": full["model.embed_tokens.weight"]}
    assert ledger.record(model, pushed=stale)["sync/update_kept"] == pytest.approx(0.0, abs=1e-5)


def test_an_adapter_on_a_tied_embedding_is_refused(tiny_model_dir):
    """tiny-random (as SmolLM2) ties embed_tokens to lm_head: an adapter there would change the
    trainer's input embedding only, and both in a merged engine."""
    from ragen_cli.models.load import load_causal_lm
    from ragen_cli.spec.models import LoraSpec
    from ragen_cli.train.lora import wrap

    model = load_causal_lm(tiny_model_dir, "float32")
    with pytest.raises(ValueError, match="names the input embedding .Embedding., which this model ties"):
        wrap(model, LoraSpec(target_modules=["embed_tokens", "q_proj"]))
    assert "embed_tokens" not in str(wrap(model, LoraSpec(target_modules=["q_proj"])).peft_config["default"].target_modules)


def test_a_push_the_engine_did_not_load_stops_the_run_naming_the_weight():
    """The loop saves and stops on a ParityError (train/loop.py); the engine check raises one."""
    from ragen_cli.rollout.parity import ParityError
    from ragen_cli.rollout.weight_sums import compare
    from ragen_cli.train.sync import agreed_engine

    e = {"w": (1.0, 1.0, 1.0), "v": (2.0, 2.0, 2.0)}
    agreed_engine(compare(e, e, {"w": 1, "v": 3}), rank=0, world=1)  # held: nothing raised
    with pytest.raises(ParityError, match=r"1 pushed weight\(s\) not loaded by the engine \(v\) \(0.250000 of"):
        agreed_engine(compare(e, {"w": e["w"]}, {"w": 1, "v": 3}), rank=0, world=1)
