"""How many learning runs must any detector of a broad class warn, to warn every slow collapse 3
steps ahead? The bound behind target 2 of the health detector (docs/experiments/health-history.md; collapses with onset >= 8 warned at
least 3 steps early) against target 1 (at most 2 learning runs warned).

The class: detectors that read, at each step, seven numbers, and warn more the lower each is
(monotone). Five say how narrowed the run is (`health_corpus.narrowed`: the in-group reward std,
entropy and distinct bigrams each as a ratio to its recent peak, minus the identical-reply share,
I(X;Z)/H(X) to its recent peak); two say how it is doing: the smoothed train/success, and its
recent rise (the highest smoothed value in the last `progress_window` steps minus the highest
before them). Today's detector's narrowing and progress rules read these: narrowing warns, and
success at a high level, or rising, keeps it quiet; its grad-norm spike is outside the class
(`--grad` adds the grad norm's robust z-score as an eighth number). Nothing in the class reads
the step number (target 5).

If a learning run at some step u is at least as alarming on all seven as a collapse at step t
(each number <=), a detector of the class that warns the collapse at t warns that learner at u.
A collapse with onset o must be warned at some t in [first, o - 3], `first` the first step a
warning may come (its warm-up; tried from 2 to `warmup_steps`); the detector may choose which t.
So the fewest learning runs any detector of the class warns is

    min over (t_c for each slow collapse c) of | union_c W(c, t_c) |,

W(c, t) the learning runs with a step (from `first` on) that dominates c at t. This is
computed exactly (a small search). It is a lower bound for the class only: a detector that
reads other numbers (grad norms, raw levels, the reply text) is not bound by it.

    .venv/bin/python bench/lead_bound.py --corpus fresh8 --corpus ...   # batches of data/health_corpus/, or folders
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import corpus  # noqa: E402
import health_corpus as hc  # noqa: E402

LEAD = 3  # target 2: a slow collapse warned at least this many steps before its onset
SLOW = 8  # target 2: onset at or after this step


def features(history: list[dict], cfg, grad: bool = False) -> tuple[float, ...]:
    """The seven numbers after `history` (module doc); lower = more alarming. With `grad`, an
    eighth: minus the actor grad norm's robust z-score against its last `window` values (what the
    grad-spike signal reads; 0 before 4 values)."""
    from ragen_cli.monitor.health import robust_z
    from ragen_cli.monitor.outcome import score_name
    from ragen_cli.monitor.verdict import series, smoothed

    name = score_name(history)
    s = smoothed(series(history, name), cfg.smooth) if name else []
    level = s[-1] if s else 0.0
    w = cfg.progress_window
    rise = (max(s[-w:]) - max(s[:-w])) if len(s) > w else ((max(s[1:]) - s[0]) if len(s) > 1 else 0.0)
    out = (*hc.narrowed(history, cfg), level, rise)
    if not grad:
        return out
    zm = robust_z(series(history, "actor/grad_norm", cfg.window + 1), cfg.window)
    return (*out, -min(zm[0], 1e9) if zm else 0.0)


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """`a` at least as alarming as `b` on every number."""
    return all(x <= y for x, y in zip(a, b))


def fewest_warned(options: list[list[frozenset]]) -> tuple[int, list[frozenset]]:
    """min over one choice per list of the size of the union of the chosen sets, and a choice that
    reaches it (depth-first, pruned by the best union found; each list reduced to its minimal sets)."""
    reduced = [[s for s in opts if not any(o < s for o in opts)] for opts in options]
    reduced = [sorted(set(r), key=len) for r in reduced]
    order = sorted(range(len(reduced)), key=lambda i: len(reduced[i]))
    best: list = [10**9, None]

    def go(k: int, union: frozenset, chosen: list) -> None:
        if len(union) >= best[0]:
            return
        if k == len(order):
            best[0], best[1] = len(union), list(chosen)
            return
        for s in reduced[order[k]]:
            go(k + 1, union | s, chosen + [s])

    go(0, frozenset(), [])
    return best[0], best[1]


def held_out(learners: dict[str, list[tuple]], collapses: dict[str, list[tuple]]) -> tuple[list[str], list[str]]:
    """A detector of the class fitted on the other runs, tried on each run in turn. `learners`:
    each learning run's numbers at every step a warning may come; `collapses`: each slow
    collapse's at every step a 3-step lead allows. With run r held out, the detector warns a step
    whose numbers are all at most those of some point of the other collapses that no other
    learning run reaches (at least as alarming as a known collapse 3 steps before its onset,
    where no known learner ever was). (The learning runs it warns, the collapses it leads)."""
    points = [(c, p) for c, ps in collapses.items() for p in ps]

    def hits(vs: list[tuple], own: str) -> set[int]:
        return {i for i, (c, p) in enumerate(points) if c != own and any(dominates(v, p) for v in vs)}

    by_learner = {r: hits(vs, "") for r, vs in learners.items()}
    by_collapse = {r: hits(vs, r) for r, vs in collapses.items()}
    fitted = {r: set().union(*(w for q, w in by_learner.items() if q != r)) for r in [*learners, *collapses]}
    warned = [r for r, w in by_learner.items() if w - fitted[r]]
    led = [r for r, w in by_collapse.items() if w - fitted[r]]
    return warned, led


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", required=True,
                    help="a batch of data/health_corpus/ (fresh, ..., gpu2) or a corpus folder; several")
    ap.add_argument("--same-family", action="store_true",
                    help="compare each collapse only with learning runs of its own spec family")
    ap.add_argument("--grad", action="store_true", help="read an eighth number: the grad norm's robust z-score")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a HealthSpec field the numbers are read with (smooth, window, progress_window, warmup_steps)")
    args = ap.parse_args(argv)
    from ragen_cli.monitor.replay import thinned, training_history
    from ragen_cli.spec.health_spec import HealthSpec

    cfg = HealthSpec(**{k: v for k, v in (kv.split("=", 1) for kv in args.set)})
    labels = corpus.labelled(*args.corpus)

    def history(lab: dict) -> list[dict]:
        return thinned(training_history(hc._jsonl(hc.run_dir(lab) / "metrics.jsonl")), hc.default_cadence())

    slow = [lab for lab in labels if lab["label"] == "collapse" and lab["onset"] is not None and lab["onset"] >= SLOW]
    learning = [lab for lab in labels if lab["label"] == "learns"]
    # every run's numbers at every step a warning may come, read once: {run: {step: numbers}}
    last = {lab["run"]: lab["onset"] - LEAD for lab in slow}
    numbers = {}
    for lab in [*learning, *slow]:
        h = history(lab)
        numbers[lab["run"]] = {u: features(h[:u], cfg, args.grad)
                               for u in range(hc.BOUND_FROM, last.get(lab["run"], len(h)) + 1)}

    def steps(run: str, first: int) -> list[tuple]:
        return [v for u, v in numbers[run].items() if u >= first]

    results = []
    firsts = range(hc.BOUND_FROM, max(cfg.warmup_steps, hc.BOUND_FROM) + 1)
    for first in firsts:
        # a detector whose first warning may come at step `first` (its warm-up): every step of a
        # learning run from there on is judged too
        learners = {lab["run"]: steps(lab["run"], first) for lab in learning}
        options = []
        print(f"first warning allowed at step {first}:")
        for lab in slow:
            peers = {r: v for r, v in learners.items() if not args.same_family or hc.family(r) == hc.family(lab["run"])}
            per_step = [frozenset(r for r, vs in peers.items() if any(dominates(v, mine) for v in vs))
                        for mine in steps(lab["run"], first)]
            options.append(per_step)
            if not per_step:
                print(f"  {lab['run']:40s} onset {lab['onset']:>3}  cannot be warned {LEAD} steps ahead: "
                      f"no warning before step {first}")
            elif min(map(len, per_step)) > 0:
                print(f"  {lab['run']:40s} onset {lab['onset']:>3}  learners as alarming at steps {first}-"
                      f"{lab['onset'] - LEAD}: {[len(s) for s in per_step]}  (of {len(peers)})")
        if not all(options):
            results.append(None)  # no detector with this warm-up leads every slow collapse
            continue
        n, choice = fewest_warned(options)
        warned = sorted(frozenset().union(*choice)) if choice else []
        print(f"  fewest learning runs warned to lead all {len(slow)} slow collapses by {LEAD}: {n} of {len(learners)}: "
              f"{', '.join(warned)}", flush=True)
        results.append(n)
    # the held-out check reads the detector's own warm-up
    learners = {lab["run"]: steps(lab["run"], cfg.warmup_steps) for lab in learning}
    warned, led = held_out(learners, {lab["run"]: steps(lab["run"], cfg.warmup_steps) for lab in slow})
    print(f"held out run by run, the region fitted on the other runs (every point of their slow collapses a {LEAD}-step "
          f"lead allows that none of their learners reaches) warns {len(warned)} of {len(learners)} learning runs "
          f"({', '.join(warned)}) and leads {len(led)} of {len(slow)} slow collapses by {LEAD}; not led: "
          f"{', '.join(lab['run'] for lab in slow if lab['run'] not in led)}", flush=True)
    fewest = min((n for n in results if n is not None), default=None)
    print(json.dumps({"slow_collapses": len(slow), "learning_runs": len(learners), "fewest_learners_warned": fewest,
                      "by_first_step": dict(zip(firsts, results)),
                      "held_out_learners_warned": len(warned), "held_out_slow_led": len(led),
                      "same_family": args.same_family, "grad": args.grad, "set": args.set}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
