"""Settings with no effect in a Plan (compile/inert.py), as `ragen validate` and the dry run name them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.compile.inert import inert_settings
from ragen_cli.compile.plan import compile_plan
from ragen_cli.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[1]
BANDIT = ROOT / "specs" / "bandit.yaml"


# bandit.yaml no longer writes train.lr_critic (a shipped spec validates without a warning, issue
# 73); these tests write it back with --set, as the spec once did, to see it named
CRITIC_LR = ["train.lr_critic=1e-4"]


def inert(path: Path, sets=(), precision: str = "fp32") -> dict[str, str]:
    spec = load_spec(path, CRITIC_LR + list(sets))
    return {i.field: i.why for i in inert_settings(spec, compile_plan(spec, device="cpu", cpu_count=2,
                                                                       precision=(precision, "test")))}


def test_validate_names_the_inert_settings_of_bandit_yaml():
    # bandit.yaml: preset starpo-s writes clip_low 0.2 / clip_high 0.28; the spec sets mini_batches 1
    # (online_k and ppo_epochs 1 by default): 1 x 1 x 1 = one optimizer step, ratio exactly 1. The
    # bounds are the preset's, not the user's: no warning. adv_estimator grpo: no critic, so a
    # train.lr_critic the user writes is named.
    result = CliRunner().invoke(app, ["validate", str(BANDIT)])
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if line.startswith("warning: ")] == []
    result = CliRunner().invoke(app, ["validate", str(BANDIT), *(f"--set={s}" for s in CRITIC_LR)])
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning: ")]
    assert warnings == ["warning: train.lr_critic has no effect in this Plan: adv_estimator grpo trains no critic"]
    # the user's own clip bound is named
    result = CliRunner().invoke(app, ["validate", str(BANDIT), "--set", "algorithm.clip_high=0.3"])
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning: ")]
    assert [w.split(" has no effect")[0] for w in warnings] == ["warning: algorithm.clip_high"]
    assert "the PPO ratio is exactly 1" in warnings[0]


def test_dry_run_lists_the_same_settings(tmp_path):
    result = CliRunner().invoke(app, ["train", str(BANDIT), "--dry-run", "--set", f"output.dir={tmp_path}",
                                      *(f"--set={s}" for s in CRITIC_LR)])
    assert result.exit_code == 0, result.output
    assert "Settings with no effect in this Plan" in result.output
    # the preset's bounds are in the table, marked as the preset's
    assert all(f in result.output for f in ("algorithm.clip_low (preset starpo-s)",
                                            "algorithm.clip_high (preset starpo-s)", "train.lr_critic"))


def test_several_optimizer_steps_make_the_clip_act():
    # mini_batches 2 (or ppo_epochs 2, or online_k 2): two optimizer steps, the ratio moves
    assert set(inert(BANDIT)) == {"algorithm.clip_low", "algorithm.clip_high", "train.lr_critic"}
    for sets in (["algorithm.mini_batches=2"], ["algorithm.ppo_epochs=2"], ["algorithm.online_k=2"]):
        assert set(inert(BANDIT, sets)) == {"train.lr_critic"}


def test_a_critic_run_uses_the_critic_settings_and_defaults_are_never_named():
    # gae with 4 mini-batches: the critic learns and the clips act; only bandit.yaml's own
    # grpo_norm_std (GRPO's) is left over. gamma, lam, value_clip are defaults: never named.
    assert inert(BANDIT, ["algorithm.adv_estimator=gae", "algorithm.mini_batches=4"]) == {
        "algorithm.grpo_norm_std": "adv_estimator is gae, not grpo or gigpo"}


def test_kl_estimator_without_kl_and_norm_std_without_grpo():
    found = inert(BANDIT, ["algorithm.kl_estimator=k3", "algorithm.adv_estimator=reinforce", "algorithm.gamma=0.9"])
    assert found["algorithm.kl_estimator"] == "kl_coef is 0: no KL term and no reference model"
    assert found["algorithm.grpo_norm_std"] == "adv_estimator is reinforce, not grpo or gigpo"
    assert "undiscounted return" in found["algorithm.gamma"]


def test_rollout_is_in_fp32_and_its_cap_without_a_correction():
    # on, with trainer and engine both fp32 (full fine-tuning: the engine takes the trainer's dtype)
    found = inert(BANDIT, ["algorithm.rollout_is=on", "model.lora=null", "algorithm.mini_batches=2"])
    assert set(found) == {"algorithm.rollout_is", "train.lr_critic"}
    # in bf16 the weights correct something: not named
    assert "algorithm.rollout_is" not in inert(BANDIT, ["algorithm.rollout_is=on", "model.lora=null"], "bf16")
    # auto in fp32 resolves to no correction: a written cap is unused
    found = inert(BANDIT, ["algorithm.rollout_is_cap=3.0", "algorithm.mini_batches=2"])
    assert set(found) == {"algorithm.rollout_is_cap", "train.lr_critic"}


def test_engine_settings_the_plan_does_not_use():
    found = inert(BANDIT, ["rollout.sleep=on", "rollout.backend=hf", "rollout.vllm_kv_cache_gib=4",
                           "deepspeed.master_port=29600", "algorithm.mini_batches=2", "train.lr_critic=1e-5"])
    assert set(found) == {"rollout.sleep", "rollout.vllm_kv_cache_gib", "deepspeed.master_port", "train.lr_critic"}
