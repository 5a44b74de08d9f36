"""The Plan is what runs: a real run's setup (DeepSpeed engines, HF rollout backend, the loop's
`Run`) receives plan.json's decisions unchanged, and one real training step runs on them."""

from __future__ import annotations

import json
from pathlib import Path

SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
# 2 groups x 2 rollouts, all kept (4 trajectories); mini_batches 2 -> mini-batch 2, micro 1 ->
# 2 accumulation steps of one trajectory: where DeepSpeed's batch fields differ from the sizes'.
TINY = ["model.name=tiny-random", "model.lora=null", "env.train.groups=2", "env.train.group_size=2",
        "algorithm.filter.keep_ratio=1.0", "algorithm.filter.include_zero=true", "algorithm.adv_estimator=gae",
        "algorithm.mini_batches=2", "rollout.backend=hf", "rollout.max_tokens_per_turn=4", "train.micro_batch=1",
        "deepspeed.precision=fp32", "env.val.every=0", "checkpoint.every=0", "train.steps=1"]


def test_deepspeed_and_the_loop_receive_plan_json(tmp_path, tiny_model_dir):
    import torch

    from ragen_cli.compile.plan import Plan, compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train_step
    from ragen_cli.train.runtime import setup, teardown

    spec = load_spec(SPEC, TINY + [f"output.dir={tmp_path}", "name=planned"])
    plan = compile_plan(spec, device="cpu", cpu_count=2)
    # sizes: 4 kept / 2 mini-batches = 2 per optimizer step, micro 1 -> 2 accumulation steps
    assert (plan.sizes.mini_batch, plan.sizes.micro_batch, plan.sizes.grad_accum_steps) == (2, 1, 2)
    run = setup(spec, plan, tmp_path / "planned", resume=False)
    try:
        written = Plan.from_json((tmp_path / "planned" / "plan.json").read_text())
        assert written == plan and run.plan is plan  # the loop reads the Plan it was given
        for engine, config in ((run.engines.actor, plan.deepspeed), (run.engines.critic, plan.critic_deepspeed)):
            assert engine.config == config == json.loads(json.dumps(config))  # DeepSpeed's own copy of the dict
            # unmanaged accumulation: one micro-batch of 1 per DeepSpeed batch, world 1
            assert (engine.train_batch_size(), engine.train_micro_batch_size_per_gpu(),
                    engine.gradient_accumulation_steps()) == (1, 1, 1)
            assert (config["train_batch_size"], config["gradient_accumulation_steps"]) == (1, 1)
        dtype = next(run.engines.actor.module.parameters()).dtype
        assert str(dtype).removeprefix("torch.") == plan.placement["actor"]["dtype"] == "float32"
        metrics = train_step(run, 1)
        assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values() if v is not None)
        assert run.plan == written  # nothing rewrote it during the step
    finally:
        teardown(run)
