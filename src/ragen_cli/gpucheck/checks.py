"""The checks of `python -m ragen_cli.gpucheck` (the package doc lists them), each on the built-in
tiny-random model in the precision `auto` resolves to on the device; each returns its numbers
with `ok`, or raises `Skip` when it cannot run here."""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
from pathlib import Path


class Skip(Exception):
    """A check that cannot run here; the message says why."""


def need_deepspeed() -> None:
    """DeepSpeed is one of ragen's own requirements, not an option: a machine without it fails the
    checks that train (skipping them would let the run print `ok: true`)."""
    if importlib.util.find_spec("deepspeed") is None:
        raise RuntimeError("deepspeed is not installed; ragen needs it: pip install deepspeed==0.19.8 "
                           "(a machine without a registry: scripts/gpu-prepare.sh builds its wheel)")


SPEC_YAML = """\
name: {name}
model: {{name: tiny-random, max_context: 1024}}
env:
  train: {{name: bandit, groups: 2, group_size: 2}}
  val: {{every: 0}}
rollout: {{backend: hf, max_turns: 1, max_tokens_per_turn: 8}}
algorithm: {{adv_estimator: grpo, filter: {{keep_ratio: 1.0}}, mini_batches: 1}}
train: {{steps: {steps}, micro_batch: 2, lr_actor: 1.0e-3}}
deepspeed: {{device: {device}, precision: auto}}
checkpoint: {{every: 1, keep: 3}}
output: {{dir: {out}}}
"""


def _spec(device: str, precision: str, lora: bool, extra: tuple[str, ...] = ()):
    from ragen_cli.spec.loader import load_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(SPEC_YAML.format(name="gpu-check", steps=1, device=device, out=tmp), encoding="utf-8")
        sets = [f"deepspeed.precision={precision}", "model.lora=" + ("{rank: 8, alpha: 16}" if lora else "null"),
                *extra]
        return load_spec(path, sets)


def fixed_batch(tokenizer):
    """2 groups x 2 rows: one bandit-like prompt per group, short replies; the trajectories and
    the advantage grid (+1 on group 0's reply tokens, -1 on group 1's)."""
    import torch

    from ragen_cli.rollout.types import Trajectory
    from ragen_cli.train.batch import collate

    trajs = []
    # each group its own reply words, so +1 and -1 never pull on the same tokens
    for g, (prompt_text, replies) in enumerate((("Pick an arm: Phoenix or Dragon?", (" Phoenix", " Dragon")),
                                                ("Choose a door: left or right?", (" left", " right")))):
        prompt = tokenizer.encode(prompt_text)
        for reply_text in replies:
            reply = tokenizer.encode(reply_text)
            ids = prompt + reply
            trajs.append(Trajectory(input_ids=ids, loss_mask=[0] * len(prompt) + [1] * len(reply),
                                    old_logprobs=[0.0] * len(ids), turn_end=[len(ids) - 1], turn_rewards=[0.0],
                                    group=g))
    batch = collate(trajs)
    adv = torch.tensor([1.0 if g == 0 else -1.0 for g in batch.group])[:, None] * batch.mask
    return batch, adv


def zero2(device: str) -> tuple[str, ...]:
    """ZeRO-2 as `specs/gpu/` train it, with the optimizer state offloaded to CPU where there is a
    GPU to offload from (the spec refuses offload when training on CPU)."""
    return ("deepspeed.zero_stage=2", "deepspeed.offload=" + ("cpu" if device == "cuda" else "none"))


def update(device: str, precision: str, lora: bool, extra: tuple[str, ...] = ()) -> dict:
    """One real DeepSpeed actor update (module doc): direction and finiteness."""
    need_deepspeed()

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.spec.sizes import mini_batch_rows
    from ragen_cli.train.batch import module_device, score
    from ragen_cli.train.engine import build_engines, init_distributed, ref_context
    from ragen_cli.train.update import actor_update

    spec = _spec(device, precision, lora, ("algorithm.kl_coef=0.01", "train.lr_actor=1.0e-2", *extra))
    plan = compile_plan(spec, device=device, precision=(precision, "gpu-check"))
    model_dir = resolve_model("tiny-random", "float32")
    init_distributed(plan.env)
    engines = build_engines(spec, plan, model_dir, 1)
    batch, adv = fixed_batch(load_tokenizer(model_dir))
    before = score(engines.actor, batch, micro=2)
    with ref_context(engines):
        ref = score(engines.ref, batch, micro=2)
    stats = actor_update(engines.actor, batch, before, adv, ref, spec, mini_batch_rows(len(batch), 1, None, 1))
    after = score(engines.actor, batch, micro=2)
    up = float(((after - before) * (adv > 0)).sum() / (adv > 0).sum())
    down = float(((after - before) * (adv < 0)).sum() / (adv < 0).sum())
    finite = all(math.isfinite(v) for v in stats.values() if v is not None)
    ref_device = str(next(engines.ref.parameters()).device)
    return {"ok": finite and up > 0 > down and ref_device == str(module_device(engines.actor)),
            "actor_device": str(module_device(engines.actor)), "reference_device": ref_device,
            "dtype": str(next(engines.actor.module.parameters()).dtype), "logp_change_pos": up,
            "logp_change_neg": down, "grad_norm": stats.get("grad_norm"),
            "optimizer": type(engines.actor.basic_optimizer).__name__,
            "zero_stage": spec.deepspeed.zero_stage, "offload": spec.deepspeed.offload}


