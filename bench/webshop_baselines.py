"""What WebShop policies that learn nothing score on goals never used in training: the floor a
trained model must clear (issue 23).

    .venv/bin/python bench/webshop_baselines.py                       # splits val and test, 6 turns
    .venv/bin/python bench/webshop_baselines.py --splits val --turns 6 --draws 20

Policies, each given the spec's turn budget (`rollout.max_turns`, one action a turn):
- scripted: search[the instruction text], click the first product of the results, click[buy now]
  (the routine issue 23 names; it picks no option, so option-dependent goals score partly);
- copy example: every turn, the answer the format line shows with `answer_example: first`, the
  page's first listed action (search[<your query>], then click[back to search], ...);
- random: a uniformly random listed action each turn (`--draws` episodes per goal).
For each split: every goal once (seeds 0..n-1 map to the split's goals in order). Prints one JSON
line per policy and split: mean WebShop score, success rate (score 1), and the share of episodes
that bought anything.
"""

from __future__ import annotations

import argparse
import json
import random
import re

from base_model import shipped_spec


def play(env, seed: int, policy, turns: int) -> tuple[float, bool, bool]:
    """(score, success, bought) of one episode of `policy(env, obs, turn)`."""
    obs, _ = env.reset(seed=seed)
    reward, info = 0.0, {}
    for turn in range(turns):
        obs, reward, terminated, truncated, info = env.step(policy(env, obs, turn))
        if terminated or truncated:
            break
    bought = "reward_info" in info
    return (reward if bought else 0.0), bool(info.get("success", False)), bought


def scripted(env, obs: str, turn: int) -> str:
    actions = env.valid_actions()
    if actions == ["search[<your query>]"]:
        return f"search[{env.goal['instruction_text']}]"
    if "click[buy now]" in actions:
        return "click[buy now]"
    products = [a for a in actions if re.fullmatch(r"click\[b0[0-9a-z]+\]", a)]
    return products[0] if products else actions[0]


def copy_first(env, obs: str, turn: int) -> str:
    return env.valid_actions()[0]


def make_random(seed: int):
    rnd = random.Random(seed)
    return lambda env, obs, turn: rnd.choice(env.valid_actions())


def main() -> None:
    from ragen_cli.envs.registry import make_env

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spec", default="webshop")
    p.add_argument("--splits", default="val,test")
    p.add_argument("--turns", type=int, default=None, help="default: the spec's rollout.max_turns")
    p.add_argument("--draws", type=int, default=10)
    args = p.parse_args()
    spec = shipped_spec(args.spec)
    turns = args.turns or spec.rollout.max_turns
    for split in args.splits.split(","):
        env = make_env("webshop", {**dict(spec.env.train.config), "split": split})
        seeds = list(range(len(env.goal_range)))
        policies = {"scripted": [scripted], "copy example (first)": [copy_first],
                    "random": [make_random(d) for d in range(args.draws)]}
        for name, draws in policies.items():
            results = [play(env, seed, policy, turns) for policy in draws for seed in seeds]
            n = len(results)
            print(json.dumps({
                "split": split, "goals": len(seeds), "policy": name, "turns": turns, "episodes": n,
                "score": round(sum(r[0] for r in results) / n, 4), "success": round(sum(r[1] for r in results) / n, 4),
                "bought": round(sum(r[2] for r in results) / n, 4),
            }))


if __name__ == "__main__":
    main()
