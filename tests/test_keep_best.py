"""checkpoint.keep_best: the best validation step's checkpoint is kept beside the newest `keep`,
`checkpoints/best` links to it, and eval / export read it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragen_cli.train import checkpoint as ckpt


def _fake_steps(root: Path, steps: list[int]) -> None:
    for k in steps:
        (root / f"step-{k}").mkdir(parents=True)
        (root / f"step-{k}" / "state.json").write_text("{}")


def test_prune_keeps_the_newest_and_the_protected_step(tmp_path):
    _fake_steps(tmp_path, [5, 10, 15, 20, 25])
    gone = ckpt.prune(tmp_path, keep=2, protect=10)
    assert sorted(p.name for p in gone) == ["step-15", "step-5"]
    assert [k for k, _ in ckpt.list_checkpoints(tmp_path)] == [10, 20, 25]
    ckpt.prune(tmp_path, keep=2, protect=None)  # without keep_best: the newest 2 only
    assert [k for k, _ in ckpt.list_checkpoints(tmp_path)] == [20, 25]


def test_best_link_is_replaced_and_resolved(tmp_path):
    _fake_steps(tmp_path, [10, 20])
    ckpt.mark_best(tmp_path, 10)
    assert os.readlink(tmp_path / "best") == "step-10"
    ckpt.mark_best(tmp_path, 20)
    assert ckpt.resolve_best(tmp_path / "best") == tmp_path / "step-20"
    assert ckpt.resolve_best(tmp_path / "step-10") == tmp_path / "step-10"
    assert [k for k, _ in ckpt.list_checkpoints(tmp_path)] == [10, 20]  # the link is no checkpoint
    assert not list(tmp_path.glob(".best-*"))


def test_best_metric_auto_is_the_first_validation_env():
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.runtime import best_metric

    root = Path(__file__).resolve().parents[1] / "specs"
    assert best_metric(load_spec(root / "bandit.yaml")) == "val/bandit/success"
    assert best_metric(load_spec(root / "larger.yaml")) == "val/dataset/success"
    assert best_metric(load_spec(root / "bandit.yaml", ["checkpoint.keep_best=val/bandit-test/reward"])) \
        == "val/bandit-test/reward"
    assert best_metric(load_spec(root / "bandit.yaml", ["checkpoint.keep_best=null"])) is None


@pytest.mark.slow
def test_a_run_keeps_its_best_validation_step_and_eval_and_export_read_it(tmp_path):
    """A real tiny run (HF rollouts, DeepSpeed, fp32) validating every step with keep 1: the
    step whose val/bandit/reward was highest (first on ties) keeps its checkpoint, whichever step
    it was, and `checkpoints/best` names it; `ragen eval` and `ragen export` take the link."""
    from test_train_e2e import run_tiny

    from ragen_cli.eval.checkpoint import load_checkpoint

    out = tmp_path / "run"
    run_tiny(out, ["train.steps=5", "env.val.every=1", "env.val.episodes=8", "checkpoint.keep=1",
                   "checkpoint.keep_best=val/bandit/reward"])
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    val = [(r["step"], r["val/bandit/reward"]) for r in rows if r["step"] > 0 and "val/bandit/reward" in r]
    assert [s for s, _ in val] == [1, 2, 3, 4, 5]
    best_step = max(val, key=lambda sv: (sv[1], -sv[0]))[0]
    kept = [k for k, _ in ckpt.list_checkpoints(out / "checkpoints")]
    assert kept == sorted({best_step, 5})  # the newest (keep 1) and the best
    assert os.readlink(out / "checkpoints" / "best") == f"step-{best_step}"
    end = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()
           if json.loads(line)["kind"] == "end"][-1]
    assert end["best_step"] == best_step and end["best_value"] == dict(val)[best_step]
    policy = load_checkpoint(out / "checkpoints" / "best")
    assert policy.step == best_step
    from ragen_cli.publish.export import export

    exported = export(out / "checkpoints" / "best", tmp_path / "exported")
    assert (exported / "config.json").is_file()
