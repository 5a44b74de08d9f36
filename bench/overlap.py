"""Rollouts that overlap the update (`rollout.max_staleness`): k = 0 against k = 1, paired seeds,
one sitting, every run alone on the whole machine (no lanes: the overlap is about sharing it).

    .venv/bin/python bench/overlap.py run --spec specs/bandit.yaml --seeds 8101-8102 --ks 0,1 \\
        --out /tmp/overlap-bandit [--set KEY=VALUE ...]
    .venv/bin/python bench/overlap.py report --out /tmp/overlap-bandit [--markdown]

`run` starts, seed by seed, `ragen train SPEC --set train.seed=S --set rollout.max_staleness=K`
for each K (bench/seed_sweep.py `start_run`, into OUT/k<K>/). `report` prints, per run: steps per
minute over the steps after the first (the engine's start-up and step 1's own rollout excluded),
the mean seconds of each phase (rollout, scoring + update, sync, the whole step) and with k = 1
the seconds the engine and the trainer worked at once (`timing/overlap_s`) and the trainer waited
for the engine (`timing/ahead_wait_s`), the first step and the seconds from the command to
validation >= 0.9, and the label (bench/health_corpus.py); then per k the medians, and the
ratio of k = 1's steps per minute to k = 0's on each seed.

    .venv/bin/python bench/overlap.py bound --alone /tmp/overlap-bandit/k0 --one-core DIR [--k1 DIR]

`bound`: the most any overlap can give on a machine whose cores the engine and the trainer share
(`best_shared`): from runs alone on the whole machine (`--alone`, k = 0) and runs given one core
each (`--one-core`: bench/seed_sweep.py `--cores`/`--lanes`), each phase's seconds on one core
and on both; prints the sequential step, the shortest step any schedule of the two phases could
reach, their ratio, and with `--k1` the ratio measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

PHASES = ("timing/rollout_s", "timing/old_scores_s", "timing/update_s", "timing/sync_s", "timing/parity_s",
          "timing/overlap_s", "timing/ahead_wait_s", "timing/step_s")


def run(args) -> None:
    from seed_sweep import parse_seeds, run_name, start_run

    spec = Path(args.spec)
    for seed in parse_seeds(args.seeds):
        for k in (int(x) for x in args.ks.split(",")):
            out = Path(args.out) / f"k{k}"
            out.mkdir(parents=True, exist_ok=True)
            if (out / f"{run_name(spec, seed, args.precision)}.run.json").exists():
                continue  # a rerun resumes the bench
            start_run(spec, seed, args.precision, out, args.set + [f"rollout.max_staleness={k}"], None)


def best_shared(r1: float, r2: float, t1: float, t2: float) -> float:
    """Shortest wall time in which two jobs that share two cores can both finish: the engine's
    rollout (r1 seconds on one core, r2 on both) and the trainer's part (t1, t2), when each runs at
    any moment on one core beside the other or alone on both, and no core idles while work is left.
    Running side by side for x seconds, then the rest of each alone on both cores, takes
    x + r2 (1 - x/r1) + t2 (1 - x/t1): linear in x, so the best x is 0 (one after the other: r2 + t2)
    or min(r1, t1) (until the shorter job ends). Side by side wins when r2/r1 + t2/t1 > 1, that is
    when the second core speeds the two jobs up by less than 2x between them."""
    x = min(r1, t1)
    return min(r2 + t2, x + r2 * (1 - x / r1) + t2 * (1 - x / t1))


def phase_means(runs: list[dict]) -> dict[str, float]:
    """The mean over runs of each phase's mean seconds (`summary`): rollout, trainer (old scores +
    update) and step."""
    trainer = [r.get("timing/old_scores_s", 0.0) + r["timing/update_s"] for r in runs]
    return {"rollout": statistics.mean(r["timing/rollout_s"] for r in runs), "trainer": statistics.mean(trainer),
            "step": statistics.mean(r["timing/step_s"] for r in runs)}


def runs_in(folder: Path) -> list[dict]:
    """`summary` of every finished run in a folder of `seed_sweep.py run` or `overlap.py run` runs."""
    return [summary(folder, json.loads(p.read_text())) for p in sorted(folder.glob("*.run.json"))]


def some_runs_in(folder: Path) -> list[dict]:
    runs = runs_in(folder)
    if not runs:
        raise SystemExit(f"bench/overlap.py bound: no runs in {folder} (a folder of `seed_sweep.py run` or "
                         "`overlap.py run` runs: NAME.run.json beside NAME/metrics.jsonl)")
    return runs


def bound(args) -> None:
    two, one = phase_means(some_runs_in(Path(args.alone))), phase_means(some_runs_in(Path(args.one_core)))
    rest = two["step"] - two["rollout"] - two["trainer"]
    best = rest + best_shared(one["rollout"], two["rollout"], one["trainer"], two["trainer"])
    out = {"rollout_1core": one["rollout"], "rollout_2core": two["rollout"], "trainer_1core": one["trainer"],
           "trainer_2core": two["trainer"], "rest": rest, "sequential_step": two["step"], "best_shared_step": best,
           "max_speedup": two["step"] / best}
    if args.k1:
        out["measured_speedup"] = two["step"] / phase_means(some_runs_in(Path(args.k1)))["step"]
    print(json.dumps({k: round(v, 3) for k, v in out.items()}))


def steps_per_minute(rows: list[dict]) -> float | None:
    """Steps per minute between the first and the last step's records (start-up excluded)."""
    steps = [(r["step"], r["time"]) for r in rows if r.get("step", 0) > 0 and "timing/step_s" in r]
    if len(steps) < 2:
        return None
    (s0, t0), (s1, t1) = steps[0], steps[-1]
    return 60.0 * (s1 - s0) / (t1 - t0)


