"""Env micro-benchmark: steps per second of every built-in env on one core.

    .venv/bin/python bench/envs.py                # all built-ins, 20,000 steps each
    .venv/bin/python bench/envs.py --steps 5000 --envs sokoban,frozenlake

Each env is stepped with random actions drawn from its currently valid actions (Countdown: a
random equation over its numbers; WebShop: search for a random word of the instruction), and
reset with the next seed when an episode ends. Reported: steps/s including those resets, and
steps/s of `step` alone (reset time excluded). Times are CPU time of this process
(`time.process_time`), so other load on a shared machine does not count against the env; the
process is pinned to one CPU when the OS allows it."""

from __future__ import annotations

import argparse
import os
import random
import time

from ragen_cli.envs.registry import BUILTINS, make_env


def _action(env, rnd: random.Random) -> str:
    if env.config.__class__.__name__ == "CountdownConfig":
        nums = [str(n) for n in env.numbers]
        rnd.shuffle(nums)
        return "".join(n + rnd.choice(" + - * / ".split()) for n in nums[:-1]) + nums[-1]
    actions = env.valid_actions()
    action = rnd.choice(actions)
    if action == "search[<your query>]":
        return f"search[{rnd.choice(env.goal['instruction_text'].split())}]"
    return action


def bench(name: str, steps: int) -> dict:
    env = make_env(name, {"max_actions": 50} if name.startswith("webshop") else None)
    rnd = random.Random(0)
    seed, resets, step_time = 0, 1, 0.0
    start = time.process_time()
    env.reset(seed=seed)
    for _ in range(steps):
        action = _action(env, rnd)
        t0 = time.process_time()
        _, _, terminated, truncated, _ = env.step(action)
        step_time += time.process_time() - t0
        if terminated or truncated:
            seed += 1
            resets += 1
            env.reset(seed=seed)
    total = time.process_time() - start
    return {"env": name, "steps": steps, "resets": resets, "steps_per_s": steps / total,
            "step_only_per_s": steps / step_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="steps per env")
    parser.add_argument("--envs", default=",".join(BUILTINS), help="comma-separated env names")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"{'env':<14} {'steps':>7} {'resets':>7} {'steps/s':>10} {'step-only/s':>12}")
    for name in args.envs.split(","):
        r = bench(name.strip(), args.steps)
        print(f"{r['env']:<14} {r['steps']:>7} {r['resets']:>7} {r['steps_per_s']:>10,.0f} {r['step_only_per_s']:>12,.0f}")


if __name__ == "__main__":
    main()
