"""Every tensor handed to a module is on that module's device, and results come back where their
consumer expects them (issue 32; docs/internals.md, "Where tensors live").

This machine has no GPU, so the "other device" is `meta`: a module moved there computes shapes
only. A strict pre-forward hook on every module with parameters refuses an input that is not on
the module's device (CUDA refuses it too; `meta` alone lets an embedding take CPU indices), so a
helper that feeds a CPU tensor to a GPU-resident model fails here as it would fail on the GPU.
Batches stay on the CPU, as `collate` builds them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ragen_cli.rollout.types import Trajectory
from ragen_cli.train.batch import collate, module_device, policy_forward, score, value_forward

ROOT = Path(__file__).resolve().parents[1]


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif hasattr(value, "layers"):  # a transformers Cache: its key / value tensors
        for layer in value.layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if isinstance(t, torch.Tensor):
                    yield t


class WrongDevice(AssertionError):
    pass


def strict_on(model, device: str = "meta"):
    """`model` moved to `device`, every module with parameters refusing inputs from elsewhere."""
    model = model.to(device)

    def check(module, args, kwargs):
        own = next(module.parameters(recurse=False)).device
        for t in _tensors([*args, *kwargs.values()]):
            if t.device != own:
                raise WrongDevice(f"{type(module).__name__} on {own} got a tensor on {t.device}")

    for m in model.modules():
        if next(m.parameters(recurse=False), None) is not None:
            m.register_forward_pre_hook(check, with_kwargs=True)
    return model


@pytest.fixture(scope="module")
def meta_lm(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    # eager attention: sdpa's mask shortcut reads a value from the mask, which meta cannot give
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager", dtype=torch.float32)
    return strict_on(model)


def test_the_hook_catches_a_cpu_input(meta_lm):
    with pytest.raises(WrongDevice, match="on meta got a tensor on cpu"):
        meta_lm(input_ids=torch.tensor([[1, 2, 3]]))


def batch_of_two_groups():
    """4 rows, 2 groups of 2 sharing a 20-token prompt (the shared-prefix pass runs), replies of
    3 and 2 sampled tokens."""
    prompt_a, prompt_b = list(range(100, 120)), list(range(200, 220))
    rows = []
    for g, prompt in enumerate((prompt_a, prompt_b)):
        for reply in ([5, 6, 7], [8, 9]):
            ids = prompt + reply
            rows.append(Trajectory(input_ids=ids, loss_mask=[0] * len(prompt) + [1] * len(reply),
                                   old_logprobs=[0.0] * len(prompt) + [-1.0] * len(reply),
                                   turn_end=[len(ids) - 1], turn_rewards=[1.0], group=g))
    return collate(rows)


@pytest.mark.parametrize("share", [True, False])
def test_policy_forward_feeds_the_module_its_own_device(meta_lm, share):
    batch = batch_of_two_groups()
    logp, entropy = policy_forward(meta_lm, batch, with_entropy=True, share_prefix=share)
    assert logp.device.type == "meta" and entropy.device.type == "meta"
    assert tuple(logp.shape) == tuple(batch.mask.shape) == (4, 22)
    assert batch.input_ids.device.type == "cpu"  # the batch itself stays where it was


def test_score_returns_where_its_consumer_asks(meta_lm):
    batch = batch_of_two_groups()
    out = score(meta_lm, batch, micro=3, out_device="meta")  # two micro-batches: rows 0-2, 3
    assert out.device.type == "meta" and tuple(out.shape) == (4, 22)


def test_score_brings_results_back_to_the_batch_device(tiny_model_dir):
    """The default consumer is the batch's device: a CPU model's scores equal a plain forward."""
    from ragen_cli.models.load import load_causal_lm

    model = load_causal_lm(tiny_model_dir, "float32")
    batch = batch_of_two_groups()
    out = score(model, batch, micro=4, share_prefix=False)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids[:1, :23]).logits[0, :-1]
    want = torch.log_softmax(logits, -1).gather(-1, batch.input_ids[0, 1:23, None])[:, 0] * batch.mask[0]
    assert out.device.type == "cpu" and torch.allclose(out[0], want, atol=1e-5)


def test_value_forward_on_the_module_device(meta_lm):
    values = value_forward(meta_lm, batch_of_two_groups())
    assert values.device.type == "meta" and tuple(values.shape) == (4, 22)


def test_actor_loss_is_computed_on_the_engine_device(meta_lm):
    """The update's micro-batch loss: old log-probs, advantages and reference log-probs arrive on
    the CPU (as `old_scores` and `advantages` make them); the loss and its stats live on the
    engine's device, with KL and the rollout importance correction on."""
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.update import _actor_micro

    spec = load_spec(ROOT / "specs" / "bandit.yaml", ["algorithm.kl_coef=0.01"])
    batch = batch_of_two_groups()
    cpu = torch.zeros(batch.mask.shape)
    loss, stats = _actor_micro(meta_lm, batch.rows([1, 2]), [1, 2], cpu, cpu, cpu, spec, is_cap=2.0)
    assert loss.device.type == "meta" and loss.dim() == 0
    assert {"policy_loss", "entropy", "kl_ref", "is_weight_mean", "approx_kl"} <= stats.keys()
    assert all(v.device.type == "meta" for v in stats.values() if isinstance(v, torch.Tensor))


