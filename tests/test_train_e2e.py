"""End to end on the tiny-random model: real DeepSpeed engine (CPU, gloo), real HF rollouts on
the Bandit env, real checkpoints. One 2-step run (full fine-tuning, GAE critic) is shared by
the e2e assertions and, as the uninterrupted reference, by the resume-equivalence test; LoRA
runs check the adapter checkpoint, export (merge), KL against the adapter-disabled reference,
and resume equivalence of the adapter-only DeepSpeed state."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
# 2 groups x 2 rollouts, keep 1 group (2 trajectories) = 1 micro-batch of 2 (one mini-batch); 8 new tokens.
TINY = [
    "model.name=tiny-random", "env.train.groups=2", "env.train.group_size=2", "algorithm.filter.keep_ratio=0.5", "algorithm.filter.include_zero=true",
    "rollout.backend=hf", "rollout.max_tokens_per_turn=8", "train.micro_batch=2", "deepspeed.precision=fp32",
    "env.val.every=0", "checkpoint.every=1", "checkpoint.keep=3", "train.lr_actor=1e-3", "train.lr_critic=1e-3",
    "monitor.trajectories_per_step=4", "algorithm.adv_estimator=gae", "algorithm.mini_batches=1",
]


def run_tiny(out: Path, sets: list[str], resume: bool = False):
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    spec = load_spec(SPEC, TINY + [f"output.dir={out.parent}", f"name={out.name}"] + sets)
    return train(spec, compile_plan(spec, device="cpu"), out, resume=resume)


def safetensors_state(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    state = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def assert_same_step(a: Path, b: Path, step: int, parts=("model", "critic")) -> None:
    """Runs a and b hold bit-identical checkpoints (each of `parts`) and trajectories at `step`."""
    import torch

    for part in parts:
        wa = safetensors_state(a / "checkpoints" / f"step-{step}" / part)
        wb = safetensors_state(b / "checkpoints" / f"step-{step}" / part)
        assert wa and wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), part
    traj = f"trajectories/step-{step}.jsonl"
    assert (a / traj).read_text() == (b / traj).read_text()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, tiny_model_dir) -> Path:
    out = tmp_path_factory.mktemp("full") / "full"
    run_tiny(out, ["model.lora=null", "train.steps=2", "monitor.loggers=[jsonl, tensorboard]"])
    return out


def test_full_run_writes_finite_metrics_and_changes_weights(full_run, tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_cli.monitor.rundir import RunDir

    records = RunDir(full_run).read_metrics()
    assert [r["step"] for r in records] == [1, 2]
    for r in records:
        bad = {k: v for k, v in r.items() if not (isinstance(v, (int, float)) and math.isfinite(v))}
        assert not bad, bad
        # the critic exists (GAE) and trained: its metrics are present
        assert {"critic/value_loss", "critic/grad_norm", "actor/grad_norm", "sync/parity_gap"} <= r.keys()
        assert r["actor/grad_norm"] > 0
    ckpt = full_run / "checkpoints" / "step-2"
    assert (ckpt / "model" / "config.json").is_file() and (ckpt / "critic" / "config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(str(ckpt / "model"))  # plain transformers loads it
    before = safetensors_state(tiny_model_dir)
    changed = [k for k, v in model.state_dict().items() if k in before and not torch.equal(v, before[k])]
    assert len(changed) > 0.5 * len(before), f"only {len(changed)} of {len(before)} tensors changed"
    events = [e["kind"] for e in RunDir(full_run).read_events()]
    assert events[0] == "start" and events[-1] == "end" and events.count("checkpoint") == 2
    # the TensorBoard sink got the same numbers as metrics.jsonl
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(full_run / "tensorboard"))
    acc.Reload()
    tb = [(e.step, e.value) for e in acc.Scalars("reward/mean")]
    assert tb == [(r["step"], pytest.approx(r["reward/mean"])) for r in records]
    trajs = (full_run / "trajectories" / "step-1.jsonl").read_text().splitlines()
    assert len(trajs) == 4 and {"reply", "actions", "reward"} <= json.loads(trajs[0])["turns"][0].keys()


def test_resume_continues_exactly(full_run, tmp_path):
    """1 step, then resume for 1 more == the uninterrupted 2 steps: same trajectories, same
    losses, same weights (CPU is deterministic for the same inputs and RNG states)."""
    import torch

    from ragen_cli.monitor.rundir import RunDir

    out = tmp_path / "resumed"
    run_tiny(out, ["model.lora=null", "train.steps=1"])
    run_tiny(out, ["model.lora=null", "train.steps=2"], resume=True)
    assert (out / "trajectories" / "step-2.jsonl").read_text() == (full_run / "trajectories" / "step-2.jsonl").read_text()
    a, b = RunDir(out).read_metrics()[-1], RunDir(full_run).read_metrics()[-1]
    for key in ("actor/policy_loss", "critic/value_loss", "actor/entropy", "actor/grad_norm", "reward/mean"):
        assert a[key] == b[key], key
    wa = safetensors_state(out / "checkpoints" / "step-2" / "model")
    wb = safetensors_state(full_run / "checkpoints" / "step-2" / "model")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_lora_run_saves_adapter_and_export_merges(tmp_path, tiny_model_dir):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = tmp_path / "lora"
    run_tiny(out, ["model.lora={rank: 4, alpha: 8}", "train.steps=2", "algorithm.adv_estimator=grpo",
                   "algorithm.kl_coef=0.01", "checkpoint.every=0"])
    ckpt = out / "checkpoints" / "step-2"
    assert (ckpt / "model" / "adapter_config.json").is_file()
    assert not (ckpt / "critic").exists()  # GRPO: no critic
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    peft_model = PeftModel.from_pretrained(base, str(ckpt / "model"))
    lora_b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    assert lora_b and any(p.abs().sum() > 0 for p in lora_b)  # B starts at 0: it trained
    first, last = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # step 1: the reference is the actor with its adapter off, and B = 0, so pi == pi_ref: KL 0;
    # step 2 scores against the updated adapter: KL is finite and no longer 0.
    assert first["actor/kl_ref"] == 0.0
    assert math.isfinite(last["actor/kl_ref"]) and last["actor/kl_ref"] != 0.0

    from ragen_cli.publish.export import export

    merged_dir = export(ckpt, tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        expect = peft_model.eval()(input_ids=ids).logits
        got = merged.eval()(input_ids=ids).logits
    torch.testing.assert_close(got, expect, rtol=1e-4, atol=1e-4)


def test_lora_resume_continues_exactly(tmp_path):
    """The LoRA path (adapter-only DeepSpeed state, exclude_frozen_parameters; GAE critic with its
    own adapter) resumes exactly too: 1 + 1 steps give the same adapter as 2 steps."""
    lora = ["model.lora={rank: 4, alpha: 8}", "algorithm.adv_estimator=gae"]
    run_tiny(tmp_path / "a", lora + ["train.steps=2"])
    run_tiny(tmp_path / "b", lora + ["train.steps=1"])
    run_tiny(tmp_path / "b", lora + ["train.steps=2"], resume=True)
    assert_same_step(tmp_path / "a", tmp_path / "b", 2)