def hf_rollouts(device: str, precision: str) -> dict:
    """Bandit rollouts through the HF backend on the device; sampler log-probs vs the trainer's."""

    from ragen_cli.device import PRECISION_DTYPES
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.train.batch import collate, score

    spec = _spec(device, precision, False)
    model_dir = resolve_model("tiny-random", "float32")
    model = load_causal_lm(model_dir, PRECISION_DTYPES[precision], "cuda" if device == "cuda" else "cpu")
    tok = load_tokenizer(model_dir)
    trajs = run_rollouts(HFBackend(model, tok), tok, spec.env.train, [0, 1], 2, spec.rollout, 1024, 7)
    batch = collate(trajs)
    mine = score(model, batch, micro=4, share_prefix=False)
    gap = float(((mine - batch.sample_logp).abs() * batch.mask).max())
    bound = 1e-4 if precision == "fp32" else 0.1  # bf16: 8 significant bits on logits of size ~10
    return {"ok": len(trajs) == 4 and gap <= bound, "episodes": len(trajs), "max_logprob_gap": gap, "bound": bound,
            "model_device": str(next(model.parameters()).device)}


def vllm_engine(device: str, precision: str) -> dict:
    """vLLM in this process: generate, sleep / wake (CUDA), tensor sync judged by the sync check."""
    if importlib.util.find_spec("vllm") is None:
        raise Skip("vllm is not installed (on CUDA: pip install vllm==0.32.0, the `gpu` extra)")
    import torch

    from ragen_cli.rollout.vllm_args import engine_kwargs
    from ragen_cli.device import PRECISION_DTYPES
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.rollout.parity import judge_sync
    from ragen_cli.rollout.vllm_backend import VLLMBackend

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process, as the Plan runs it on CUDA
    dtype = PRECISION_DTYPES[precision]
    model_dir = resolve_model("tiny-random", "float32")
    tok = load_tokenizer(model_dir)
    cuda = device == "cuda"
    args = engine_kwargs(dtype=dtype, max_model_len=1024, seed=0, device=device, sleep=cuda)
    engine = VLLMBackend.with_args(model_dir, args, weight_sync="tensors")
    out: dict = {"sleep": "skipped: sleep mode needs CUDA" if not cuda else None}
    try:
        prompt = tok.encode("Pick an arm: Phoenix or Dragon? Answer with one word.")
        [samples] = engine.generate([prompt], n=4, max_tokens=16, temperature=1.0, top_p=1.0, seed=3)
        probe = [prompt + s.token_ids for s in samples]
        if cuda:
            engine.sleep()
            engine.wake_up()
            out["sleep"] = "ok"
        trainer = HFBackend(load_causal_lm(model_dir, dtype, "cuda" if cuda else "cpu"), tok)

        def both(scorer):
            return [x for ids in probe for x in scorer.score(ids)[len(prompt) - 1:]]

        engine.sync({k: v for k, v in trainer.model.state_dict().items()})
        old_t, old_e = both(trainer), both(engine)
        with torch.no_grad():
            for p in trainer.model.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        new_t = both(trainer)
        stale = judge_sync(old_t, old_e, new_t, both(engine), 0.05, 3.0)
        engine.sync({k: v for k, v in trainer.model.state_dict().items()})
        fresh = judge_sync(old_t, old_e, new_t, both(engine), 0.05, 3.0)
    finally:
        engine.close()
    out.update(ok=stale.verdict != "ok" and fresh.verdict == "ok" and out["sleep"] != "failed",
               samples=len(samples), tokens=fresh.tokens, noise=fresh.noise, fresh_gap=fresh.gap,
               stale_gap=stale.gap, stale_verdict=stale.verdict, fresh_verdict=fresh.verdict)
    return out


def resume(device: str, work: Path, extra: tuple[str, ...] = ()) -> dict:
    """A 2-step run against a 1-step run resumed to 2 (each step checkpointed): identical step-2
    weights. Runs the training loop in this process, as one rank of `ragen train` does; `extra`
    are `--set` overrides (ZeRO-2)."""
    need_deepspeed()
    from safetensors.torch import load_file

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    work.mkdir(parents=True, exist_ok=True)

    def run(name: str, steps: int, again: bool = False) -> None:
        path = work / f"{name}.yaml"
        path.write_text(SPEC_YAML.format(name=name, steps=steps, device=device, out=work), encoding="utf-8")
        spec = load_spec(path, list(extra))
        train(spec, compile_plan(spec), work / name, resume=again)

    run("straight", 2)
    run("resumed", 1)
    run("resumed", 2, again=True)

    def weights(name: str) -> dict:
        files = sorted((work / name / "checkpoints" / "step-2" / "model").glob("*.safetensors"))
        return {k: v for f in files for k, v in load_file(str(f)).items()}

    a, b = weights("straight"), weights("resumed")
    same_keys = bool(a) and a.keys() == b.keys()
    diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a) if same_keys else math.inf
    return {"ok": same_keys and diff == 0.0, "tensors": len(a), "max_abs_diff": diff}
