"""The trainer carries out the Echo Trap decisions (monitor.health.action): a real run on the
tiny-random model, real DeepSpeed engine, real HF rollouts.

The alarm is made to fire on a known step: greedy sampling (`rollout.temperature=0`) makes
the two rollouts of every group identical, so `diversity/identical_share` is 1.0 (a narrowing
signal) and every group's reward std is 0 (`filter/zero_std_frac` 1.0: the no_variance
failure) at every step, while success never rises (no progress). With `warmup_steps=2`,
`collapse_votes=1` and the no-signal rule off, the verdict is healthy at step 1 (too little
history) and collapse from step 2 on. With the no-signal rule on instead, the same run is a run
without any learning signal from step 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_train_e2e import run_tiny

pytestmark = pytest.mark.slow

HEALTH = [
    "rollout.temperature=0", "env.train.groups=4", "algorithm.filter.keep_ratio=0.5", "algorithm.filter.include_zero=true",
    "algorithm.adv_estimator=grpo", "model.lora=null",
    "monitor.health.warmup_steps=2", "monitor.health.smooth=1",
]
COLLAPSE = HEALTH + ["monitor.health.collapse_votes=1", "monitor.health.no_signal_steps=0"]


def events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def metric_lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_stop_checkpoints_and_ends_the_run(tmp_path):
    out = tmp_path / "stop"
    summary = run_tiny(out, COLLAPSE + ["train.steps=4", "checkpoint.every=0", "monitor.health.action=stop"])
    assert summary["stopped"] is True and summary["step"] == 2
    ev = events(out)
    health = [e for e in ev if e["kind"] == "health"]
    assert [(e["step"], e["level"], e["previous"]) for e in health] == [(2, "collapse", "healthy")]
    assert any(r["signal"] == "identical_replies" and r["value"] == 1.0 for r in health[0]["reasons"])
    stops = [e for e in ev if e["kind"] == "intervention"]
    assert [(e["step"], e["action"], e["save_checkpoint"]) for e in stops] == [(2, "stop", True)]
    assert [e["step"] for e in ev if e["kind"] == "checkpoint"] == [2]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2"]
    assert [m["step"] for m in metric_lines(out)] == [1, 2]
    end = [e for e in ev if e["kind"] == "end"]
    assert len(end) == 1 and end[0]["stopped"] is True and end[0]["step"] == 2


def test_no_signal_is_said_at_once_and_stops_after_empty_steps(tmp_path, capsys):
    # no_signal_steps 1: said at step 1 (warning); empty_stop_steps 2: collapse at step 2, and
    # the run stops there although health.action is warn
    out = tmp_path / "empty"
    summary = run_tiny(out, HEALTH + ["train.steps=4", "checkpoint.every=0", "monitor.health.no_signal_steps=1",
                                      "monitor.health.empty_stop_steps=2", "monitor.health.action=warn"])
    assert summary["stopped"] is True and summary["step"] == 2
    health = [e for e in events(out) if e["kind"] == "health"]
    assert [(e["step"], e["level"]) for e in health] == [(1, "warning"), (2, "collapse")]
    assert health[0]["reasons"][0]["signal"] == "no_signal" and "group_size" in health[0]["reasons"][0]["message"]
    assert "ragen: health: warning at step 1: in step 1, every group got one reward" in capsys.readouterr().out


def test_intervene_filters_harder_lowers_lr_and_rolls_back(tmp_path):
    out = tmp_path / "intervene"
    summary = run_tiny(out, COLLAPSE + [
        "train.steps=4", "checkpoint.every=1", "checkpoint.keep=5", "train.lr_actor=1e-3",
        "monitor.health.action=intervene", "monitor.health.cooldown=10",
        "monitor.health.keep_ratio_factor=0.5", "monitor.health.lr_factor=0.5", "monitor.health.rollback=true",
    ])
    assert summary["stopped"] is False and summary["step"] == 4
    ev = events(out)

    # step 2: collapse -> one intervention: keep 0.5 -> 0.25, lr x 0.5, back to step 1's checkpoint
    iv = [e for e in ev if e["kind"] == "intervention"]
    assert len(iv) == 1, iv  # later alarms fall in the cooldown
    assert iv[0]["step"] == 2 and iv[0]["action"] == "intervene"
    assert iv[0]["changes"] == {"keep_ratio": [0.5, 0.25], "lr_scale": 0.5, "rollback_to": 1}

    # the weights after the rollback are the step-1 checkpoint's, not the step-2 weights
    ckpt1 = [e for e in ev if e["kind"] == "checkpoint" and e["step"] == 1]
    rb = [e for e in ev if e["kind"] == "rollback"]
    assert len(rb) == 1 and rb[0]["step"] == 2 and rb[0]["to_step"] == 1
    assert rb[0]["checksum"] == ckpt1[0]["checksum"]
    assert rb[0]["checksum_before"] != rb[0]["checksum"]
    # no checkpoint is written for the abandoned step 2: step 1 is saved again with the
    # intervention's settings (runtime.rollback); the redone steps 2..4 are saved
    assert [e["step"] for e in ev if e["kind"] == "checkpoint"] == [1, 1, 2, 3, 4]
    assert rb[0]["removed"] == []

    # metrics.jsonl: steps 1, 2 (abandoned), then 2 (redone), 3, 4
    lines = metric_lines(out)
    assert [m["step"] for m in lines] == [1, 2, 2, 3, 4]
    # 4 groups: keep 0.5 -> 2 groups, then 0.25 -> 1 group
    assert [m["filter/kept_frac"] for m in lines] == [0.5, 0.5, 0.25, 0.25, 0.25]
    # constant schedule without warm-up: the scale applies to every later step and never compounds
    assert [m["actor/lr"] for m in lines] == pytest.approx([1e-3, 1e-3, 5e-4, 5e-4, 5e-4], rel=1e-12)

    state = json.loads((out / "checkpoints" / "step-4" / "state.json").read_text())
    assert (state["keep_ratio"], state["lr_scale"], state["interventions"], state["last_intervention_step"]) == (0.25, 0.5, 1, 2)


def test_scaled_step_follows_a_deepspeed_schedule(tmp_path):
    """With a DeepSpeed LR scheduler the scale applies to the schedule's rate at every step."""
    from ragen_cli.compile.deepspeed_config import scheduler_block
    from ragen_cli.train.engine import init_distributed
    from ragen_cli.train.update import scaled_step

    init_distributed({})  # sets DS_ACCELERATOR=cpu before deepspeed is imported
    import deepspeed
    import torch

    def engine():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                  "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "torch_adam": True}},
                  "scheduler": scheduler_block("constant", 0.1, 4, 10)}
        return deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)[0]

    plain, scaled = engine(), engine()
    used_plain, used_scaled = [], []
    for _ in range(6):
        for eng, used, scale in ((plain, used_plain, 1.0), (scaled, used_scaled, 0.5)):
            eng.backward(eng(torch.ones(1, 3)).sum())
            used.append(scaled_step(eng, scale))
    # WarmupLR, linear over 4 steps from 0 to 0.1: DeepSpeed's first optimizer step runs at the
    # initial 0, then 0.1 x i/4 for i = 0..4 (DeepSpeed 0.19.8)
    assert used_plain == pytest.approx([0.0, 0.0, 0.025, 0.05, 0.075, 0.1], abs=1e-12)
    assert used_scaled == pytest.approx([0.5 * x for x in used_plain], abs=1e-12)
