"""build_plan: where each eval setting comes from (option > spec validation section > default)."""

from __future__ import annotations

import pytest

from ragen_cli.eval.checkpoint import EvalInputError
from ragen_cli.eval.runner import build_plan
from ragen_cli.spec.models import EnvRef, EnvSpec, LoraSpec, ModelSpec, RunSpec, TrainEnvSpec, ValSpec

SPEC = RunSpec(
    name="x",
    model=ModelSpec(name="tiny-random", lora=LoraSpec(rank=4)),
    env=EnvSpec(train=TrainEnvSpec(name="bandit", config={"high_arm_prob": 0.5}),
                val=ValSpec(envs=[EnvRef(name="sokoban", config={"max_actions": 7})], episodes=3, seed=9,
                            temperature=0.7)),
)
NONE = dict(episodes=None, seed=None, temperature=None, greedy=False, samples=1, max_turns=None, backend=None)


def test_spec_validation_settings_are_the_defaults():
    plan = build_plan(SPEC, envs=[], **NONE)
    assert plan.envs == (EnvRef(name="sokoban", config={"max_actions": 7}),)
    assert plan.seeds == (9, 10, 11)  # val.seed 9, val.episodes 3
    assert plan.rollout.temperature == 0.7 and plan.backend == "auto"
    assert plan.rollout.max_turns == 5 and plan.rollout.max_tokens_per_turn == 128  # RolloutSpec defaults
    assert plan.spec.model.lora is None  # LoRA checkpoints are merged before generation


def test_options_override_and_named_envs_keep_their_spec_config():
    plan = build_plan(SPEC, envs=["bandit", "frozenlake"], episodes=2, seed=40, temperature=None, greedy=True,
                      samples=4, max_turns=3, backend="hf", max_tokens=9)
    assert plan.envs == (EnvRef(name="bandit", config={"high_arm_prob": 0.5}), EnvRef(name="frozenlake"))
    assert plan.seeds == (40, 41) and plan.samples == 4
    assert plan.rollout.temperature == 0.0 and plan.sampling()["greedy"]
    assert (plan.rollout.max_turns, plan.rollout.max_tokens_per_turn, plan.backend) == (3, 9, "hf")


def test_without_spec_uses_the_spec_model_defaults():
    plan = build_plan(None, envs=["bandit"], **NONE)
    assert plan.seeds == tuple(range(123, 123 + 64)) and plan.rollout.temperature == 0.5
    with pytest.raises(EvalInputError, match="--env NAME"):
        build_plan(None, envs=[], **NONE)
    with pytest.raises(EvalInputError, match="nosuch"):
        build_plan(None, envs=["nosuch"], **NONE)


def test_a_fading_answer_example_is_not_shown_in_eval():
    # rollout.answer_example_steps makes the example a training scaffold: eval (like validation)
    # measures the policy with the reference's "[your answer]" line; without it eval shows it.
    from ragen_cli.spec.models import RolloutSpec

    shown = SPEC.model_copy(update={"rollout": RolloutSpec(answer_example="random")})
    faded = SPEC.model_copy(update={"rollout": RolloutSpec(answer_example="random", answer_example_steps=10)})
    assert build_plan(shown, envs=[], **NONE).rollout.answer_example == "random"
    assert build_plan(faded, envs=[], **NONE).rollout.answer_example == "none"
