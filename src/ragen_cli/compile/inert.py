"""Settings a spec writes that have no effect in its compiled Plan: `ragen validate` and
`ragen train --dry-run` print each as a warning naming the field and why (`inert_settings`).

A setting counts as written when the spec file, the preset or `--set` gave it (pydantic's
`model_fields_set` of its section); defaults are never reported. Each rule is a fact of this
code base, not a heuristic:

1. One optimizer step per rollout batch (`Sizes.optimizer_steps_per_step` 1, no fixed
   `train.mini_batch`): the update's forward is the old log-probs' forward (train/loop.py), so
   the PPO ratio is exactly 1 and neither clip bound nor the dual clip acts; the critic's values
   equal its old values, so the value clip does not act either.
2. No critic (`adv_estimator` grpo or reinforce): the critic's learning rate, the value clip
   and GAE's lambda; `gamma` is GAE's discount only (the outcome estimators use the undiscounted
   return).
3. `high_level_gamma` without `bi_level_gae`; `grpo_norm_std` without GRPO or GiGPO;
   `gigpo_step_weight` without GiGPO, and GiGPO itself on one-turn episodes (its step advantage
   then equals the episode advantage); `kl_estimator` with `kl_coef` 0 (no KL term, no
   reference model).
4. Rollout importance weights (`rollout_is` on) where trainer and engine both run fp32: their
   log-probs agree to ~1e-6 nats, every weight is 1 to that precision; `rollout_is_cap`,
   `rollout_is_level`, `rollout_is_mode` and `rollout_is_lower` where the Plan applies no
   correction (`Plan.rollout_is_cap` None), and `rollout_is_lower` in truncate mode (it bounds
   the mask mode's band only).
5. Engine settings the Plan does not use: `rollout.sleep` where the engine never sleeps (CPU, HF
   backend), `rollout.vllm_kv_cache_gib` outside vLLM on CPU, `rollout.lora_sync` without
   LoRA, `deepspeed.master_port` for one process (it rendezvouses on a free port).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragen_cli.compile.plan import Plan
from ragen_cli.spec.models import RunSpec


@dataclass(frozen=True)
class Inert:
    """One written setting without effect: its key path and why."""

    field: str
    why: str

    def warning(self) -> str:
        return f"warning: {self.field} has no effect in this Plan: {self.why}"


def written(spec: RunSpec, path: str) -> bool:
    """Whether the spec file, its preset or --set gave the field at `path` ("algorithm.clip_low")."""
    *sections, name = path.split(".")
    node = spec
    for section in sections:
        node = getattr(node, section)
    return name in node.model_fields_set


def single_pass(spec: RunSpec, plan: Plan) -> bool:
    """One optimizer step per rollout batch, whatever the filter keeps: online_k = ppo_epochs =
    mini_batches = 1 and the mini-batch is the whole kept batch (`train.mini_batch` unset)."""
    return plan.sizes.optimizer_steps_per_step == 1 and spec.train.mini_batch is None


def inert_settings(spec: RunSpec, plan: Plan) -> list[Inert]:
    """The written settings of `spec` that `plan` (compiled from it) never reads, in field order."""
    a, r = spec.algorithm, spec.rollout
    one = ("one optimizer step per rollout batch (online_k, ppo_epochs and mini_batches 1): the update's forward "
           "gives the old log-probs, so the PPO ratio is exactly 1")
    critic = a.adv_estimator == "gae"
    no_critic = f"adv_estimator {a.adv_estimator} trains no critic"
    fp32 = plan.precision == "fp32" and plan.placement is not None and plan.placement["rollout"]["dtype"] == "float32"
    no_is = f"no rollout importance correction in this Plan (rollout_is {a.rollout_is}, precision {plan.precision})"
    candidates = [
        ("algorithm.clip_low", single_pass(spec, plan), one + " and the clip never acts"),
        ("algorithm.clip_high", single_pass(spec, plan), one + " and the clip never acts"),
        ("algorithm.dual_clip_c", single_pass(spec, plan) and a.dual_clip_c is not None,
         one + " and the dual clip never acts"),
        ("algorithm.value_clip", not critic and a.value_clip is not None, no_critic),
        ("algorithm.value_clip", critic and single_pass(spec, plan) and a.value_clip is not None,
         "one optimizer step per rollout batch: the critic's values equal its old values and the clip never acts"),
        ("algorithm.lam", not critic, no_critic + " (lambda is GAE's)"),
        ("algorithm.gamma", a.adv_estimator in ("grpo", "reinforce"),
         f"adv_estimator {a.adv_estimator} uses the undiscounted return (gamma is GAE's and GiGPO's)"),
        ("algorithm.high_level_gamma", not (critic and a.bi_level_gae), "bi-level GAE is off"),
        ("algorithm.grpo_norm_std", a.adv_estimator not in ("grpo", "gigpo"),
         f"adv_estimator is {a.adv_estimator}, not grpo or gigpo"),
        ("algorithm.gigpo_step_weight", a.adv_estimator != "gigpo", f"adv_estimator is {a.adv_estimator}, not gigpo"),
        ("algorithm.adv_estimator", a.adv_estimator == "gigpo" and r.max_turns == 1,
         "gigpo's step advantage needs several turns: with rollout.max_turns 1 every anchor group is the whole group, "
         "so it only scales grpo's advantage by 1 + gigpo_step_weight"),
        ("algorithm.kl_estimator", a.kl_coef == 0, "kl_coef is 0: no KL term and no reference model"),
        ("algorithm.rollout_is", a.rollout_is == "on" and fp32,
         "trainer and rollout engine both run fp32, where their log-probs agree to ~1e-6 nats: every weight is 1"),
        *((f"algorithm.{name}", plan.rollout_is_cap is None, no_is)
          for name in ("rollout_is_cap", "rollout_is_level", "rollout_is_mode", "rollout_is_lower")),
        ("algorithm.rollout_is_lower", plan.rollout_is_cap is not None and a.rollout_is_mode == "truncate",
         "rollout_is_mode truncate clamps at rollout_is_cap only: the lower bound is the mask mode's"),
        ("train.lr_critic", not critic, no_critic),
        ("rollout.sleep", r.sleep != "off" and not plan.vllm_sleep,
         "the engine sleeps only with vLLM on CUDA" + (f" (device {plan.device}, backend {r.backend})")),
        ("rollout.vllm_kv_cache_gib", plan.device != "cpu" or r.backend == "hf",
         "the KV-cache size is vLLM's on CPU" + f" (device {plan.device}, backend {r.backend})"),
        ("rollout.lora_sync", plan.lora_sync is None, "model.lora is off"),
        ("deepspeed.master_port", spec.deepspeed.world == 1, "one process rendezvouses on a free port"),
    ]
    return [Inert(path, why) for path, inert, why in candidates if inert and written(spec, path)]
