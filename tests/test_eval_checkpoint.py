"""Bad input to `ragen eval`: missing, half-written and foreign checkpoints, bad options.
Each must exit with code 2 and a message naming what is wrong (no model is run)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.eval.checkpoint import EvalInputError, arch_mismatch, load_checkpoint


def _run(*args: str):
    return CliRunner().invoke(app, ["eval", *args, "--env", "bandit", "--episodes", "1"])


def _full_checkpoint(root: Path, step: int = 5, base: str = "/nonexistent/base") -> Path:
    """A complete-looking full-weights checkpoint (config + non-empty safetensors + state)."""
    ckpt = root / "checkpoints" / f"step-{step}"
    (ckpt / "model").mkdir(parents=True)
    (ckpt / "model" / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    (ckpt / "model" / "model.safetensors").write_bytes(b"x" * 16)
    (ckpt / "state.json").write_text(json.dumps({"step": step, "base_model": base, "lora": False}))
    return ckpt


def test_missing_checkpoint_lists_the_available_ones(tmp_path):
    _full_checkpoint(tmp_path, 5)
    result = _run("--checkpoint", str(tmp_path / "checkpoints" / "step-9"))
    assert result.exit_code == 2
    assert "step-9 does not exist" in result.output and "available: step-5" in result.output


def test_run_directory_instead_of_a_step_names_the_steps(tmp_path):
    _full_checkpoint(tmp_path, 4)
    result = _run("--checkpoint", str(tmp_path))
    assert result.exit_code == 2 and "pick one of: step-4" in result.output


def test_half_written_tmp_dir_is_refused(tmp_path):
    ckpt = _full_checkpoint(tmp_path, 7)
    tmp = ckpt.with_name(".tmp-step-7")
    ckpt.rename(tmp)
    result = _run("--checkpoint", str(tmp))
    assert result.exit_code == 2 and "half-written" in result.output
    result = _run("--checkpoint", str(ckpt))  # the final name while .tmp-step-7 is being written
    assert result.exit_code == 2 and "still being written" in result.output


def test_checkpoint_without_state_or_weights(tmp_path):
    ckpt = _full_checkpoint(tmp_path)
    (ckpt / "state.json").unlink()
    result = _run("--checkpoint", str(ckpt))
    assert result.exit_code == 2 and "no state.json" in result.output

    ckpt = _full_checkpoint(tmp_path / "b")
    (ckpt / "model" / "model.safetensors").write_bytes(b"")  # zero bytes: an interrupted write
    result = _run("--checkpoint", str(ckpt))
    assert result.exit_code == 2 and "missing weights: model/*.safetensors" in result.output

    ckpt = _full_checkpoint(tmp_path / "c")
    (ckpt / "state.json").write_text('{"step": 5, "lo')  # truncated JSON
    result = _run("--checkpoint", str(ckpt))
    assert result.exit_code == 2 and "not valid JSON" in result.output


def test_lora_checkpoint_without_adapter_files(tmp_path):
    ckpt = _full_checkpoint(tmp_path)
    (ckpt / "state.json").write_text(json.dumps({"step": 5, "base_model": "tiny-random", "lora": True}))
    result = _run("--checkpoint", str(ckpt))
    assert result.exit_code == 2
    assert "model/adapter_config.json" in result.output and "model/adapter_model.*" in result.output


def test_base_model_that_moved_is_named(tmp_path):
    ckpt = _full_checkpoint(tmp_path, base="/nonexistent/base")
    with pytest.raises(EvalInputError, match=r"base model of checkpoint .*\(recorded in state.json; pass --model BASE"):
        load_checkpoint(ckpt)


def test_arch_mismatch_lists_differing_keys():
    a = {"model_type": "llama", "hidden_size": 64, "vocab_size": 10}
    b = {"model_type": "llama", "hidden_size": 96}
    assert arch_mismatch(a, b) == ["hidden_size: 64 vs 96"]
    assert arch_mismatch(a, a) == []


def test_option_errors_exit_2():
    result = CliRunner().invoke(app, ["eval"])
    assert result.exit_code == 2 and "nothing to evaluate" in result.output
    result = CliRunner().invoke(app, ["eval", "--endpoint", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "--endpoint needs --model" in result.output
    result = CliRunner().invoke(app, ["eval", "--model", "tiny-random", "--backend", "tpu", "--env", "bandit"])
    assert result.exit_code == 2 and "--backend must be" in result.output
    result = CliRunner().invoke(app, ["eval", "--model", "no-such-model", "--env", "bandit"])
    assert result.exit_code == 2 and "unknown model 'no-such-model'" in result.output
    result = CliRunner().invoke(app, ["eval", "--model", "tiny-random", "--env", "nosuchenv"])
    assert result.exit_code == 2 and "nosuchenv" in result.output


def test_unreachable_endpoint_exits_2(tiny_model_dir, tmp_path, monkeypatch):
    import time

    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)  # the retries' waits, recorded instead of slept
    with socket.socket() as s:  # a free port: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = CliRunner().invoke(app, ["eval", "--endpoint", f"http://127.0.0.1:{port}", "--model", str(tiny_model_dir),
                                      "--env", "bandit", "--episodes", "1", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "cannot reach the endpoint" in result.output
    assert waits == [1.0, 2.0, 4.0, 8.0]  # Retry(): 5 tries, 1 s after the first failure, doubled after each


def test_an_eval_run_in_process_leaves_the_environment_as_it_found_it(monkeypatch, tmp_path):
    """Without --verbose the eval quietens its process (TQDM_DISABLE and the others of
    ragen_cli.quiet) for as long as it runs; run in-process, as by a test, it leaves the
    environment as it was, so the processes later tests start are not quietened."""
    import os

    from ragen_cli.quiet import quiet_env

    for key in quiet_env(tmp_path):
        monkeypatch.delenv(key, raising=False)
    before = dict(os.environ)
    result = CliRunner().invoke(app, ["eval", "--model", "tiny-random", "--env", "nosuchenv"])
    assert result.exit_code == 2 and "nosuchenv" in result.output
    assert dict(os.environ) == before and "TQDM_DISABLE" not in os.environ
