"""How close the dry run's time estimate comes to a measured run, on this machine.

    .venv/bin/python bench/estimate_check.py specs/bandit.yaml
    .venv/bin/python bench/estimate_check.py --template dataset          # `ragen init --template dataset`'s spec
    .venv/bin/python bench/estimate_check.py specs/bandit.yaml --set train.steps=10

For each spec: the estimate `ragen train SPEC --dry-run` prints (compile/render.py's
`plan_estimate`, the same function), then the run itself (`ragen train SPEC`, run from the spec's
folder as its first line says, into a temporary output dir), timed from launch to exit. The
measured step is the mean of the run's `timing/step_s` (every step, the first included: the
estimate is a mean step too). One JSON line per spec: est_step_s, step_s, step_ratio
(measured / estimated), est_run_s, run_s (wall), run_ratio, the machine's precision and whether
its CPU has native bf16, and the mean seconds a step of each of the run's timers (`parts_s`:
rollout, old scores, update, sync, parity probe, collapse metrics; a timer that runs every few
steps averaged over all) with the mean number of kept trajectories: what compile/estimate.py's
profile is fitted from. Run it on an idle machine: the profile was measured on one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAGEN = str(Path(sys.executable).parent / "ragen")


def estimate_for(spec: Path, sets: list[str]) -> dict:
    """The dry run's estimate and the plan's precision, through the dry run's own functions."""
    from ragen_cli.api import compile_plan, load_spec
    from ragen_cli.compile.render import plan_estimate
    from ragen_cli.device import CPU_BF16_FLAGS, cpu_flags

    with contextlib.chdir(spec.parent):  # relative paths in a spec start where it runs
        loaded = load_spec(spec, sets)
    plan = compile_plan(loaded)
    est = plan_estimate(plan, loaded)
    return {"est_step_s": est.step_s, "est_run_s": est.run_s, "basis": est.basis, "precision": plan.precision,
            "native_bf16": bool(set(CPU_BF16_FLAGS) & cpu_flags()), "steps": loaded.train.steps}


def measure(spec: Path, sets: list[str], out: Path) -> dict:
    """Run the spec from its folder; wall seconds and the mean of its steps' `timing/step_s`."""
    cmd = [RAGEN, "train", spec.name, *(x for s in [*sets, f"output.dir={out}"] for x in ("--set", s))]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=spec.parent, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    (metrics,) = out.glob("*/metrics.jsonl")  # the run dir is output.dir / the spec's name
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    steps = [r["timing/step_s"] for r in rows if "timing/step_s" in r]
    vals = [r["timing/val_s"] for r in rows if "timing/val_s" in r]
    parts = {k[len("timing/"):]: round(sum(r.get(k, 0.0) for r in rows if "timing/step_s" in r) / len(steps), 2)
             for k in sorted({k for r in rows for k in r if k.startswith("timing/")} - {"timing/step_s", "timing/val_s"})}
    kept = [r["filter/kept_frac"] * r["train/episodes"] for r in rows if "filter/kept_frac" in r]
    return {"run_s": round(wall, 1), "step_s": round(statistics.mean(steps), 2), "measured_steps": len(steps),
            "val_s": round(statistics.mean(vals), 1) if vals else None, "validations": len(vals),
            "parts_s": parts, "kept": round(statistics.mean(kept), 1) if kept else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?", type=Path, help="a run spec (or --template)")
    ap.add_argument("--template", help="a `ragen init` template, made in a temporary folder")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="a spec override, as `ragen train --set`")
    args = ap.parse_args()
    if (args.spec is None) == (args.template is None):
        ap.error("give a spec or --template, not both")
    with tempfile.TemporaryDirectory(prefix="ragen-estimate-") as tmp:
        spec = args.spec.resolve() if args.spec else None
        if args.template:
            subprocess.run([RAGEN, "init", f"{tmp}/proj", "--template", args.template], check=True,
                           stdout=subprocess.DEVNULL)
            spec = Path(tmp) / "proj" / "ragen.yaml"
        est = estimate_for(spec, args.sets)
        got = measure(spec, args.sets, Path(tmp) / "run")
    row = {"spec": args.template and f"template {args.template}" or str(args.spec), **est, **got,
           "step_ratio": round(got["step_s"] / est["est_step_s"], 3) if est["est_step_s"] else None,
           "run_ratio": round(got["run_s"] / est["est_run_s"], 3) if est["est_run_s"] else None}
    print(json.dumps(row))


if __name__ == "__main__":
    main()
