"""`ragen train` / `ragen export` through Typer's CliRunner: the paths that start no training."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ragen_cli.cli import app

SPEC = str(Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml")
runner = CliRunner()


def test_dry_run_json_prints_the_plan_and_creates_nothing(tmp_path):
    result = runner.invoke(app, ["train", SPEC, "--dry-run", "--json", "--set", f"output.dir={tmp_path}"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    # bandit.yaml: P=16 groups x N=16 = 256, keep_ratio 0.125 keeps floor(0.125 x 16) = 2 groups = 32
    # trajectories at most (include_zero false: fewer when groups have no reward spread)
    assert plan["sizes"]["trajectories_per_step"] == 256 and plan["sizes"]["kept_trajectories"] == 32
    assert plan["sizes"]["kept_groups_vary"] == 1
    assert plan["launch"]["kind"] == "in-process"
    assert not any(tmp_path.iterdir())


def test_dry_run_table(tmp_path):
    result = runner.invoke(app, ["train", SPEC, "--dry-run", "--set", f"output.dir={tmp_path}"])
    assert result.exit_code == 0, result.output
    assert "bandit" in result.output


def test_json_without_dry_run_is_refused(tmp_path):
    result = runner.invoke(app, ["train", SPEC, "--json", "--set", f"output.dir={tmp_path}"])
    assert result.exit_code == 2 and "--dry-run" in result.output
    assert not any(tmp_path.iterdir())


def test_needs_spec_or_resume():
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2 and "--resume" in result.output


def test_resume_of_a_non_run_dir(tmp_path):
    result = runner.invoke(app, ["train", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "spec.yaml" in result.output


def test_bad_override_is_a_spec_error(tmp_path):
    result = runner.invoke(app, ["train", SPEC, "--dry-run", "--set", "train.stepz=3"])
    assert result.exit_code == 2 and "train.stepz" in result.output


def test_export_of_a_non_checkpoint(tmp_path):
    result = runner.invoke(app, ["export", str(tmp_path), str(tmp_path / "out")])
    assert result.exit_code == 2 and "not a ragen checkpoint" in result.output


def test_train_in_process_leaves_no_quiet_settings_behind(tmp_path, monkeypatch):
    # the quiet console (early_quiet) runs before the model check that ends this command with exit 2;
    # the environment, warning filters and torch's Triton logger are as they were afterwards
    import logging
    import os
    import warnings

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    triton = logging.getLogger("torch._library.triton")
    environ, filters, level = dict(os.environ), list(warnings.filters), triton.level
    result = runner.invoke(app, ["train", SPEC, "--set", "model.name=acme/not-cached",
                                 "--set", f"output.dir={tmp_path / 'runs'}"])
    assert result.exit_code == 2, result.output
    assert dict(os.environ) == environ and "TQDM_DISABLE" not in os.environ
    assert list(warnings.filters) == filters and triton.level == level
