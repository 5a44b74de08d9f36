"""What each policy that does not keep the running maximum scores on the `runmax` env
(envs/runmax.py), played through the env itself on fixed seeds. Markdown tables on stdout.

    .venv/bin/python bench/runmax_shortcuts.py [--turns 3 --val-seed 123 --val-episodes 200 --random 10000]

Seed sets: the validation seeds val-seed .. val-seed + val-episodes - 1, the same seeds dealt as
twins (`twins: true`), and `--random` seeds sampled from 10^6 .. 2^31 (Random(0)). Policies
(turn 1 of the fitted ones answers the larger number, the task specs/larger.yaml already taught):

- echo: the card shown (turn 1: the first, or the second, of the two numbers);
- repeat: its own previous answer (turn 1: the larger number);
- best memoryless: turns 2-3 answer a function of the observation alone (the card; the text of
  turns 2 and 3 is the same), the answer most often right for that card;
- best fixed number: one number every turn;
- memory without comparison: echo the card when it is >= a threshold, else repeat its own
  previous answer;
- thresholds on both: echo the card when (card >= a) and (previous answer < b), or the same
  with "or"; each number is compared with a constant, never with the other (on twins the strongest
  rule scored here that does not compare the two: `repeat when the previous answer >= b`
  beats the card threshold, because twins share the card and differ in the previous answer).
  Fitted by all-turns success;
- optimum: the running maximum.
The four fitted policies are chosen on a separate fit set (`--random` more seeds from the same
sampler, disjoint) and then played on each scored set; a second table gives the in-sample best
(chosen on the scored seeds themselves: an upper bound for that rule family).
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import sys
from typing import Callable

import numpy as np

Policy = Callable[[int, list[int], "int | None"], int]  # (turn, numbers in the observation, previous answer) -> reply


def numbers(obs: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", obs)]


def play(env, seeds, policy: Policy) -> dict[str, float]:
    """Per-turn accuracy and all-turns success of `policy` on `seeds`, scored by the env."""
    turns = env.config.turns
    right = [0.0] * turns
    success = 0
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        prev = None
        for t in range(1, turns + 1):
            prev = policy(t, numbers(obs), prev)
            obs, reward, _, _, info = env.step(str(prev))
            right[t - 1] += reward
        success += info["success"]
    n = len(seeds)
    out = {f"turn {t}": right[t - 1] / n for t in range(1, turns + 1)}
    out[later(turns)] = sum(right[1:]) / (n * (turns - 1))
    out[f"all {turns}"] = success / n
    return out


def later(turns: int) -> str:
    """The column of the later turns' accuracy: "turns 2-3", or "turn 2" alone for 2 turns."""
    return "turn 2" if turns == 2 else f"turns 2-{turns}"


def optimum(t, nums, prev):
    return max(nums) if t == 1 else max(prev, nums[0])


def deals(env, seeds) -> list[list[int]]:
    """The cards of each seed in the order shown, read from the observations while the optimum plays."""
    out = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        cards, prev = [], None
        for t in range(1, env.config.turns + 1):
            cards += numbers(obs)
            prev = optimum(t, numbers(obs), prev)
            obs = env.step(str(prev))[0]
        out.append(cards)
    return out


# ------------------------------------------------------- rules fitted on deals (offline, exact)
def later_targets(cards):
    """(card, running max) of turns 2.. of one deal: the observation and its right answer."""
    return [(cards[t], max(cards[: t + 1])) for t in range(2, len(cards))]


def fit_memoryless(all_cards) -> dict[int, int]:
    """card -> the answer most often right when that card is shown (ties: the card itself, then the smallest)."""
    counts: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for cards in all_cards:
        for card, target in later_targets(cards):
            counts[card][target] += 1
    return {card: max(c, key=lambda a: (c[a], a == card, -a)) for card, c in counts.items()}


def fit_fixed(all_cards) -> int:
    """The number most often right on turns 2.. (ties: the smallest)."""
    c = collections.Counter(target for cards in all_cards for _, target in later_targets(cards))
    return max(c, key=lambda a: (c[a], -a))


def threshold_policy(theta: int) -> Policy:
    return lambda t, nums, prev: max(nums) if t == 1 else (nums[0] if nums[0] >= theta else prev)


def offline_turns23(all_cards, policy: Policy) -> float:
    """Turns 2.. accuracy of `policy` on the deals, replies scored as the env scores them."""
    right = total = 0
    for cards in all_cards:
        prev = None
        for t in range(1, len(cards)):
            prev = policy(t, cards[:2] if t == 1 else [cards[t]], prev)
            if t > 1:
                right += prev == max(cards[: t + 1])
                total += 1
    return right / total


def fit_threshold(all_cards) -> int:
    """The threshold (echo at or above it, else repeat) with the best turns 2.. accuracy (ties: the smallest)."""
    cards_seen = sorted({c for cards in all_cards for c in cards[2:]})
    grid = range(cards_seen[0], cards_seen[-1] + 2)
    return max(grid, key=lambda th: (offline_turns23(all_cards, threshold_policy(th)), -th))


def both_policy(a: int, b: int, join: str) -> Policy:
    """Echo the card when (card >= a) `join` (previous answer < b), else repeat (turn 1: the larger)."""
    def policy(t, nums, prev):
        if t == 1:
            return max(nums)
        echo = (nums[0] >= a) and (prev < b) if join == "and" else (nums[0] >= a) or (prev < b)
        return nums[0] if echo else prev
    return policy