def summary(out: Path, record: dict) -> dict:
    from health_corpus import _jsonl
    from seed_sweep import outcome

    every = _jsonl(out / record["name"] / "metrics.jsonl")
    validated = any(k.startswith("val/") for r in every if r.get("step", 0) > 0 for k in r)
    got = outcome(out, record) if validated else {"label": None, "last_step": every[-1]["step"] if every else 0,
                                                   "step_to_target": None, "s_to_target": None}
    rows = [r for r in every if r.get("step", 0) > 1]
    means = {p: statistics.mean(r[p] for r in rows if p in r) for p in PHASES if any(p in r for r in rows)}
    return {"seed": record["seed"], "label": got["label"], "last_step": got["last_step"],
            "step_to_target": got["step_to_target"], "s_to_target": got["s_to_target"],
            "steps_per_min": steps_per_minute(every), **means}


def report(args) -> None:
    root = Path(args.out)
    by_k: dict[int, dict[int, dict]] = {}
    for kdir in sorted(root.glob("k*")):
        for s in runs_in(kdir):
            by_k.setdefault(int(kdir.name[1:]), {})[s["seed"]] = s
    cols = ["seed", "label", "last_step", "steps_per_min", "step_to_target", "s_to_target"] + [p.split("/")[1] for p in PHASES]
    if args.markdown:
        print("| k | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for k, runs in sorted(by_k.items()):
        for seed, s in sorted(runs.items()):
            cells = [s.get(c if c in s else f"timing/{c}") for c in cols]
            text = ["-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v) for v in cells]
            print(("| " if args.markdown else "") + f"{k} | " + " | ".join(text) + (" |" if args.markdown else ""))
    for k, runs in sorted(by_k.items()):
        spm = [s["steps_per_min"] for s in runs.values() if s["steps_per_min"]]
        to = [s["s_to_target"] for s in runs.values() if s["s_to_target"] is not None]
        print(json.dumps({"k": k, "runs": len(runs), "median_steps_per_min": statistics.median(spm) if spm else None,
                          "median_s_to_target": statistics.median(to) if to else None,
                          "reached_target": len(to)}))
    if 0 in by_k and 1 in by_k:
        pairs = [(by_k[1][s]["steps_per_min"], by_k[0][s]["steps_per_min"]) for s in by_k[0] if s in by_k[1]]
        ratios = [a / b for a, b in pairs if a and b]
        print(json.dumps({"k1_over_k0_steps_per_min": [round(r, 3) for r in ratios]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--spec", required=True)
    r.add_argument("--seeds", required=True)
    r.add_argument("--ks", default="0,1")
    r.add_argument("--precision", default="auto")
    r.add_argument("--out", required=True)
    r.add_argument("--set", action="append", default=[])
    p = sub.add_parser("report")
    p.add_argument("--out", required=True)
    p.add_argument("--markdown", action="store_true")
    b = sub.add_parser("bound")
    b.add_argument("--alone", required=True, help="k = 0 runs alone on the whole machine")
    b.add_argument("--one-core", required=True, help="runs of the same spec on one core each (seed_sweep --cores)")
    b.add_argument("--k1", default="", help="k = 1 runs alone on the whole machine (the measured ratio)")
    args = ap.parse_args()
    {"run": run, "report": report, "bound": bound}[args.cmd](args)


if __name__ == "__main__":
    main()
