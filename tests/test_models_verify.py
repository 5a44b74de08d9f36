"""Strict weight checks (models/verify.py, issue 21 "checkpoints"): a checkpoint with a tensor
missing, an extra tensor, a wrong shape, or a truncated / garbage safetensors file is refused
with a message naming it; never loaded with random weights. Built from the real tiny-random
model's files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.eval.checkpoint import EvalInputError, load_checkpoint
from ragen_cli.models.load import load_causal_lm
from ragen_cli.models.verify import weight_problems


def _checkpoint(root: Path, tiny: Path, edit=None) -> Path:
    """A full-weights ragen checkpoint of tiny-random, its tensors passed through `edit`."""
    ckpt = root / "checkpoints" / "step-3"
    shutil.copytree(tiny, ckpt / "model")
    if edit is not None:
        f = next((ckpt / "model").glob("*.safetensors"))
        save_file(edit(load_file(str(f))), str(f))
    (ckpt / "state.json").write_text(json.dumps({"step": 3, "base_model": str(tiny), "lora": False}))
    return ckpt


def test_intact_weights_pass(tiny_model_dir, tmp_path):
    assert weight_problems(tiny_model_dir) == []
    assert load_checkpoint(_checkpoint(tmp_path, tiny_model_dir)).kind == "checkpoint"


def test_missing_tensor_is_refused_by_eval_and_by_the_loader(tiny_model_dir, tmp_path):
    gone = "model.layers.1.mlp.down_proj.weight"
    ckpt = _checkpoint(tmp_path, tiny_model_dir, lambda t: {k: v for k, v in t.items() if k != gone})
    assert weight_problems(ckpt / "model") == [f"1 tensor(s) missing: {gone}"]
    with pytest.raises(EvalInputError, match="cannot be loaded whole.*missing"):
        load_checkpoint(ckpt)
    with pytest.raises(ValueError, match="missing keys: " + gone):
        load_causal_lm(ckpt / "model")
    r = CliRunner().invoke(app, ["eval", "--checkpoint", str(ckpt), "--env", "bandit", "--episodes", "1"])
    assert r.exit_code == 2 and gone in r.output and "Traceback" not in r.output
    assert not (tmp_path / "eval.json").exists()


def test_unexpected_and_misshaped_tensors(tiny_model_dir, tmp_path):
    def edit(t):
        t = dict(t)
        t["model.layers.9.extra.weight"] = torch.zeros(2)
        t["model.norm.weight"] = torch.ones(t["model.norm.weight"].shape[0] + 1)
        return t

    probs = weight_problems(_checkpoint(tmp_path, tiny_model_dir, edit) / "model")
    assert probs[0] == "1 unexpected tensor(s): model.layers.9.extra.weight"
    assert probs[1].startswith("model.norm.weight has shape [65], the config needs [64]")


@pytest.mark.parametrize("content", [b"", b"garbage" * 10, "truncate"])
def test_truncated_or_garbage_file(tiny_model_dir, tmp_path, content):
    ckpt = _checkpoint(tmp_path, tiny_model_dir)
    f = next((ckpt / "model").glob("*.safetensors"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2] if content == "truncate" else content)
    probs = weight_problems(ckpt / "model")
    assert len(probs) == 1 and "is not a readable safetensors file" in probs[0]
    r = CliRunner().invoke(app, ["eval", "--checkpoint", str(ckpt), "--env", "bandit", "--episodes", "1"])
    assert r.exit_code == 2 and "Traceback" not in r.output


@pytest.mark.parametrize("field,value", [("step", "three"), ("step", True), ("lora", "no"), ("base_model", 5)])
def test_class_wrong_types_in_state_json(tiny_model_dir, tmp_path, field, value):
    ckpt = _checkpoint(tmp_path, tiny_model_dir)
    state = json.loads((ckpt / "state.json").read_text())
    (ckpt / "state.json").write_text(json.dumps({**state, field: value}))
    with pytest.raises(EvalInputError, match=f"{field} must be"):
        load_checkpoint(ckpt)
    r = CliRunner().invoke(app, ["eval", "--checkpoint", str(ckpt), "--env", "bandit", "--episodes", "1"])
    assert r.exit_code == 2 and f"{field} must be" in r.output and "Traceback" not in r.output
