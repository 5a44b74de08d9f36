"""Subprocess script for tests/test_chat_templates.py: for each chat template fixture, a multi-turn
FrozenLake rollout through the HF backend on tiny-random, the update's batch as the training loop
builds it (`stages.update_rows` with the Plan's `turn_rows`), the trainer's log-probs of every
trained token against the sampler's, and one real DeepSpeed actor update on it. Prints one JSON
line per case. The update's advantages are +1 on group 0's tokens and -1 on group 1's (tiny-random's
replies all miss the format, so the env's rewards tie): the first group's log-probs must rise and
the second's fall. Its own process: DeepSpeed's process group must not live in the pytest process.

    python tests/chat_template_run.py OUT_DIR [DEVICE PRECISION]     # default: cpu fp32 (the test's)

On a GPU (`cuda bf16`) it ran once by hand for docs/rollout.md.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
CASES = {  # name: (template file, rollout.think, model.chat_template_kwargs)
    "qwen2_5": ("qwen2_5.jinja", True, {}),
    "qwen3": ("qwen3.jinja", True, {}),
    "qwen3-no-thinking": ("qwen3.jinja", False, {"enable_thinking": False}),
    "llama3": ("llama3.jinja", True, {}),
    "gemma": ("gemma.jinja", True, {}),
}
SPEC = """\
name: {name}
model: {{name: tiny-random, max_context: 2048, chat_template: {template}, chat_template_kwargs: {kwargs}}}
env:
  train: {{name: frozenlake, groups: 2, group_size: 2}}
  val: {{every: 0}}
rollout: {{backend: hf, max_turns: 2, max_tokens_per_turn: 6, think: {think}}}
algorithm: {{adv_estimator: grpo, filter: {{keep_ratio: 1.0}}, mini_batches: 1, kl_coef: 0.0}}
train: {{steps: 1, micro_batch: 4, lr_actor: 1.0e-3}}
deepspeed: {{device: {device}, precision: {precision}}}
output: {{dir: {out}}}
"""


def case(name: str, out: Path, device: str = "cpu", precision: str = "fp32") -> dict:
    import torch

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.spec.sizes import mini_batch_rows
    from ragen_cli.train import stages
    from ragen_cli.train.batch import collate, score
    from ragen_cli.train.engine import build_engines, init_distributed
    from ragen_cli.train.update import actor_update

    template, think, kwargs = CASES[name]
    path = out / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, template=FIXTURES / template, kwargs=json.dumps(kwargs),
                                think=str(think).lower(), out=out, device=device, precision=precision), encoding="utf-8")
    spec = load_spec(path)
    plan = compile_plan(spec)
    model_dir = resolve_model("tiny-random", "float32")
    init_distributed(plan.env)
    engines = build_engines(spec, plan, model_dir, 1)  # fresh weights and optimizer state for each case
    tok = load_tokenizer(model_dir, spec.model)
    trajs = run_rollouts(HFBackend(engines.actor.module, tok), tok, spec.env.train, [0, 1], 2, spec.rollout,
                         spec.model.max_context, 7)
    episodes = collate(trajs)
    batch, rowmap = stages.update_rows(plan.turn_rows, trajs, episodes, 1)
    before = score(engines.actor, batch, micro=4)
    gap = float(((before - batch.sample_logp).abs() * batch.mask).max())
    adv = torch.tensor([1.0 if g == 0 else -1.0 for g in batch.group])[:, None] * batch.mask
    stats = actor_update(engines.actor, batch, before, adv, None, spec, mini_batch_rows(len(batch), 1, None, 1))
    after = score(engines.actor, batch, micro=4)
    first = trajs[0]
    rerendered = [t for t in trajs if len(t.turn_end) > 1 and t.turn_prompts[1] is not None]
    return {
        "case": name, "turn_rows": plan.turn_rows, "template": plan.template, "rows": len(batch),
        "episodes": len(trajs), "turns": [len(t.turn_end) for t in trajs], "trained_tokens": int(batch.mask.sum()),
        "max_logprob_gap": gap, "logp_change_pos": float(((after - before) * (adv > 0)).sum() / (adv > 0).sum()),
        "logp_change_neg": float(((after - before) * (adv < 0)).sum() / (adv < 0).sum()),
        "finite": all(math.isfinite(v) for v in stats.values() if v is not None),
        "first_prompt": tok.decode(first.input_ids[: first.turn_start[0]]),
        "turn2_prompt": tok.decode(rerendered[0].turn_prompts[1]) if rerendered else None,
        "turn2_layout": tok.decode(rerendered[0].input_ids[: rerendered[0].turn_start[1]]) if rerendered else None,
    }


def main(out: Path, device: str = "cpu", precision: str = "fp32") -> None:
    for name in CASES:
        print(json.dumps({**case(name, out, device, precision), "device": device, "precision": precision}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:4])
