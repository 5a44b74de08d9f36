"""A run's curve as a PNG, from its metrics.jsonl: one panel per metric, per step.

    .venv/bin/python bench/run_curve.py data/webshop-window --out docs/figures/webshop-run.png
    .venv/bin/python bench/run_curve.py RUN_DIR --out curve.png --keys "val/*/success,reward/task_mean"

A key may hold one `*` (matched against the run's metric names, e.g. every validation env's
success). Default panels: validation success and reward, the train task reward, the valid-action
share and the share of groups without reward spread.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path

DEFAULT = "val/*/success,val/*/reward,reward/task_mean,episode/valid_action_ratio,filter/zero_std_frac"


def points(records: list[dict], key: str) -> dict[str, list[tuple[int, float]]]:
    """{metric name: [(step, value), ...]} for every metric matching `key`."""
    names = sorted({k for r in records for k in r if fnmatch.fnmatchcase(k, key)})
    return {n: [(r["step"], r[n]) for r in records if isinstance(r.get(n), (int, float))] for n in names}


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="run directory (with metrics.jsonl)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keys", default=DEFAULT, help="comma-separated metric names, each with at most one *")
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)
    path = args.run / "metrics.jsonl"
    if not path.is_file():
        raise SystemExit(f"no metrics.jsonl in {args.run}")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    keys = [k for k in args.keys.split(",") if k]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.2), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for name, pts in points(records, key).items():
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o", ms=3, label=name)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("step")
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(args.title or args.run.name, fontsize=11)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