def test_cross_scoring_feeds_the_module_its_own_device(meta_lm):
    from ragen_cli.train.cross_score import _extend, reply_logprobs

    prompt = list(range(300, 330))
    with torch.no_grad():
        shared = (_extend(meta_lm, None, prompt[:10]), 10)
    out = reply_logprobs(meta_lm, prompt, [[5, 6], [7]], chunk=1, shared=shared)
    assert out.device.type == "meta" and tuple(out.shape) == (2,)


def test_module_device_of_a_plain_and_a_moved_model(meta_lm):
    assert module_device(meta_lm).type == "meta"
    assert module_device(torch.nn.Linear(2, 2)).type == "cpu"


# ---------------------------------------------------------------- the Plan decides placement


def test_placement_puts_every_engine_on_the_rank_gpu():
    from ragen_cli.compile.plan import placement, placement_device

    p = placement("cuda", "bf16", critic=True, reference=True, lora=False, backend="vllm")
    assert p == {"actor": {"device": "cuda:{local_rank}", "dtype": "bfloat16"},
                 "critic": {"device": "cuda:{local_rank}", "dtype": "bfloat16"},
                 "reference": {"device": "cuda:{local_rank}", "dtype": "bfloat16", "module": "frozen copy"},
                 "rollout": {"device": "cuda:{local_rank}", "dtype": "bfloat16", "module": "engine",
                             "why": "the engine receives the trainer's own tensors", "during_update": "idle"}}
    assert placement_device(p["reference"], 3) == "cuda:3"
    cpu = placement("cpu", "fp32", critic=False, reference=True, lora=True, backend="hf")
    assert cpu == {"actor": {"device": "cpu", "dtype": "float32"},
                   "reference": {"device": "cpu", "dtype": "float32", "module": "actor, adapter off"},
                   "rollout": {"device": "cpu", "dtype": "float32", "module": "actor",
                               "why": "the HF backend samples with the trainer's own module", "during_update": "idle"}}
    # a bf16 trainer whose LoRA is merged into the engine's weights: the engine alone runs fp32
    merged = placement("cuda", "bf16", critic=False, reference=False, lora=True, backend="vllm", lora_sync="merged")
    assert merged["actor"]["dtype"] == "bfloat16" and merged["rollout"]["dtype"] == "float32"


@pytest.mark.slow
def test_the_reference_model_goes_where_the_plan_puts_it(tmp_path, monkeypatch):
    """A real DeepSpeed setup with KL on: the frozen reference copy is moved to the Plan's
    placement (here `meta` in bf16, standing for `cuda:{local_rank}`); before, it stayed on the
    CPU in fp32 while DeepSpeed moved the actor to the GPU."""
    import dataclasses

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.engine import build_engines, init_distributed

    spec = load_spec(ROOT / "specs" / "bandit.yaml", ["model.name=tiny-random", "model.lora=null",
                                                     "algorithm.kl_coef=0.01", "deepspeed.precision=fp32",
                                                     "algorithm.adv_estimator=grpo"])
    plan = compile_plan(spec, device="cpu")
    assert plan.placement["reference"] == {"device": "cpu", "dtype": "float32", "module": "frozen copy"}
    plan = dataclasses.replace(plan, placement={**plan.placement,
                                                "reference": {"device": "meta", "dtype": "bfloat16"}})
    init_distributed(plan.env)
    engines = build_engines(spec, plan, resolve_model("tiny-random", "float32"), 1)
    p = next(engines.ref.parameters())
    assert p.device.type == "meta" and p.dtype == torch.bfloat16
    assert next(engines.actor.module.parameters()).device.type == "cpu"


def test_the_cuda_optimizer_is_torchs_fused_adamw_with_nothing_to_compile():
    """The CUDA Plan's optimizer block (specs/gpu/bandit.yaml: ZeRO-2, no offload) on a real
    DeepSpeed engine: torch's AdamW with its built-in fused kernel. Before, the block said
    `torch_adam: false` on CUDA and DeepSpeed built its FusedAdam, a JIT compile at first use
    needing nvcc and ninja. (The fused kernel runs on the CPU too, so the engine builds here.)"""
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.engine import _initialize, init_distributed

    spec = load_spec(ROOT / "specs" / "gpu" / "bandit.yaml", ["deepspeed.precision=fp32"])
    plan = compile_plan(spec, device="cuda", precision=("fp32", "test"))
    assert plan.deepspeed["optimizer"]["params"]["torch_adam"] is True
    init_distributed({"DS_ACCELERATOR": "cpu"})
    engine = _initialize(torch.nn.Linear(4, 4), plan.deepspeed)
    opt = engine.basic_optimizer
    assert type(opt) is torch.optim.AdamW and opt.param_groups[0]["fused"] is True
