"""The `larger` dataset task (specs/larger.yaml): which of two numbers is larger.

    .venv/bin/python bench/make_larger.py      # writes specs/data/larger/{train,val}.jsonl

Each row: `prompt` ("Which number is larger: 47 or 83? Reply with that number only."),
`answer` (the larger), `first` and `second` (the two numbers in prompt order). The larger number
comes first in exactly half the rows of each file, so every policy that does not read the
numbers (always the first, always the second, any fixed number) scores at most about half; the
two files share no pair. Numbers are two-digit (10-99) and distinct.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "specs" / "data" / "larger"


def rows(pairs: list[tuple[int, int]], rng: random.Random) -> list[dict]:
    out = []
    for i, (a, b) in enumerate(pairs):
        hi, lo = max(a, b), min(a, b)
        first, second = (hi, lo) if i % 2 == 0 else (lo, hi)  # larger first in exactly half
        out.append({"prompt": f"Which number is larger: {first} or {second}? Reply with that number only.",
                    "answer": str(hi), "first": str(first), "second": str(second)})
    rng.shuffle(out)
    return out


def main(n_train: int = 2000, n_val: int = 256, seed: int = 0) -> int:
    rng = random.Random(seed)
    pairs = sorted({tuple(sorted(rng.sample(range(10, 100), 2))) for _ in range(4 * (n_train + n_val))})
    rng.shuffle(pairs)
    if len(pairs) < n_train + n_val:
        raise SystemExit("not enough distinct pairs")
    OUT.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", pairs[:n_train]), ("val", pairs[n_train:n_train + n_val])):
        with (OUT / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for row in rows(part, rng):
                f.write(json.dumps(row) + "\n")
        print(f"wrote {OUT / f'{name}.jsonl'} ({len(part)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
