"""Cost of the template-collapse metrics against the step they run in, measured in one real run.

    .venv/bin/python bench/collapse_cost.py                           # specs/bandit.yaml, 6 steps
    .venv/bin/python bench/collapse_cost.py --spec specs/frozenlake.yaml --steps 4 --set monitor.collapse.replies=32

Runs `ragen train SPEC` for `--steps` steps with validation off and the metrics computed every
step (`monitor.collapse.every=1`, other monitor.collapse fields as the spec or --set say), then
reads `timing/collapse_s` and `timing/step_s` from its metrics.jsonl. Prints the median of each
over the steps after the first (start-up), their ratio, and the share of a step they take at
the spec's own `every` (ratio / every). One JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from base_model import SPECS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="bandit", help="shipped spec name or a spec file")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--set", action="append", default=[], dest="sets")
    args = ap.parse_args(argv)
    spec = Path(args.spec) if args.spec.endswith((".yaml", ".yml")) else SPECS / f"{args.spec}.yaml"
    ragen = Path(sys.executable).parent / "ragen"
    with tempfile.TemporaryDirectory() as out:
        sets = [f"train.steps={args.steps}", "env.val.every=0", "checkpoint.every=0", f"output.dir={out}",
                "name=cost", "monitor.collapse.every=1", *args.sets]
        cmd = [str(ragen), "train", str(spec)] + [x for s in sets for x in ("--set", s)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        recs = [json.loads(line) for line in (Path(out) / "cost" / "metrics.jsonl").read_text().splitlines()]
    from ragen_cli.spec.loader import load_spec

    every = load_spec(spec).monitor.collapse.every or 1
    rows = [r for r in recs if r.get("step", 0) >= 2 and "timing/collapse_s" in r]
    cost = statistics.median(r["timing/collapse_s"] for r in rows)
    step = statistics.median(r["timing/step_s"] for r in rows)
    print(json.dumps({"spec": str(spec), "steps_measured": len(rows), "collapse_s": round(cost, 2),
                      "step_s": round(step, 2), "share_every_step": round(cost / step, 3),
                      "default_every": every, "share_at_default_every": round(cost / step / every, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
