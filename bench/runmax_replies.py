"""What a policy's replies on the `runmax` env are: right, an echo of the card, a repeat of its own
previous answer, or something else, for each later turn split by whether the card was a record.
Reads the trajectories `ragen eval` writes (eval trajectories/step-*.jsonl) and deals each seed
again through the env, so the cards come from the env itself, not from the text.

    .venv/bin/python bench/runmax_replies.py EVAL_DIR [EVAL_DIR ...] [--turns 2] [--twins]

A policy that compares the card with what it remembers is right on record and non-record cards
alike; one that echoes is right on records only, one that repeats on non-records only, and a
template shows as one half near 1 and the other near 0 (MULTITURN.md, the probe's stop rule).
Markdown on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runmax_shortcuts import deals, numbers  # noqa: E402  (bench/ is not a package)


def records(path: Path) -> list[dict]:
    """Every trajectory record under an eval directory (or one .jsonl file)."""
    files = [path] if path.is_file() else sorted(path.rglob("trajectories/*.jsonl"))
    if not files:
        raise SystemExit(f"{path}: no trajectories/*.jsonl under it (the --out of `ragen eval`)")
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def first(reply: str) -> int | None:
    nums = numbers(reply.replace("-", " "))
    return nums[0] if nums else None


def classify(env, rec: dict) -> list[tuple[int, bool, str]]:
    """(turn, card is a record, kind) for each later turn of one episode: kind is right, echo,
    repeat or other (a right reply that is also an echo or a repeat counts as right)."""
    cards = deals(env, [int(rec["seed"])])[0]
    replies = [first(t.get("reply") or "") for t in rec["turns"]]
    out = []
    for t in range(2, len(replies) + 1):
        card, target = cards[t], max(cards[: t + 1])
        got, prev = replies[t - 1], replies[t - 2]
        kind = ("right" if got == target else "echo" if got == card
                else "repeat" if got is not None and got == prev else "other")
        out.append((t, card == target, kind))
    return out


def table(env, recs: list[dict]) -> str:
    rows = {}
    for rec in recs:
        for t, record, kind in classify(env, rec):
            rows.setdefault((t, record), []).append(kind)
    lines = ["| turn | card | n | right | echo | repeat | other |", "|---|---|---|---|---|---|---|"]
    for (t, record), kinds in sorted(rows.items()):
        n = len(kinds)
        share = [f"{kinds.count(k) / n:.2f}" for k in ("right", "echo", "repeat", "other")]
        lines.append(f"| {t} | {'record' if record else 'not a record'} | {n} | " + " | ".join(share) + " |")
    turn1 = sum(bool(rec["turns"] and rec["turns"][0].get("reward", 0) > 0) for rec in recs) / len(recs)
    success = sum(bool(rec.get("success")) for rec in recs) / len(recs)
    return "\n".join(lines) + f"\n\n{len(recs)} episodes: turn 1 right {turn1:.3f}, success {success:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("evals", nargs="+", type=Path)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--twins", action="store_true", help="the episodes were dealt as twins (validation)")
    args = ap.parse_args(argv)
    from ragen_cli.envs.registry import make_env

    env = make_env("runmax", {"turns": args.turns, "twins": args.twins})
    for path in args.evals:
        print(f"### {path}\n\n{table(env, records(path))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
