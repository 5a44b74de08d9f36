"""How often the base model's first reply names a valid action, by `rollout.answer_example`.

    .venv/bin/python bench/answer_example.py                      # frozenlake and sokoban
    .venv/bin/python bench/answer_example.py --envs frozenlake --group-size 32

The prompt, parser and settings of `specs/frozenlake.yaml` / `specs/sokoban.yaml` (think off,
`<answer>` pre-filled, 3 actions and 8 tokens per turn, T = 1.0), one turn, on `--groups`
seeds x `--group-size` samples, once per answer_example mode (none, first, random). Prints one
JSON line per env and mode: replies that named at least one valid action, replies whose
actions are exactly the format line's example (copied), and the most common answers. Used in
docs/training.md to explain why the specs show a random example.
"""

from __future__ import annotations

import argparse
import collections
import json
import random

SPEC_CONFIGS = {
    "frozenlake": {"size": 4, "p": 0.8, "is_slippery": True, "max_actions": 10},
    "sokoban": {"dim_x": 6, "dim_y": 6, "num_boxes": 1, "max_actions": 10},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--envs", default="frozenlake,sokoban")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=16)
    args = ap.parse_args()

    from ragen_cli.envs.registry import make_env
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.context import answer_example
    from ragen_cli.rollout.driver import timed_rollouts
    from ragen_cli.rollout.vllm_backend import VLLMBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    model_dir = resolve_model(args.model, "float32")
    tok = load_tokenizer(model_dir)
    backend = VLLMBackend(model_dir, "float32", max_model_len=1024, seed=0, kv_cache_gib=2)
    seeds = list(range(100, 100 + args.groups))
    for env in args.envs.split(","):
        ref = EnvRef(name=env, config=SPEC_CONFIGS[env])
        names = make_env(env, SPEC_CONFIGS[env]).valid_actions()
        for mode in ("none", "first", "random"):
            rollout = RolloutSpec(max_turns=1, max_actions_per_turn=3, max_tokens_per_turn=8, think=False,
                                  temperature=1.0, answer_example=mode)
            trajs, stats = timed_rollouts(backend, tok, ref, seeds, args.group_size, rollout, 1024, 7)
            valid = sum(t.turns[0].valid > 0 for t in trajs)
            copied = 0
            for t in trajs:  # the example this episode was shown (driver._example, turn 1)
                rng = random.Random(f"answer-example:{t.seed}:1") if mode == "random" else None
                shown = answer_example(names, "||", 3, rng).split(" || ")
                copied += mode != "none" and [a.strip() for a in t.turns[0].actions] == shown
            answers = collections.Counter(" || ".join(a.strip()[:16] for a in t.turns[0].actions) for t in trajs)
            print(json.dumps({"env": env, "answer_example": mode, "samples": len(trajs), "valid": valid,
                              "copied_example": int(copied), "top": answers.most_common(3),
                              "rollout_s": round(stats["timing/rollout_s"], 1)}), flush=True)


if __name__ == "__main__":
    main()
