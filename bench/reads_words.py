"""Does a policy read the state? Agreement of its moves with where the state says to go, against
the same moves shuffled across turns.

    .venv/bin/python bench/reads_words.py RUN/eval/trajectories/step-0.jsonl [more.jsonl ...]

Reads episodes saved by `ragen eval` or `ragen train` (trajectories/step-N.jsonl) from FrozenLake
or Sokoban. For every turn whose reply executed at least one move, it checks whether the first
move goes where the state points: FrozenLake, a direction toward the goal; Sokoban, a direction
toward the box. Where the observation ends with the `move_hint` sentence (until 2026-11-25
named `describe`), the directions are those it names first-hand (`bench/random_policy.py:
words_turn`); where it shows coordinates (`observation: coord` or `grid_coord`), those that
shorten the row or column difference between the player and the goal (the first box). "agree" is the fraction of such turns.
"shuffled" is the same fraction after pairing each turn's first move with another turn's
sentence (the mean over 200 random pairings): what a policy with the same move frequencies
that ignores the state scores, so a template such as `Down` every turn scores the same on both.
agree - shuffled is the part of the agreement that depends on the state.
"""

from __future__ import annotations

import argparse
import json
import random
import re

from random_policy import named_moves, words_turn


COORD = r"\((\d+), (\d+)\)"


def coord_toward(env_name: str, obs: str) -> set[str]:
    """Directions that shorten the player's row or column difference to the goal (FrozenLake) or
    the first box (Sokoban), from the coordinate lines; empty when the observation has none."""
    target = re.search(("Goal: " if env_name == "frozenlake" else "Boxes: ") + COORD, obs)
    player = re.search("Player: " + COORD, obs)
    if not (target and player):
        return set()
    (tr, tc), (pr, pc) = (map(int, target.groups())), (map(int, player.groups()))
    return ({"Down"} if tr > pr else {"Up"} if tr < pr else set()) | \
        ({"Right"} if tc > pc else {"Left"} if tc < pc else set())


def toward(env_name: str, obs: str) -> set[str]:
    """Where the state points: the moves the hint sentence names first-hand if the observation
    ends with one, else those the coordinates give."""
    sentence = obs.splitlines()[-1] if obs.strip() else ""
    if words_turn(env_name, sentence):
        split = " of you." if env_name == "frozenlake" else " of you;"
        return set(named_moves(sentence.split(split)[0]))
    return coord_toward(env_name, obs)


def turns(paths: list[str]) -> list[tuple[set[str], str]]:
    """(directions the state points to, first executed move) of every turn that has both."""
    rows = []
    for path in paths:
        for line in open(path):
            episode = json.loads(line)
            for turn in episode["turns"]:
                moves = [a.strip() for a in turn.get("actions", [])[:max(turn.get("executed", 0), 0)]]
                target = toward(episode["env"], turn["obs"])
                if moves and target:
                    rows.append(({m.lower() for m in target}, moves[0]))
    return rows


def agreement(rows: list[tuple[set[str], str]]) -> float:
    return sum(move.lower() in target for target, move in rows) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="trajectories/step-N.jsonl files")
    args = ap.parse_args()
    rows = turns(args.paths)
    if not rows:
        raise SystemExit("no turn with a hint sentence or coordinates and an executed move in these files")
    rnd = random.Random(0)
    moves = [move for _, move in rows]
    shuffled = []
    for _ in range(200):
        rnd.shuffle(moves)
        shuffled.append(agreement([(target, m) for (target, _), m in zip(rows, moves)]))
    agree = agreement(rows)
    print(json.dumps({"turns": len(rows), "agree": round(agree, 3), "shuffled": round(sum(shuffled) / len(shuffled), 3),
                      "state_dependent": round(agree - sum(shuffled) / len(shuffled), 3)}))


if __name__ == "__main__":
    main()
