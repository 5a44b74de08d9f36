"""train.gradient_checkpointing: activations recomputed in the backward pass give the same
gradients as the plain forward (within float tolerance), with full weights and with LoRA, and a
real training step with it reports the same gradient norm and loss as one without."""

from __future__ import annotations

import json

import pytest
import torch


def _grads(model_dir, checkpointing: bool, lora: bool) -> dict[str, torch.Tensor]:
    from ragen_cli.models.load import load_causal_lm
    from ragen_cli.spec.models import LoraSpec
    from ragen_cli.train import lora as lora_mod
    from ragen_cli.train.engine import enable_gradient_checkpointing

    torch.manual_seed(0)
    model = load_causal_lm(model_dir, "float32", "cpu")
    if checkpointing:
        enable_gradient_checkpointing(model)
    if lora:
        model = lora_mod.wrap(model, LoraSpec(rank=4, alpha=8))
    model.train()
    assert getattr(model, "is_gradient_checkpointing", False) == checkpointing
    ids = torch.randint(0, 1000, (2, 48), generator=torch.Generator().manual_seed(1))
    model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("lora", [False, True])
def test_checkpointed_gradients_equal_the_plain_ones(tiny_model_dir, lora):
    plain, ckpt = _grads(tiny_model_dir, False, lora), _grads(tiny_model_dir, True, lora)
    assert plain.keys() == ckpt.keys() and len(plain) > 0
    for name in plain:
        torch.testing.assert_close(ckpt[name], plain[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_a_training_step_with_checkpointing_matches_one_without(tmp_path):
    from test_train_e2e import run_tiny

    out = {}
    for ckpt in (False, True):
        run = tmp_path / f"ckpt-{ckpt}"
        run_tiny(run, ["model.lora=null", "train.steps=1", "checkpoint.every=0", f"train.gradient_checkpointing={ckpt}"])
        out[ckpt] = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    for key in ("actor/grad_norm", "actor/entropy", "critic/grad_norm"):
        assert out[True][key] == pytest.approx(out[False][key], rel=1e-4), key
