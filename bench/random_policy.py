"""Success of a uniform random policy on a shipped spec's validation seeds: the floor a trained
policy should clear, and what copying a random `answer_example` amounts to.

    .venv/bin/python bench/random_policy.py                     # specs/frozenlake.yaml, specs/sokoban.yaml
    .venv/bin/python bench/random_policy.py --specs sokoban --moves 6,9 --draws 200

For each spec: its training env and config, its validation seeds (`env.val.seed`, `episodes`
of them), and for each move budget in `--moves` the mean success over `--draws` random action
sequences per seed (each move drawn uniformly from the env's actions). Prints one JSON line per
spec and budget (6 moves = 3 turns x a 2-name example copied; 9 = 3 turns x 3 actions), then
one line per move budget for each fixed-action template (every move the same action) on the
validation seeds and on `--draws` x 20 other seeds, and one line per `answer_example` mode (random, random-per-rollout) for the policy that copies the
format line's example every turn, as validation shows it: on these deterministic-per-seed envs
that is one exact number, the validation success of a model that only copies.
"""

from __future__ import annotations

import argparse
import json
import random

from base_model import shipped_spec


def success_rate(name: str, config: dict, seeds: list[int], moves: int, draws: int) -> float:
    from ragen_cli.envs.registry import make_env

    rnd, wins = random.Random(0), 0
    env = make_env(name, config)
    for seed in seeds:
        for _ in range(draws):
            env.reset(seed=seed)
            actions = env.valid_actions()
            for _ in range(moves):
                _, _, terminated, truncated, info = env.step(rnd.choice(actions))
                if terminated or truncated:
                    break
            wins += bool(info.get("success", False))
    return wins / (len(seeds) * draws)


def fixed_action_rate(name: str, config: dict, seeds: list[int], action: str, moves: int) -> float:
    """Success of the policy that answers `action` every move (a template, whatever the state)."""
    from ragen_cli.envs.registry import make_env

    env, wins = make_env(name, config), 0
    for seed in seeds:
        env.reset(seed=seed)
        info = {}
        for _ in range(moves):
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        wins += bool(info.get("success", False))
    return wins / len(seeds)


def copy_example_rate(name: str, config: dict, seeds: list[int], rollout, mode: str) -> float:
    from ragen_cli.envs.registry import make_env
    from ragen_cli.rollout.context import answer_example

    env, wins = make_env(name, config), 0
    for seed in seeds:
        env.reset(seed=seed)
        info, done = {}, False
        for turn in range(1, rollout.max_turns + 1):
            shown = answer_example(mode, env.valid_actions(), rollout.action_sep,
                                   rollout.max_actions_per_turn, seed, turn)  # validation: copy 0
            for action in shown.split(f" {rollout.action_sep} "):
                _, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
                if done:
                    break
            if done:
                break
        wins += bool(info.get("success", False))
    return wins / len(seeds)


def main() -> None:
    from ragen_cli.envs.registry import make_env

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default="frozenlake,sokoban", help="names of shipped specs (specs/NAME.yaml)")
    ap.add_argument("--moves", default="6,9", help="comma-separated move budgets")
    ap.add_argument("--draws", type=int, default=100, help="random action sequences per seed")
    args = ap.parse_args()

    for name in args.specs.split(","):
        spec = shipped_spec(name)
        ref, val = spec.env.train, spec.env.val
        seeds = list(range(val.seed, val.seed + val.episodes))
        for moves in (int(m) for m in args.moves.split(",")):
            rate = success_rate(ref.name, dict(ref.config), seeds, moves, args.draws)
            print(json.dumps({"spec": name, "env": ref.name, "val_seeds": f"{seeds[0]}..{seeds[-1]}",
                              "moves": moves, "draws_per_seed": args.draws, "success": round(rate, 3)}), flush=True)
        names = make_env(ref.name, dict(ref.config)).valid_actions()
        for moves in (int(m) for m in args.moves.split(",")):
            for pool, label in ((seeds, "val_seeds"), (list(range(10_000, 10_000 + args.draws * 20)), "other seeds")):
                rates = {a: round(fixed_action_rate(ref.name, dict(ref.config), pool, a, moves), 3) for a in names}
                print(json.dumps({"spec": name, "env": ref.name, "policy": "the same action every move",
                                  "moves": moves, label: len(pool), "success": rates}), flush=True)
        for mode in ("random", "random-per-rollout"):
            rate = copy_example_rate(ref.name, dict(ref.config), seeds, spec.rollout, mode)
            print(json.dumps({"spec": name, "env": ref.name, "val_seeds": f"{seeds[0]}..{seeds[-1]}",
                              "policy": f"copy the answer example ({mode})", "success": round(rate, 3)}), flush=True)


if __name__ == "__main__":
    main()
