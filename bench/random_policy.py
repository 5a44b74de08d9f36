"""Success of a uniform random policy on a spec's validation seeds: the floor a trained
policy should clear, and what copying a random `answer_example` amounts to.

    .venv/bin/python bench/random_policy.py                     # specs/frozenlake.yaml, specs/sokoban.yaml
    .venv/bin/python bench/random_policy.py --specs sokoban --moves 6,9 --draws 200
    .venv/bin/python bench/random_policy.py --specs /tmp/try.yaml         # a spec file not shipped

For each spec: its training env and config, its validation seeds (`env.val.seed`, `episodes`
of them), and for each move budget in `--moves` the mean success over `--draws` random action
sequences per seed (each move drawn uniformly from the env's actions). Prints one JSON line per
spec and budget (6 moves = 3 turns x a 2-name example copied; 9 = 3 turns x 3 actions), then
per move budget the fixed-action templates (every move the same action) on the validation
seeds and on `--draws` x 20 other seeds, and per `answer_example` mode (random,
random-per-rollout) the policy that copies the format line's example every turn, as
validation shows it: on these deterministic-per-seed envs that is one exact number, the
validation success of a model that only copies. Last, the policy that reads the env's
`move_hint` sentence (forced on; it changes no dynamics) and answers with the moves it names,
which is also what subtracting the `grid_coord` coordinates and walking the difference gives:
FrozenLake, the goal's offset with a move into a hole put last; Sokoban, the box's offset from
the player and then the way the box must go (walk into the box, then push). Each turn it reads
the sentence again and plays up to `rollout.max_actions_per_turn` of those moves: what a model
that maps these words to moves, and does nothing else, scores. Any spec works, a custom env's
too (`--specs my_project/ragen.yaml`, run from the project directory); the last policy only
for envs with a `move_hint` option.
"""

from __future__ import annotations

import argparse
import json
import random
import re

from base_model import shipped_spec


def solves(env, seed: int, moves) -> bool:
    """Reset `env` to `seed`, play `moves` (an iterable of action names; it may look at the env)
    until the episode ends or they run out; True when the env reports success."""
    env.reset(seed=seed)
    info = {}
    for action in moves:
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return bool(info.get("success", False))


def success_rate(env, seeds: list[int], moves: int, draws: int) -> float:
    """Uniform random moves, `draws` sequences per seed."""
    rnd, actions = random.Random(0), env.valid_actions()
    wins = sum(solves(env, seed, (rnd.choice(actions) for _ in range(moves))) for seed in seeds for _ in range(draws))
    return wins / (len(seeds) * draws)


def sequence_rate(env, seeds: list[int], moves: tuple[str, ...]) -> float:
    """The policy that plays the same moves on every seed, whatever the env says back."""
    return sum(solves(env, seed, moves) for seed in seeds) / len(seeds)


def fixed_action_rate(env, seeds: list[int], action: str, moves: int) -> float:
    """The policy that answers `action` every move (a template, whatever the state)."""
    return sequence_rate(env, seeds, (action,) * moves)


def copy_example_rate(env, seeds: list[int], rollout, mode: str) -> float:
    """The policy that answers each turn with the example the format line shows in validation
    (one episode per seed, so copy 0)."""
    from ragen_cli.rollout.prompts import answer_example

    def copied(seed):
        for turn in range(1, rollout.max_turns + 1):
            shown = answer_example(mode, env.valid_actions(), rollout.action_sep, rollout.max_actions_per_turn,
                                   seed, turn)
            yield from shown.split(f" {rollout.action_sep} ")

    return sum(solves(env, seed, copied(seed)) for seed in seeds) / len(seeds)


def named_moves(words: str) -> list[str]:
    """"2 Down and 1 Right" -> ["Down", "Down", "Right"]."""
    return [name for count, name in re.findall(r"(\d+) (Up|Down|Left|Right)\b", words) for _ in range(int(count))]


def words_turn(env_name: str, sentence: str) -> list[str]:
    """The moves the `move_hint` sentence names (module docstring); [] when it names none."""
    if env_name == "frozenlake":
        match = re.match(r"The goal is (.*?) of you\. (.*)\.$", sentence)
        if not match:
            return []
        around = dict(part.split(": ") for part in match.group(2).split(", "))
        return sorted(named_moves(match.group(1)), key=lambda move: around[move] == "hole")
    match = re.match(r"(?:The box|Box 1) is (.*?) of you; it must go (.*?)\.", sentence)
    return named_moves(match.group(1)) + named_moves(match.group(2)) if match else []


def reads_words_rate(env_name: str, config: dict, seeds: list[int], rollout) -> float:
    """The policy that plays what the `move_hint` sentence names, re-read every turn."""
    from ragen_cli.envs.registry import make_env

    env = make_env(env_name, {**config, "move_hint": True})

    def moves():
        for _ in range(rollout.max_turns):
            yield from words_turn(env_name, env.render().splitlines()[-1])[:rollout.max_actions_per_turn] or ["Up"]

    return sum(solves(env, seed, moves()) for seed in seeds) / len(seeds)


def main() -> None:
    from ragen_cli.envs.registry import make_env

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default="frozenlake,sokoban", help="shipped spec names (specs/NAME.yaml) or spec files (*.yaml), comma-separated")
    ap.add_argument("--moves", default="6,9", help="comma-separated move budgets")
    ap.add_argument("--draws", type=int, default=100, help="random action sequences per seed")
    ap.add_argument("--set", action="append", default=[], dest="sets", help="spec override, as ragen train --set")
    args = ap.parse_args()

    for name in args.specs.split(","):
        spec = shipped_spec(name, args.sets)
        ref, val = spec.env.train, spec.env.val
        env = make_env(ref.name, dict(ref.config))
        seeds = list(range(val.seed, val.seed + val.episodes))
        others = list(range(10_000, 10_000 + args.draws * 20))
        head = {"spec": name, "env": ref.name, "val_seeds": f"{seeds[0]}..{seeds[-1]}"}
        for moves in (int(m) for m in args.moves.split(",")):
            rate = success_rate(env, seeds, moves, args.draws)
            print(json.dumps({**head, "moves": moves, "draws_per_seed": args.draws, "success": round(rate, 3)}), flush=True)
        for moves in (int(m) for m in args.moves.split(",")):
            for pool, label in ((seeds, "on val seeds"), (others, f"on {len(others)} other seeds")):
                rates = {a: round(fixed_action_rate(env, pool, a, moves), 3) for a in env.valid_actions()}
                print(json.dumps({**head, "policy": f"the same action every move, {label}", "moves": moves,
                                  "success": rates}), flush=True)
        for mode in ("random", "random-per-rollout"):
            rate = copy_example_rate(env, seeds, spec.rollout, mode)
            print(json.dumps({**head, "policy": f"copy the answer example ({mode})", "success": round(rate, 3)}),
                  flush=True)
        if not hasattr(env.config, "move_hint"):  # no text derived from the state to read
            continue
        for pool, label in ((seeds, "on val seeds"), (others, f"on {len(others)} other seeds")):
            rate = reads_words_rate(ref.name, dict(ref.config), pool, spec.rollout)
            print(json.dumps({**head, "policy": f"walk the coordinate difference (the moves move_hint names), {label}",
                              "success": round(rate, 3)}), flush=True)


if __name__ == "__main__":
    main()
