"""Paired seed sweeps: one spec, fresh seeds, each seed in every precision asked, then every
run's outcome under the project's labelling rule (bench/health_corpus.py `label`).

    .venv/bin/python bench/seed_sweep.py run --spec specs/bandit.yaml --seeds 7001-7016 \\
        --precisions bf16,fp32 --out runs/sweep-bandit [--lanes 2] [--set KEY=VALUE ...]
    .venv/bin/python bench/seed_sweep.py report --out runs/sweep-bandit [--markdown]

`run` starts `ragen train SPEC --set train.seed=S --set deepspeed.precision=P` for each pair,
seed by seed. With `--lanes 2` two runs go at once, each on its own core (taskset, one OpenMP
thread, vLLM's threads bound to that core): the two precisions of a seed run side by side on
one machine under the same load. A lane's run is slower than a run alone on both cores, so
timings from a 2-lane sweep are not the time a user sees (bench/step_profile.py measures that);
outcomes are. Each run's start and end times go to OUT/NAME.run.json, its console to OUT/NAME.log.

`report` labels each run (learns / shortcut / collapse / none, from its validation curve and
saved actions against the best non-learning policy on the same validation episodes) and prints
one line per run and one JSON summary line per precision: runs, learned, median seconds from
the command's start to the first validation at >= 0.9 among the learners.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

TARGET = 0.9


def parse_seeds(text: str) -> list[int]:
    """'7001-7004,7010' -> [7001, 7002, 7003, 7004, 7010]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def run_name(spec: Path, seed: int, precision: str) -> str:
    return f"{spec.stem}-{precision}-seed{seed}"


def start_run(spec: Path, seed: int, precision: str, out: Path, sets: list[str], lane: int | None) -> dict:
    name = run_name(spec, seed, precision)
    argv = [sys.executable, "-m", "ragen_cli.cli", "train", str(spec), "--set", f"train.seed={seed}",
            "--set", f"deepspeed.precision={precision}", "--set", f"output.dir={out}", "--set", f"name={name}"]
    for s in sets:
        argv += ["--set", s]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    if lane is not None:
        argv = ["taskset", "-c", str(lane)] + argv
        env.update(OMP_NUM_THREADS="1", VLLM_CPU_OMP_THREADS_BIND=str(lane))
    start = time.time()
    with open(out / f"{name}.log", "w") as log:
        rc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    record = {"name": name, "seed": seed, "precision": precision, "start": start, "end": time.time(), "rc": rc,
              "lane": lane, "sets": sets}
    (out / f"{name}.run.json").write_text(json.dumps(record) + "\n")
    print(json.dumps(record), flush=True)
    return record


def run(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec, precisions = Path(args.spec), args.precisions.split(",")
    jobs = [(seed, p) for seed in parse_seeds(args.seeds) for p in precisions]
    jobs = [j for j in jobs if not (out / f"{run_name(spec, *j)}.run.json").exists()]  # a rerun resumes the sweep
    if args.cores:  # one lane per core named, e.g. two sweeps side by side: --cores 0 and --cores 1
        free = [int(c) for c in args.cores.split(",")]
    elif args.lanes == 1:
        for seed, p in jobs:
            start_run(spec, seed, p, out, args.set, None)
        return
    else:
        free = list(range(args.lanes))

    def one(job):
        lane = free.pop()
        try:
            return start_run(spec, *job, out, args.set, lane)
        finally:
            free.append(lane)

    with ThreadPoolExecutor(len(free)) as pool:
        list(pool.map(one, jobs))


def outcome(out: Path, record: dict) -> dict:
    """A run's label and curve; the seconds from the command's start to validation >= TARGET."""
    from health_corpus import _jsonl, label, val_series, write_shortcut

    run_dir = out / record["name"]
    if not (run_dir / "shortcut.json").is_file():
        write_shortcut(run_dir)
    _write_actions(run_dir)
    got = label(run_dir)
    import yaml

    env = yaml.safe_load((run_dir / "spec.yaml").read_text())["env"]["train"]["name"]
    rows = _jsonl(run_dir / "metrics.jsonl")
    curve = val_series(rows, env)
    times = {r["step"]: r["time"] for r in rows if f"val/{env}/success" in r}
    first = next((s for s, v in curve if v >= TARGET), None)
    stopped = [e for e in _jsonl(run_dir / "events.jsonl") if e.get("kind") == "end"]
    kept = [r["sync/update_kept"] for r in rows if "sync/update_kept" in r]
    err = [r["sync/update_error"] for r in rows if "sync/update_error" in r]
    return {**record, "label": got["label"], "v0": got["v0"], "best": got["best"], "final": got["final"],
            "shortcut": got["shortcut"], "curve": curve, "last_step": rows[-1]["step"] if rows else 0,
            "stopped": bool(stopped and stopped[-1].get("stopped")),
            "step_to_target": first, "s_to_target": None if first is None else times[first] - record["start"],
            "syncs": len(kept), "min_update_kept": min(kept, default=None), "max_update_error": max(err, default=None)}


def _write_actions(run_dir: Path) -> None:
    """actions.jsonl (the labelling rule's saved first actions per step), as
    bench/health_corpus.py collects it, from the run's trajectories."""
    from health_corpus import actions_record

    path = run_dir / "actions.jsonl"
    if not path.is_file():
        recs = [actions_record(f) for f in sorted((run_dir / "trajectories").glob("step-*.jsonl"),
                                                  key=lambda p: int(p.stem.split("-")[1]))]
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def report(args) -> None:
    out = Path(args.out)
    rows = [outcome(out, json.loads(p.read_text())) for p in sorted(out.glob("*.run.json"))]
    rows.sort(key=lambda r: (r["seed"], r["precision"]))
    for r in rows:
        curve = " ".join(f"{v:.2f}" for _, v in r["curve"])
        secs = "-" if r["s_to_target"] is None else f"{r['s_to_target']:.0f}s (step {r['step_to_target']})"
        line = (f"| {r['seed']} | {r['precision']} | {r['label']} | {curve} | {r['last_step']}"
                f"{' (stopped)' if r['stopped'] else ''} | {secs} |")
        print(line if args.markdown else line.strip("| ").replace(" | ", "  "))
    for p in sorted({r["precision"] for r in rows}):
        mine = [r for r in rows if r["precision"] == p]
        learned = [r for r in mine if r["label"] == "learns"]
        secs = [r["s_to_target"] for r in learned if r["s_to_target"] is not None]
        print(json.dumps({"precision": p, "runs": len(mine), "learned": len(learned),
                          "labels": {k: sum(r["label"] == k for r in mine) for k in sorted({r["label"] for r in mine})},
                          "median_s_to_target_learners": statistics.median(secs) if secs else None,
                          "median_step_to_target_learners": statistics.median(
                              [r["step_to_target"] for r in learned if r["step_to_target"] is not None] or [0]),
                          "syncs": sum(r["syncs"] for r in mine),
                          "min_update_kept": min((r["min_update_kept"] for r in mine if r["syncs"]), default=None),
                          "max_update_error": max((r["max_update_error"] for r in mine if r["syncs"]), default=None)}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--spec", required=True)
    r.add_argument("--seeds", required=True)
    r.add_argument("--precisions", default="bf16,fp32")
    r.add_argument("--out", required=True)
    r.add_argument("--lanes", type=int, default=1)
    r.add_argument("--cores", default="", help="comma-separated cores, one lane each (overrides --lanes)")
    r.add_argument("--set", action="append", default=[])
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    rep.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    (run if args.cmd == "run" else report)(args)


if __name__ == "__main__":
    main()
