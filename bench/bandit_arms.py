"""How often the base model names each Bandit arm, by sampling temperature (one vLLM engine).

    .venv/bin/python bench/bandit_arms.py                        # T = 0.5, 0.7, 1.0, 1.3
    .venv/bin/python bench/bandit_arms.py --temperatures 1.0 --group-size 64

The same prompt, parser and rewards as `specs/bandit.yaml` (think off, `<answer>` pre-filled,
one turn), on `--groups` seeds x `--group-size` samples. Prints one JSON line per temperature:
counts of risky pulls, safe pulls and invalid answers. Used in docs/training.md to explain
why RL first learns the safe arm.
"""

from __future__ import annotations

import argparse
import collections
import json

from base_model import tokenizer_and_engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--temperatures", default="0.5,0.7,1.0,1.3")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=32)
    args = ap.parse_args()

    from ragen_cli.envs.bandit import BanditConfig
    from ragen_cli.rollout.driver import timed_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    tok, backend = tokenizer_and_engine(args.model)
    safe_score = BanditConfig().low_arm_score
    seeds = list(range(100, 100 + args.groups))
    for temperature in (float(t) for t in args.temperatures.split(",")):
        rollout = RolloutSpec(max_turns=1, max_actions_per_turn=1, max_tokens_per_turn=args.max_tokens,
                              think=False, temperature=temperature)
        trajs, stats = timed_rollouts(backend, tok, EnvRef(name="bandit"), seeds, args.group_size, rollout, 1024, 7)
        # success = the risky (higher expected value) arm was pulled, whatever it paid
        arms = collections.Counter("risky" if t.success else "safe" if abs(t.episode_reward - safe_score) < 1e-9
                                   else "invalid" for t in trajs)
        print(json.dumps({"temperature": temperature, "samples": len(trajs), **dict(sorted(arms.items())),
                          "rollout_s": round(stats["timing/rollout_s"], 1)}), flush=True)


if __name__ == "__main__":
    main()
