"""Figures and a table for docs/echo-trap.md: vanilla StarPO against StarPO-S, from the corpus
copies of the runs (the main batch of data/health_corpus/), so anyone can redraw them without retraining.

    .venv/bin/python bench/echo_trap.py --env bandit --out docs/figures/echo-trap-bandit.png

Runs are picked by name: `{env}-s-seed*` (StarPO-S) and `{env}-starpo-seed*` (vanilla StarPO);
`--runs NAME [NAME ...]` draws the named corpus runs instead, one colour each:

    .venv/bin/python bench/echo_trap.py --env bandit --out docs/figures/echo-trap-bandit-lr.png \
        --runs bandit-s-seed2 bandit-s-lr5e4-seed2 bandit-s-lr1e3-seed2 bandit-s-lr15e4-seed2 bandit-s-lr2e3-seed2
Four panels per step: validation success on the training env, in-group std of the task
reward, policy entropy and I(X;Z)/H(X); each run's first warning (triangle) and first collapse
(cross) from replaying the detector with the current defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import corpus  # noqa: E402  (bench/corpus.py, the loader)

PANELS = [("val/{env}/success", "validation success"), ("reward/task_in_group_std", "in-group std (task reward)"),
          ("actor/entropy", "entropy (nats)"), ("collapse/mi_norm", "I(X;Z) / H(X)")]
VARIANTS = [("s", "StarPO-S", "tab:blue"), ("starpo", "StarPO (no filter)", "tab:red")]


def load(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ragen_cli.monitor.replay import replay
    from ragen_cli.spec.health_spec import HealthSpec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="bandit")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", nargs="+", help="corpus run names to draw, one colour each (default: the two arms)")
    args = ap.parse_args(argv)
    runs = corpus.folder("main") / "runs"
    groups = [([runs / name], name, f"C{k}") for k, name in enumerate(args.runs)] if args.runs else \
        [(sorted(runs.glob(f"{args.env}-{tag}-seed*")), label, color) for tag, label, color in VARIANTS]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.4))
    print("| run | steps | validation success (step: value) | first warning | first collapse |")
    print("|---|---|---|---|---|")
    for runs, label, color in groups:
        for k, run in enumerate(runs):
            recs = load(run)
            t = replay(run, HealthSpec())
            warn, coll = (v.step if v else None for v in (t.first_warning(), t.first_collapse()))
            val = [(r["step"], r[f"val/{args.env}/success"]) for r in recs if f"val/{args.env}/success" in r]
            curve = ", ".join(f"{s}: {v:.2f}" for s, v in val)
            print(f"| {run.name} | {recs[-1]['step']} | {curve} | {'-' if warn is None else warn} | "
                  f"{'-' if coll is None else coll} |")
            for ax, (key, title) in zip(axes, PANELS):
                name = key.format(env=args.env)
                pts = [(r["step"], r[name]) for r in recs if isinstance(r.get(name), (int, float))]
                if not pts:
                    continue
                xs, ys = zip(*pts)
                ax.plot(xs, ys, color=color, alpha=0.75, lw=1.3, label=label if k == 0 else None,
                        marker="o" if name.startswith("val/") else None, ms=3)
                for step, marker in ((warn, "^"), (coll, "x")):
                    if step is not None:
                        y = next((v for s, v in pts if s >= step), pts[-1][1])
                        ax.plot([step], [y], marker=marker, color=color, ms=8, mew=2, ls="none")
                ax.set_title(title, fontsize=10)
                ax.set_xlabel("step")
    axes[0].legend(fontsize=8, loc="best")
    what = "the runs named" if args.runs else "StarPO vs StarPO-S"
    fig.suptitle(f"{args.env}: {what} (triangle: first warning, cross: first collapse)", fontsize=11)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