def both_success(all_cards, a: np.ndarray, b: np.ndarray, join: str) -> np.ndarray:
    """All-turns success of `both_policy(a, b, join)` for every (a, b) of the grids at once
    (turn 1 right: the larger number), shape (len(a), len(b))."""
    cards = np.asarray(all_cards)                         # (episodes, turns + 1)
    A, B = a[:, None, None], b[None, :, None]
    prev = np.broadcast_to(cards[:, :2].max(1), (len(a), len(b), len(cards)))
    ok = np.ones(prev.shape, bool)
    for t in range(2, cards.shape[1]):
        card, target = cards[:, t], cards[:, : t + 1].max(1)
        echo = (card >= A) & (prev < B) if join == "and" else (card >= A) | (prev < B)
        prev = np.where(echo, card, prev)
        ok &= prev == target
    return ok.mean(-1)


def fit_both(all_cards) -> tuple[int, int, str]:
    """The (a, b, join) of `both_policy` with the best all-turns success (ties: the first found)."""
    seen = np.unique(np.asarray(all_cards))
    grid = np.arange(seen[0], seen[-1] + 2)
    best = max(((float(s), int(grid[i]), int(grid[j]), join)
                for join in ("and", "or")
                for (i, j), s in np.ndenumerate(both_success(all_cards, grid, grid, join))),
               key=lambda r: r[0])
    return best[1], best[2], best[3]


def policies(fit_cards) -> dict[str, Policy]:
    table, fixed, theta = fit_memoryless(fit_cards), fit_fixed(fit_cards), fit_threshold(fit_cards)
    a, b, join = fit_both(fit_cards)
    return {
        "echo the card (turn 1: first number)": lambda t, nums, prev: nums[0],
        "echo the card (turn 1: second number)": lambda t, nums, prev: nums[-1],
        "repeat own previous answer (turn 1: larger)": lambda t, nums, prev: max(nums) if t == 1 else prev,
        "best memoryless (turn 1: larger)": lambda t, nums, prev: max(nums) if t == 1 else table.get(nums[0], nums[0]),
        f"best fixed number ({fixed})": lambda t, nums, prev: fixed,
        f"memory without comparison (echo if card >= {theta}, else repeat)": threshold_policy(theta),
        f"thresholds on both (echo if card >= {a} {join} previous < {b}, else repeat)": both_policy(a, b, join),
        "optimum (running maximum)": optimum,
    }


def in_sample(all_cards) -> dict[str, str]:
    """Later-turn accuracy of each fitted rule family when chosen on the scored deals themselves
    (all-turns success for thresholds on both)."""
    table, fixed, theta = fit_memoryless(all_cards), fit_fixed(all_cards), fit_threshold(all_cards)
    a, b, join = fit_both(all_cards)
    both = float(both_success(all_cards, np.array([a]), np.array([b]), join)[0, 0])
    memoryless = lambda t, nums, prev: max(nums) if t == 1 else table[nums[0]]  # noqa: E731
    return {"best memoryless": f"{offline_turns23(all_cards, memoryless):.3f}",
            "best fixed number": f"{offline_turns23(all_cards, lambda t, n, p: fixed):.3f} ({fixed})",
            "memory without comparison": f"{offline_turns23(all_cards, threshold_policy(theta)):.3f} (>= {theta})",
            "thresholds on both (success)": f"{both:.3f} (card >= {a} {join} previous < {b})"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=3, choices=(2, 3), help="the env's turns (specs/runmax.yaml: 3, specs/memory.yaml: 2)")
    ap.add_argument("--val-seed", type=int, default=123)
    ap.add_argument("--val-episodes", type=int, default=200)
    ap.add_argument("--random", type=int, default=10000, help="random seeds scored (and as many more to fit on)")
    args = ap.parse_args(argv)
    from ragen_cli.envs.registry import make_env

    env, twins = make_env("runmax", {"turns": args.turns}), make_env("runmax", {"turns": args.turns, "twins": True})
    drawn = random.Random(0).sample(range(10**6, 2**31), 2 * args.random)
    val = list(range(args.val_seed, args.val_seed + args.val_episodes))
    sets = [(f"validation seeds {val[0]}..{val[-1]}", env, val),
            ("the same seeds as twins", twins, val),
            (f"{args.random} random seeds", env, drawn[: args.random])]
    fit = deals(env, drawn[args.random:])
    cols = [f"turn {t}" for t in range(1, args.turns + 1)] + [later(args.turns), f"all {args.turns}"]
    cols = list(dict.fromkeys(cols))  # 2 turns: "turn 2" once
    print(("    .venv/bin/python bench/runmax_shortcuts.py " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip())
    print(f"\nFitted rules chosen on {len(fit)} other random seeds (Random(0) sample from 10^6..2^31).")
    for title, e, seeds in sets:
        print(f"\n### {title}\n\n| policy | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
        for name, policy in policies(fit).items():
            row = play(e, seeds, policy)
            print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    print(f"\n### In-sample upper bounds (rule chosen on the scored seeds; {later(args.turns)} accuracy, and all-turns success for the last)\n")
    print("| seeds | best memoryless | best fixed number | memory without comparison | thresholds on both (success) |\n|---|---|---|---|---|")
    for title, e, seeds in sets:
        print(f"| {title} | " + " | ".join(in_sample(deals(e, seeds)).values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
