"""Clipping acts under the presets (issue: with one pass and one mini-batch the PPO ratio is
exactly 1, so clip_low / clip_high never act). The starpo-s preset cuts each rollout batch into
4 optimizer steps (the reference's ppo_mini_batch_size = train batch / 4): every mini-batch
after the first is scored against the old log-probs with moved weights, so tokens cross the
clip bounds. A real run on the tiny-random model shows it; the same run with one mini-batch
shows that nothing is clipped there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_train_e2e import run_tiny

pytestmark = pytest.mark.slow

# 4 groups x 4, keep 2 groups = 8 trajectories; GAE (the preset's estimator) gives every token an
# advantage even before any reward is seen; lr 1e-2 moves a tiny model far in one optimizer step.
SETS = ["model.lora=null", "train.steps=1", "train.lr_actor=1e-2", "algorithm.adv_estimator=gae",
        "env.train.groups=4", "env.train.group_size=4", "algorithm.filter.keep_ratio=0.5",
        "train.micro_batch=2", "checkpoint.every=0"]


def first_step(out: Path) -> dict:
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[0])


def test_the_preset_splits_the_batch_and_clipping_acts(tmp_path):
    from ragen_cli.spec.loader import load_spec
    from test_train_e2e import SPEC, TINY

    spec = load_spec(SPEC, TINY + SETS + ["algorithm.mini_batches=4"])
    assert spec.algorithm.preset == "starpo-s"
    out = tmp_path / "four"
    run_tiny(out, SETS + ["algorithm.mini_batches=4"])  # TINY pins 1; 4 is the preset's value
    m = first_step(out)
    assert m["actor/clip_frac_high"] > 0 and m["actor/clip_frac_low"] > 0 and m["actor/approx_kl"] > 0

    one = tmp_path / "one"
    run_tiny(one, SETS + ["algorithm.mini_batches=1"])
    m1 = first_step(one)
    assert m1["actor/clip_frac_high"] == 0.0 and m1["actor/clip_frac_low"] == 0.0 and m1["actor/approx_kl"] == 0.0


def test_both_presets_default_to_four_mini_batches():
    from ragen_cli.spec.loader import load_spec

    for preset in ("starpo", "starpo-s"):
        assert load_spec("specs/sokoban.yaml", [f"algorithm.preset={preset}"]).algorithm.mini_batches == 4
    assert load_spec("specs/sokoban.yaml", ["algorithm.preset=null"]).algorithm.mini_batches == 1
