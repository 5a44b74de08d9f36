"""Broken checkpoints given to `ragen train --resume` and `ragen export`: exit 2, one message
naming the checkpoint, what is broken and the way out; nothing started, nothing written.

The checkpoints are laid out as `train.checkpoint.save` writes them, with the tiny-random
model's real weights in model/ and a real rng.pt (the DeepSpeed model states file is a
placeholder under DeepSpeed's own name: these paths stop before an engine exists)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.train.checkpoint import checkpoint_problems

runner = CliRunner()
SPEC = "name: r\nmodel: {name: tiny-random}\nenv: {train: {name: bandit, groups: 2, group_size: 2}}\ntrain: {steps: 4}\n"


def _checkpoint(run: Path, step: int, model_dir: Path, lora: bool = False) -> Path:
    import torch

    from ragen_cli.train.rng import rng_state

    ckpt = run / "checkpoints" / f"step-{step}"
    (ckpt / "deepspeed" / "actor").mkdir(parents=True)
    torch.save({"module": {}}, ckpt / "deepspeed" / "actor" / "mp_rank_00_model_states.pt")  # DeepSpeed's name
    torch.save(rng_state(), ckpt / "rng.pt")
    if lora:
        (ckpt / "model").mkdir()
        (ckpt / "model" / "adapter_config.json").write_text(json.dumps({"r": 4}))
        shutil.copy(model_dir / "model.safetensors", ckpt / "model" / "adapter_model.safetensors")
    else:
        shutil.copytree(model_dir, ckpt / "model")
    (ckpt / "state.json").write_text(json.dumps({"step": step, "cursor": 8, "base_model": str(model_dir), "lora": lora}))
    return ckpt


@pytest.fixture
def run_dir(tmp_path, tiny_model_dir) -> Path:
    run = tmp_path / "r"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC)
    _checkpoint(run, 2, tiny_model_dir)
    _checkpoint(run, 4, tiny_model_dir)
    return run


def test_whole_checkpoints_have_no_problems(run_dir, tiny_model_dir):
    assert checkpoint_problems(run_dir / "checkpoints" / "step-4") == []
    assert checkpoint_problems(_checkpoint(run_dir.parent / "l", 1, tiny_model_dir, lora=True)) == []


def test_resume_from_a_truncated_newest_checkpoint_names_it_and_the_one_before(run_dir):
    weights = run_dir / "checkpoints" / "step-4" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    result = runner.invoke(app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert f"checkpoint {run_dir}/checkpoints/step-4 is broken" in result.output
    assert "model/: model.safetensors is not a readable safetensors file" in result.output
    assert "to use the one before it, step-2" in result.output
    assert "Traceback" not in result.output
    assert not (run_dir / "metrics.jsonl").exists()  # nothing started


def test_resume_with_garbage_state_json_or_a_missing_tensor(run_dir, tiny_model_dir):
    from safetensors.torch import load_file, save_file

    (run_dir / "checkpoints" / "step-4" / "state.json").write_text('{"step": "four"')
    result = runner.invoke(app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 2 and "state.json is not JSON" in result.output
    tensors = load_file(tiny_model_dir / "model.safetensors")
    dropped = sorted(tensors)[0]
    save_file({k: v for k, v in tensors.items() if k != dropped}, run_dir / "checkpoints" / "step-2" / "model" / "model.safetensors")
    assert checkpoint_problems(run_dir / "checkpoints" / "step-2") == [f"model/: 1 tensor(s) missing: {dropped}"]


def test_garbage_rng_and_empty_deepspeed_dir_are_problems(run_dir):
    """Issue 38, section 4: a checkpoint whose rng.pt is garbage and whose deepspeed/ holds no
    engine state used to pass as whole; resuming from it now stops before any work."""
    ckpt = run_dir / "checkpoints" / "step-4"
    (ckpt / "rng.pt").write_bytes(b"rng")
    shutil.rmtree(ckpt / "deepspeed" / "actor")
    (ckpt / "deepspeed" / "actor").mkdir()
    problems = checkpoint_problems(ckpt)
    assert len(problems) == 2 and problems[0].startswith("rng.pt cannot be read (")
    assert problems[1] == "deepspeed/actor/ holds no DeepSpeed model states (*model_states.pt)"
    result = runner.invoke(app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert f"checkpoint {run_dir}/checkpoints/step-4 is broken: rng.pt cannot be read" in result.output
    assert "to use the one before it, step-2" in result.output and "Traceback" not in result.output
    assert not (run_dir / "metrics.jsonl").exists()  # nothing started


def test_deepspeed_tags_follow_state_json_or_the_critic_dir(run_dir):
    """state.json's deepspeed_tags name the engines saved; older checkpoints: actor, and critic
    when critic/ was exported."""
    ckpt = run_dir / "checkpoints" / "step-4"
    (ckpt / "critic").mkdir()  # a GAE run's checkpoint: its critic's DeepSpeed state is missing
    assert checkpoint_problems(ckpt) == ["deepspeed/critic/ holds no DeepSpeed model states (*model_states.pt)"]
    state = json.loads((ckpt / "state.json").read_text())
    (ckpt / "state.json").write_text(json.dumps({**state, "deepspeed_tags": ["actor"]}))
    assert checkpoint_problems(ckpt) == []
    (ckpt / "rng.pt").write_bytes(b"")
    assert checkpoint_problems(ckpt)[0].startswith("rng.pt cannot be read")


def test_export_of_a_broken_checkpoint_writes_nothing(run_dir, tmp_path):
    ckpt = run_dir / "checkpoints" / "step-4"
    (ckpt / "state.json").write_text(json.dumps({"step": 4, "lora": "yes"}))
    out = tmp_path / "exported"
    result = runner.invoke(app, ["export", str(ckpt), str(out)])
    assert result.exit_code == 2, result.output
    assert "is broken, nothing exported: state.json: lora must be bool, got 'yes'" in result.output
    assert not out.exists()


def test_export_of_a_lora_checkpoint_with_a_garbage_adapter(tmp_path, tiny_model_dir):
    ckpt = _checkpoint(tmp_path / "r", 3, tiny_model_dir, lora=True)
    (ckpt / "model" / "adapter_model.safetensors").write_bytes(b"\x00garbage" * 8)
    result = runner.invoke(app, ["export", str(ckpt), str(tmp_path / "out")])
    assert result.exit_code == 2 and "adapter_model.safetensors is not a readable safetensors file" in result.output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10_000), flip=st.integers(min_value=0, max_value=200), byte=st.integers(0, 255))
def test_a_damaged_weights_file_is_always_a_problem_never_an_exception(tmp_path_factory, tiny_model_dir, cut, flip, byte):
    """Truncated at any point of its header or first tensors, or with a header byte changed:
    checkpoint_problems names the file (or reports the weights whole when the change left the
    header valid), and never raises."""
    ckpt = _checkpoint(tmp_path_factory.mktemp("c"), 1, tiny_model_dir)
    weights = ckpt / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    header_end = 8 + int.from_bytes(data[:8], "little")
    if flip < header_end and data[flip] != byte:
        data[flip] = byte
        weights.write_bytes(bytes(data))
        problems = checkpoint_problems(ckpt)
        assert all(p.startswith("model/") for p in problems)
    weights.write_bytes(bytes(data[: min(cut, header_end + 64)]))
    problems = checkpoint_problems(ckpt)
    assert problems and all(p.startswith("model/") for p in problems)
