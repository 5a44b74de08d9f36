"""How often the base model's first reply names a valid action, by `rollout.answer_example`.

    .venv/bin/python bench/answer_example.py                      # specs/frozenlake.yaml, specs/sokoban.yaml
    .venv/bin/python bench/answer_example.py --specs frozenlake --group-size 32

The prompt, parser, env and rollout settings of each shipped spec, first turn only, on
`--groups` seeds x `--group-size` samples, once per answer_example mode (none, first, random, random-per-rollout),
whatever the spec itself says. Prints one JSON line per spec and mode: replies that named at
least one valid action, replies whose actions are exactly the format line's example (copied),
and the most common answers. Used in docs/training.md to explain the specs' answer_example.
"""

from __future__ import annotations

import argparse
import collections
import json

from base_model import shipped_spec, tokenizer_and_engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--specs", default="frozenlake,sokoban", help="shipped spec names (specs/NAME.yaml) or spec files (*.yaml), comma-separated")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=16)
    args = ap.parse_args()

    from ragen_cli.envs.registry import make_env
    from ragen_cli.rollout.prompts import answer_example
    from ragen_cli.rollout.driver import timed_rollouts

    tok, backend = tokenizer_and_engine(args.model)
    seeds = list(range(100, 100 + args.groups))
    for name in args.specs.split(","):
        spec = shipped_spec(name)
        ref, max_context = spec.env.train, spec.model.max_context
        names = make_env(ref.name, dict(ref.config)).valid_actions()
        for mode in ("none", "first", "random", "random-per-rollout"):
            rollout = spec.rollout.model_copy(update={"max_turns": 1, "answer_example": mode})
            trajs, stats = timed_rollouts(backend, tok, ref, seeds, args.group_size, rollout, max_context, 7)
            valid = sum(t.turns[0].valid > 0 for t in trajs)
            copied = sum(mode != "none" and f" {rollout.action_sep} ".join(a.strip() for a in t.turns[0].actions)
                         == answer_example(mode, names, rollout.action_sep, rollout.max_actions_per_turn, t.seed, 1,
                                           copy=i % args.group_size)  # trajectories come grouped in order
                         for i, t in enumerate(trajs))
            answers = collections.Counter(" || ".join(a.strip()[:16] for a in t.turns[0].actions) for t in trajs)
            print(json.dumps({"spec": name, "answer_example": mode, "samples": len(trajs), "valid": valid,
                              "copied_example": copied, "top": answers.most_common(3),
                              "rollout_s": round(stats["timing/rollout_s"], 1)}), flush=True)


if __name__ == "__main__":
    main()
