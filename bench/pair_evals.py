"""Pair two `ragen eval` outputs made separately (`--out A`, `--out B`, the same spec, seeds and
sampling) and compare them as `ragen eval --compare` does: success with Wilson 95% intervals,
the episodes only one side solved, the exact McNemar p, and the paired score difference.

    .venv/bin/python bench/pair_evals.py /tmp/e-a-val /tmp/e-b-val /tmp/e-a-test /tmp/e-b-test

Arguments come in pairs (A then B); with several pairs, their paired episodes are also pooled.
Use it where the two policies cannot share one eval process (docs/experiments/webshop.md: a
second vLLM engine failed to start in one `--compare` process there, and `--compare` fell back
to HF generate).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ragen_cli.eval.report import paired
from ragen_cli.monitor.stats import compare_paired, mean_interval, wilson_interval


def records(out: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((out / "trajectories").glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


def report(name: str, pairs: list[tuple[list[dict], list[dict]]]) -> dict:
    """The comparison of the episodes of every (A, B) pair, each pair matched on (seed, sample)."""
    flags_a, flags_b, diffs = [], [], []
    for a, b in pairs:
        fa, fb = paired(a, b, "success")
        flags_a += fa
        flags_b += fb
        if all(r.get("task_reward") is not None for r in (*a, *b)):
            sa, sb = paired(a, b, "task_reward", float)
            diffs += [y - x for x, y in zip(sa, sb)]
    c = compare_paired(flags_a, flags_b)
    return {
        "pair": name, "episodes": c.n,
        "A": round(c.rate_a, 4), "A_ci": [round(x, 4) for x in wilson_interval(sum(flags_a), c.n)],
        "B": round(c.rate_b, 4), "B_ci": [round(x, 4) for x in wilson_interval(sum(flags_b), c.n)],
        "A_only": c.a_only, "B_only": c.b_only, "mcnemar_p": c.p_value,
        "score_diff": [round(x, 4) for x in mean_interval(diffs)] if len(diffs) == c.n else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outs", nargs="+", type=Path, help="eval output directories: A1 B1 [A2 B2 ...]")
    args = p.parse_args()
    if len(args.outs) % 2:
        p.error("give the output directories in pairs: A then B")
    pairs = [(out_a, out_b) for out_a, out_b in zip(args.outs[::2], args.outs[1::2])]
    loaded = [(records(a), records(b)) for a, b in pairs]
    for (out_a, out_b), both in zip(pairs, loaded):
        print(json.dumps(report(f"{out_a.name} vs {out_b.name}", [both])))
    if len(pairs) > 1:
        print(json.dumps(report("pooled", loaded)))


if __name__ == "__main__":
    main()
