"""What WebShop policies that learn nothing score on goals never used in training: the floor a
trained model must clear (issue 23).

    .venv/bin/python bench/webshop_baselines.py                       # splits val and test, 6 turns
    .venv/bin/python bench/webshop_baselines.py --splits val --turns 6 --draws 20

Policies, each given the spec's turn budget (`rollout.max_turns`, one action a turn):
- scripted: search[the instruction text], click the first product of the results, click[buy now]
  (the routine issue 23 names; it picks no option, so option-dependent goals score partly);
- copy example: every turn, the answer the format line shows with `answer_example: first`, the
  page's first listed action (search[<your query>], then click[back to search], ...);
- random: a uniformly random listed action each turn (`--draws` episodes per goal);
- first + named options: search[the instruction without its price clause] (the expert's query,
  envs/experts.py `webshop_query`), click the first product, on its page click each listed option
  value the instruction names (as a whole word), then buy: everything it reads is in the prompt;
- best title + named options: the same, but on the results page it clicks the product whose
  listed price is under the instruction's bound and whose title shares the most words with the
  instruction (the first of equals).
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

from ragen_cli.envs.experts import webshop_query
from ragen_cli.envs.webshop.pages import SUB_PAGES


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


_NAVIGATION = {"back to search", "< prev", "next >", "buy now", *SUB_PAGES}  # an item page's buttons that are no option
_PRICE_BOUND = re.compile(r"lower than ([\d.]+) dollars")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def first_product(obs: str, products: list[str], instruction: str) -> str:
    return products[0]


def best_title(obs: str, products: list[str], instruction: str) -> str:
    """The listed product under the price bound with the most title words in the instruction.
    A results page reads `... [SEP] B0ID [SEP] title [SEP] $price [SEP] ...`."""
    parts, wanted = obs.split(" [SEP] "), _words(instruction)
    bound = _PRICE_BOUND.search(instruction)
    best, best_key = products[0], None
    for i, part in enumerate(parts[:-2]):
        if not re.fullmatch(r"B0[0-9A-Z]+", part.strip()):
            continue
        prices = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", parts[i + 2])]
        affordable = bound is None or (bool(prices) and min(prices) <= float(bound.group(1)))
        key = (affordable, len(wanted & _words(parts[i + 1])))
        if best_key is None or key > best_key:
            best, best_key = f"click[{part.strip().lower()}]", key
    return best


def named_options(pick):
    """A policy that reads only the prompt: search for the instruction, click the product `pick`
    chooses, click each listed option the instruction names, buy."""
    def policy(env, obs: str, turn: int) -> str:
        actions, instruction = env.valid_actions(), env.goal["instruction_text"].lower()
        if actions == ["search[<your query>]"]:
            return f"search[{webshop_query(env.goal)}]"
        if "click[buy now]" in actions:
            for action in actions:
                value = action[len("click["):-1]
                if value not in _NAVIGATION and value not in env.chosen.values() \
                        and re.search(rf"\b{re.escape(value)}\b", instruction):
                    return action
            return "click[buy now]"
        products = [a for a in actions if re.fullmatch(r"click\[b0[0-9a-z]+\]", a)]
        return pick(obs, products, instruction) if products else actions[0]
    return policy


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
                    "random": [make_random(d) for d in range(args.draws)],
                    "first + named options": [named_options(first_product)],
                    "best title + named options": [named_options(best_title)]}
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
