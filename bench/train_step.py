"""Update throughput: ragen's update stage (DeepSpeed engine, micro-batching, PPO loss with
entropy) against a bare torch loop (forward, the same loss, backward, AdamW step) on the same
batch, in one run; prints tokens/s of both and their ratio (target: ragen within 1.5x).

    .venv/bin/python bench/train_step.py [--model smollm2-135m-instruct] [--batch 4] [--seq 256]

Both sides start from the same weights, run `--warmup` untimed updates, then `--iters` timed.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")


def make_batch(B: int, T: int, vocab: int):
    import torch

    from ragen_cli.train.batch import Batch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (B, T + 1), generator=g)
    mask = torch.zeros(B, T)
    mask[:, T // 2:] = 1.0  # second half is "sampled reply"
    return Batch(ids, torch.ones_like(ids), mask, torch.zeros(B, T), [[T - 1]] * B, [[1.0]] * B, list(range(B)))


def bench_ragen(spec, plan, model_dir, batch, adv, args) -> float:
    from ragen_cli.train.batch import score
    from ragen_cli.train.engine import build_engines, init_distributed
    from ragen_cli.train.update import actor_update

    _, world = init_distributed(plan.env)
    engines = build_engines(spec, plan, model_dir, world)
    old = score(engines.actor, batch, spec.train.micro_batch)
    for _ in range(args.warmup):
        actor_update(engines.actor, batch, old, adv, None, spec, len(batch))
    start = time.perf_counter()
    for _ in range(args.iters):
        actor_update(engines.actor, batch, old, adv, None, spec, len(batch))
    return time.perf_counter() - start


def bench_bare(spec, model_dir, batch, adv, args) -> float:
    import torch

    from ragen_cli.algos.logits import entropy_from_logits, logprobs_from_logits
    from ragen_cli.algos.losses import aggregate, policy_loss
    from ragen_cli.models.load import load_causal_lm

    a = spec.algorithm
    model = load_causal_lm(model_dir, "float32").train()
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr_actor, weight_decay=spec.train.weight_decay)
    with torch.no_grad():
        old = logprobs_from_logits(model(input_ids=batch.input_ids).logits[:, :-1], batch.input_ids[:, 1:])

    def update():
        for lo in range(0, len(batch), spec.train.micro_batch):
            ids, m = batch.input_ids[lo:lo + spec.train.micro_batch], batch.mask[lo:lo + spec.train.micro_batch]
            logits = model(input_ids=ids).logits[:, :-1]
            logp = logprobs_from_logits(logits, ids[:, 1:])
            pg, _ = policy_loss(logp, old[lo:lo + len(ids)], adv[lo:lo + len(ids)], m, a.clip_low, a.clip_high, a.dual_clip_c, a.loss_agg)
            loss = pg - a.entropy_coef * aggregate(entropy_from_logits(logits), m, a.loss_agg)
            (loss * len(ids) / len(batch)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        update()
    start = time.perf_counter()
    for _ in range(args.iters):
        update()
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--micro", type=int, default=2)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    import torch

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.spec.models import RunSpec

    spec = RunSpec.model_validate({
        "name": "bench", "model": {"name": args.model}, "env": {"train": {"name": "bandit", "groups": 1, "group_size": args.batch}},
        "algorithm": {"adv_estimator": "grpo", "filter": {"keep_ratio": 1.0}},
        "train": {"micro_batch": args.micro, "lr_actor": 1e-6}, "deepspeed": {"precision": "fp32"},
    })
    plan = compile_plan(spec, device="cpu", cpu_count=os.cpu_count())
    model_dir = resolve_model(args.model)
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    batch = make_batch(args.batch, args.seq, vocab)
    adv = torch.randn(batch.mask.shape, generator=torch.Generator().manual_seed(1)) * batch.mask
    tokens = batch.tokens * args.iters
    bare = bench_bare(spec, model_dir, batch, adv, args)
    ragen = bench_ragen(spec, plan, model_dir, batch, adv, args)
    print(json.dumps({
        "model": args.model, "batch": args.batch, "seq": args.seq, "micro": args.micro, "iters": args.iters,
        "bare_tokens_per_s": round(tokens / bare, 1), "ragen_tokens_per_s": round(tokens / ragen, 1),
        "ratio_bare_over_ragen": round(ragen / bare, 3),
    }))


if __name__ == "__main__":
    main()
