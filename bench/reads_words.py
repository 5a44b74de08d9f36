"""Does a policy read the state? Agreement of its moves with the env's `move_hint` sentence,
against the same moves shuffled across turns.

    .venv/bin/python bench/reads_words.py RUN/eval/trajectories/step-0.jsonl [more.jsonl ...]

Reads episodes saved by `ragen eval` or `ragen train` (trajectories/step-N.jsonl) from an env
with `move_hint: true` (FrozenLake or Sokoban; until 2026-11-25 named `describe`). For every turn whose observation ends with the
sentence and whose reply executed at least one move, it checks whether the first move is one
the sentence names first-hand: FrozenLake, a direction toward the goal; Sokoban, a direction
toward the box (`bench/random_policy.py:words_turn`). "agree" is the fraction of such turns.
"shuffled" is the same fraction after pairing each turn's first move with another turn's
sentence (the mean over 200 random pairings): what a policy with the same move frequencies
that ignores the state scores, so a template such as `Down` every turn scores the same on both.
agree - shuffled is the part of the agreement that depends on the state.
"""

from __future__ import annotations

import argparse
import json
import random

from random_policy import named_moves, words_turn


def turns(paths: list[str]) -> list[tuple[str, str]]:
    """(move_hint sentence, first executed move) of every turn that has both."""
    rows = []
    for path in paths:
        for line in open(path):
            episode = json.loads(line)
            for turn in episode["turns"]:
                moves = [a.strip() for a in turn.get("actions", [])[:max(turn.get("executed", 0), 0)]]
                sentence = turn["obs"].splitlines()[-1]
                if moves and words_turn(episode["env"], sentence):
                    rows.append((episode["env"], sentence, moves[0]))
    return rows


def toward(env_name: str, sentence: str) -> set[str]:
    """The directions the sentence names first-hand (toward the goal / toward the box)."""
    if env_name == "frozenlake":
        return set(named_moves(sentence.split(" of you.")[0]))
    return set(named_moves(sentence.split(" of you;")[0]))


def agreement(rows: list[tuple[str, str, str]]) -> float:
    return sum(move.lower() in {m.lower() for m in toward(env, s)} for env, s, move in rows) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="trajectories/step-N.jsonl files")
    args = ap.parse_args()
    rows = turns(args.paths)
    if not rows:
        raise SystemExit("no turn with a move_hint sentence and an executed move in these files")
    rnd = random.Random(0)
    moves = [move for _, _, move in rows]
    shuffled = []
    for _ in range(200):
        rnd.shuffle(moves)
        shuffled.append(agreement([(env, s, m) for (env, s, _), m in zip(rows, moves)]))
    agree = agreement(rows)
    print(json.dumps({"turns": len(rows), "agree": round(agree, 3), "shuffled": round(sum(shuffled) / len(shuffled), 3),
                      "state_dependent": round(agree - sum(shuffled) / len(shuffled), 3)}))


if __name__ == "__main__":
    main()
