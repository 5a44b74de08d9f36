"""The health detector against a corpus of real runs (data/health_corpus/, read by bench/corpus.py):
does it catch every run that collapsed, ahead of the collapse, and call no run that learned a collapse?

    .venv/bin/python bench/health_corpus.py                      # table, then one JSON line
    .venv/bin/python bench/health_corpus.py --corpus DIR collect RUN_DIR ...  # copy finished runs into DIR (compact)
    .venv/bin/python bench/health_corpus.py shortcuts            # each run's shortcut.json (collect writes it)
    .venv/bin/python bench/health_corpus.py label                # labels.json from the rule
    .venv/bin/python bench/health_corpus.py sweep                # how the thresholds were chosen
    .venv/bin/python bench/health_corpus.py bound                # the best lead any detector could have, and
                                                                 # learners as narrowed as each slow collapse (takes several --corpus)
    .venv/bin/python bench/health_corpus.py table                # the runs as a Markdown table (docs/health.md)
    .venv/bin/python bench/health_corpus.py margins              # each threshold's safe band (takes several --corpus)
    .venv/bin/python bench/health_corpus.py alone                # warnings by the template signal alone, and their I(X;Z) peaks
    .venv/bin/python bench/health_corpus.py zeros                # steps where no episode succeeded after a gain (takes several --corpus)

Every command takes `--corpus NAME` (default: main), a batch of data/health_corpus/ (main, fresh,
fresh2, ..., gpu, gpu2), or `--corpus DIR`, a corpus folder (labels.json, runs/). The commands
that write (collect, shortcuts, label) take a folder: a new batch, or one unpacked from its archive
(bench/corpus.py says how), packed into data/health_corpus/ afterwards with `bench/corpus.py pack`:

    .venv/bin/python bench/health_corpus.py --corpus /tmp/fresh14 collect RUN_DIR ...

The replay (no command) takes several: `--corpus main --corpus fresh` judges the runs of both as
one corpus.

Labels come from outcomes the detector never reads (docs/health.md, "Labelling rule"): the
validation success of the training env (v_0 at step 0, best, final), the first action of
the trajectories saved each step, and (since 2026-11-27) what the best policy that does not
learn scores on the run's validation episodes (`shortcut.json`, bench/shortcuts.py):
- learns: final >= v_0 + GAIN and final keeps at least half of the gain (best - v_0), and final
  is not a shortcut's score: more than LEARN_Z standard errors above it, or, where the shortcut
  is the task's optimum (Bandit's "always the risky arm"), within LEARN_Z of 1;
- shortcut: the gain is kept but final is not above the shortcut (listed, counted in neither class);
- collapse (echo trap): best >= v_0 + GAIN but final keeps less than half of the gain; onset:
  the first validation step after the best from which v never again exceeds v_0 + gain / 2;
- collapse (template): best < v_0 + GAIN, and from some step on every step's saved
  trajectories share one first action in at least SETTLED of them; onset: the first such step;
- none: neither (listed, counted in neither class).
The detector runs with the current HealthSpec defaults (what a user gets), not the thresholds a
run was trained with. Lead = labelled onset - first warning (steps); a collapse run is caught
when the detector says collapse at any step. The JSON line also gives the median lead over the
collapses with a "late" onset, at least warmup_steps + 3 (only those can be led by 3 steps: no
verdict but healthy comes before step warmup_steps).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import corpus  # noqa: E402  (bench/corpus.py, the loader)

DEFAULT_CORPUS = "main"
CORPUS = corpus.folder(DEFAULT_CORPUS)  # the corpus folder every command works on; main() sets it from --corpus
WRITES = ("collect", "shortcuts", "label")  # the commands that write into the corpus folder
GAIN = 0.2
LEARN_Z = 2.0  # standard errors of the final validation success (`fall_z`'s line between a difference and noise)
SETTLED = 0.85  # 7 of the 8 trajectories a step saves by default
KEEP_TRAJ = 3  # full trajectory files kept per run: first, middle, last step


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def first_action(traj: dict) -> str:
    """The env's reading of the first action (Bandit: the arm), else the action text."""
    info = traj.get("info") or {}
    if isinstance(info.get("arm"), str):
        return info["arm"]
    turns = traj.get("turns") or []
    actions = turns[0].get("actions") if turns else []
    return " ".join(actions[0].lower().split()) if actions else "<none>"


def actions_record(trajectories: Path) -> dict:
    """One line of actions.jsonl: a step's saved trajectories (trajectories/step-K.jsonl) -> their first actions."""
    return {"step": int(trajectories.stem.split("-")[1]), "actions": [first_action(t) for t in _jsonl(trajectories)]}


def collect(run_dirs: list[Path]) -> None:
    """Copy each run's metrics.jsonl, spec.yaml, events.jsonl, first actions per step
    (actions.jsonl) and KEEP_TRAJ trajectory files into the corpus, and write its shortcut.json."""
    for src in run_dirs:
        dst = CORPUS / "runs" / src.name
        (dst / "trajectories").mkdir(parents=True, exist_ok=True)
        for name in ("metrics.jsonl", "spec.yaml", "events.jsonl"):
            shutil.copy(src / name, dst / name)
        files = sorted((src / "trajectories").glob("step-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
        with open(dst / "actions.jsonl", "w") as f:
            for p in files:
                f.write(json.dumps(actions_record(p)) + "\n")
        for p in {files[0], files[len(files) // 2], files[-1]} if files else ():
            shutil.copy(p, dst / "trajectories" / p.name)
        write_shortcut(dst)
        print(f"collected {src} -> {dst}")


def write_shortcut(run: Path) -> dict:
    """run/shortcut.json: the best non-learning policy on the run's validation episodes
    (bench/shortcuts.py; a custom env's module must be importable, e.g. from its project folder)."""
    import yaml

    from shortcuts import best

    from ragen_cli.spec.models import RunSpec

    full = yaml.safe_load((run / "spec.yaml").read_text())
    # what the policies read; the oldest runs name keys and values since renamed elsewhere
    got = best(RunSpec.model_validate({k: full[k] for k in ("name", "model", "env", "rollout") if k in full}))
    (run / "shortcut.json").write_text(json.dumps(got, indent=1) + "\n")
    return got


def beats_shortcut(final: float, shortcut: float, episodes: int) -> bool:
    """Whether a final validation success is not a shortcut's: more than LEARN_Z standard errors
    (at its own level, over `episodes`) above the shortcut's score, or within LEARN_Z of the
    ceiling 1 (where the shortcut is the optimum: any learner ends at its level)."""
    se = (final * (1 - final) / episodes) ** 0.5
    return final >= min(shortcut + LEARN_Z * se, 1 - LEARN_Z * se)


def val_series(metrics: list[dict], env: str) -> list[tuple[int, float]]:
    key = f"val/{env}/success"
    return [(m["step"], m[key]) for m in metrics if isinstance(m.get(key), (int, float))]


def settled_from(actions: list[dict]) -> int | None:
    """The first step from which every step's modal first action has share >= SETTLED."""
    onset = None
    for rec in actions:
        acts = rec["actions"]
        share = max(acts.count(a) for a in set(acts)) / len(acts) if acts else 0.0
        if share >= SETTLED:
            onset = rec["step"] if onset is None else onset
        else:
            onset = None
    return onset


def label(run: Path) -> dict:
    """The labelling rule of the module docstring for one corpus run."""
    import yaml

    spec = yaml.safe_load((run / "spec.yaml").read_text())
    env = spec["env"]["train"]["name"]
    vals = val_series(_jsonl(run / "metrics.jsonl"), env)
    v0, final = vals[0][1], vals[-1][1]
    best_step, best = max(vals, key=lambda sv: (sv[1], -sv[0]))
    half = v0 + (best - v0) / 2
    if not (run / "shortcut.json").is_file():
        raise SystemExit(f"{run}: no shortcut.json; run `bench/health_corpus.py --corpus {run.parent.parent} shortcuts`")
    cut = json.loads((run / "shortcut.json").read_text())
    out = {"run": run.name, "env": env, "v0": v0, "best": best, "final": final, "shortcut": cut["success"]}
    if best >= v0 + GAIN and final >= half and beats_shortcut(final, cut["success"], cut["episodes"]):
        return {**out, "label": "learns", "onset": None, "why": "final keeps at least half of a gain >= 0.2, above the shortcut"}
    if best >= v0 + GAIN and final >= half:
        return {**out, "label": "shortcut", "onset": None,
                "why": f"gain kept, but final not above {cut['policy']!r} ({cut['success']:.2f})"}
    if best >= v0 + GAIN:
        after = [(s, v) for s, v in vals if s > best_step]
        onset = next(s for i, (s, v) in enumerate(after) if all(w <= half for _, w in after[i:]))
        return {**out, "label": "collapse", "onset": onset, "why": "echo trap: lost more than half of its gain"}
    settled = settled_from(_jsonl(run / "actions.jsonl"))
    if settled is not None:
        return {**out, "label": "collapse", "onset": settled, "why": "template: no gain, replies settled on one action"}
    return {**out, "label": "none", "onset": None, "why": "no gain, no template"}


SWEEP = {"warmup_steps": (3, 5), "smooth": (2, 3), "entropy_warn": (0.5, 0.7), "distinct_warn": (0.5, 0.7),
         "std_warn": (0.3, 0.5), "mi_progress_min": (0.02, 0.1), "joint_warn": (1.0, 0.8)}


def sweep(labels: list[dict]) -> None:
    """The summary for every combination of SWEEP's values (other fields at their defaults), plus
    warnings on learning runs: the table the defaults were chosen from (docs/health.md)."""
    import itertools

    from ragen_cli.spec.health_spec import HealthSpec

    keys = list(SWEEP)
    print(" ".join(keys) + "  false_collapse caught/collapse_runs median_lead median_lead_late_onset warned_learners")
    for values in itertools.product(*SWEEP.values()):
        cfg = HealthSpec(**dict(zip(keys, values)))
        rows, summary = evaluate(labels, cfg)
        warned = sum(r["first_warning"] is not None for r in rows if r["label"] == "learns")
        print(" ".join(f"{v:g}" for v in values), f" {summary['false_collapse']} {summary['caught']}/"
              f"{summary['collapse_runs']} {summary['median_lead_steps']} {summary['median_lead_late_onset']} {warned}/{summary['learning_runs']}")


# What the replies and rewards of a step show (not the spec: vanilla StarPO's kept_frac is 1 and its
# grad norm lower from its first update on, whatever the run does next).
BEHAVIOUR = ("reward/task_in_group_std", "reward/task_mean", "train/success", "filter/zero_std_frac",
             "actor/entropy", "actor/answer_entropy", "diversity/distinct_2", "diversity/identical_share",
             "collapse/mi_norm", "collapse/cond_entropy", "collapse/retrieval_acc",
             "episode/valid_action_ratio", "episode/format_error_ratio", "episode/response_tokens_per_turn")
BOUND_FROM = 2  # step 1's rollouts are the base model's: nothing in them can tell one run's future from another's


def by_step(metrics: list[dict], keys=BEHAVIOUR) -> dict[str, dict[int, float]]:
    """{metric: {step: value}} for the numeric values of `keys`."""
    out: dict[str, dict[int, float]] = {}
    for rec in metrics:
        for k in keys:
            v = rec.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(k, {})[rec["step"]] = float(v)
    return out


def with_history(series: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
    """`series` plus, per metric, what a rule comparing a run with its own past reads: the change
    since the previous value (`:delta`), since the first (`:of_first`), and the ratio to the
    running peak (`:of_peak`, 1 while the peak is 0)."""
    out = dict(series)
    for k, values in series.items():
        steps = sorted(values)
        peak = [max(values[q] for q in steps[: i + 1]) for i in range(len(steps))]
        out[k + ":delta"] = {s: values[s] - values[p] for p, s in zip(steps, steps[1:])}
        out[k + ":of_first"] = {s: values[s] - values[steps[0]] for s in steps}
        out[k + ":of_peak"] = {s: values[s] / pk if pk > 0 else 1.0 for s, pk in zip(steps, peak)}
    return out


def separable_at(run: dict[str, dict[int, float]], learners: list[dict[str, dict[int, float]]],
                 first: int, last: int, min_learners: int = 3) -> tuple[int, list[str]] | None:
    """The first step in [first, last] at which some metric of `run` lies outside the range
    [min, max] of the learning runs' values at that same step (at least `min_learners` of them
    having one), with the metrics that do; None if there is none. An oracle: it knows every
    learning run's values in advance, so it never warns one of them, and takes any difference,
    however small, as a sign."""
    for step in range(first, last + 1):
        hits = []
        for k, values in run.items():
            ref = [x[k][step] for x in learners if step in x.get(k, {})]
            if step in values and len(ref) >= min_learners and not min(ref) <= values[step] <= max(ref):
                hits.append(k)
        if hits:
            return step, hits
    return None


def held_out_envelope(learners: list[dict[str, dict[int, float]]], first: int, last: int) -> list:
    """`separable_at` for each learning run against all the others: where the oracle's envelope,
    fitted without that run, would have warned it (None: never)."""
    return [separable_at(run, learners[:i] + learners[i + 1:], first, last) for i, run in enumerate(learners)]


def warned_by(*warned_at: list, first: int, last: int) -> list[tuple[int, tuple[int, ...]]]:
    """For each list of first-warning steps (None: never), how many were warned by each step in
    [first, last]; only the steps at which some count grows."""
    out: list = []
    for step in range(first, last + 1):
        counts = tuple(sum(a is not None and a <= step for a in at) for at in warned_at)
        if not out or counts != out[-1][1]:
            out.append((step, counts))
    return out


NARROWING_MEASURES = ("reward/task_in_group_std", "actor/entropy", "diversity/distinct_2")


def narrowed(history: list[dict], cfg=None) -> list[float]:
    """How narrowed a run is after `history`, as five numbers, lower = more narrowed: the ratios
    to their recent peaks the detector reads (`NARROWING_MEASURES`, monitor/health.py
    `drop_ratio`, 1 without one), minus the smoothed identical-reply share, and I(X;Z)/H(X) to its
    recent peak (1 without one), all at `cfg`'s smoothing and window (default: the HealthSpec defaults)."""
    from ragen_cli.monitor.health import drop_ratio
    from ragen_cli.monitor.verdict import series, smoothed
    from ragen_cli.spec.health_spec import HealthSpec

    cfg = cfg or HealthSpec()
    out = []
    for name in (*NARROWING_MEASURES, "collapse/mi_norm"):
        xs = series(history, name, cfg.window + cfg.smooth)
        ratio = drop_ratio(xs, cfg.window, cfg.smooth) if len(xs) > 1 else None
        out.append(1.0 if ratio is None else ratio)
    same = series(history, "diversity/identical_share", cfg.smooth)
    out.insert(3, -(smoothed(same, cfg.smooth)[-1] if same else 0.0))
    return out


def family(run: str) -> str:
    """A corpus run's spec family: its name without the corpus prefix, precision and seed
    ("gpu2-larger4x-seed153" -> "larger4x"; until 2026-11-28 a gpu2 run kept its prefix here)."""
    import re

    return re.sub(r"-(fp32|bf16)", "", re.sub(r"-seed\d+$", "", re.sub(r"^(fresh\d*|gpu\d*)-", "", run)))


def twins(labels: list[dict], lead: int = 3) -> None:
    """For each collapse with onset >= warmup_steps + `lead`, at each step from warmup_steps to
    onset - `lead` (where a warning `lead` steps early must come), how many learning runs of its
    spec family (the run name without corpus prefix, precision and seed) are at least as narrowed
    on all five `narrowed` numbers at that step. A detector that only reads those five and warns
    more the more narrowed a run is would have to warn each such twin along with the collapse."""
    from ragen_cli.monitor.replay import thinned, training_history
    from ragen_cli.spec.health_spec import HealthSpec

    def history(lab: dict) -> list[dict]:
        """What the detector reads at a user's cadence, as the replay gives it (`run_verdicts`)."""
        return thinned(training_history(_jsonl(run_dir(lab) / "metrics.jsonl")), default_cadence())

    first = HealthSpec().warmup_steps
    learners = [(lab, history(lab)) for lab in labels if lab["label"] == "learns"]
    for lab in labels:
        if lab["label"] != "collapse" or lab["onset"] < first + lead:
            continue
        peers = [h for other, h in learners if family(other["run"]) == family(lab["run"])]
        own, counts = history(lab), []
        for step in range(first, lab["onset"] - lead + 1):
            mine = narrowed(own[:step])
            counts.append(sum(len(h) >= step and all(a <= b for a, b in zip(narrowed(h[:step]), mine)) for h in peers))
        print(f"{lab['run']:40s} onset {lab['onset']:>3}  {len(peers):>2} learners of {family(lab['run'])}; "
              f"as narrowed at steps {first}-{lab['onset'] - lead}: {counts}")


def bound(labels: list[dict]) -> dict:
    """The lead of the oracle detector (`separable_at` on the behaviour metrics `with_history`)
    on every collapse, from step BOUND_FROM; a collapse it cannot tell from the learners up to its
    onset counts as lead 0 (generous: a real detector would warn later or never)."""
    def read(lab: dict) -> dict[str, dict[int, float]]:
        return with_history(by_step(_jsonl(run_dir(lab) / "metrics.jsonl")))

    learners: dict[str, list] = {}
    for lab in labels:
        if lab["label"] == "learns":
            learners.setdefault(lab["env"], []).append(read(lab))
    leads, coll_at = [], []
    for lab in labels:
        if lab["label"] != "collapse":
            continue
        found = separable_at(read(lab), learners.get(lab["env"], []), BOUND_FROM, lab["onset"])
        lead = lab["onset"] - found[0] if found else 0
        leads.append(lead)
        coll_at.append(found[0] if found else None)
        print(f"{lab['run']:28s} onset {lab['onset']:>3}  oracle warns at {found[0] if found else '-':>3}  "
              f"lead {lead:>3}  {', '.join(found[1]) if found else ''}")
    # The same envelope held out: each learning run against the other learning runs of its env, over
    # the steps the collapses were read on. A learning run outside the others' range is one the
    # envelope, used as a detector, would have warned.
    horizon = max((lab["onset"] for lab in labels if lab["label"] == "collapse"), default=BOUND_FROM)
    learn_at = []
    for env, runs in learners.items():
        names = [lab["run"] for lab in labels if lab["label"] == "learns" and lab["env"] == env]
        for name, found in zip(names, held_out_envelope(runs, BOUND_FROM, horizon)):
            learn_at.append(found[0] if found else None)
            print(f"{name:28s} learns     held out, the others' envelope warns at {found[0] if found else '-':>3}  "
                  f"{', '.join(found[1][:3]) if found else ''}{' ...' if found and len(found[1]) > 3 else ''}")
    for step, (c, n) in warned_by(coll_at, learn_at, first=BOUND_FROM, last=horizon):
        print(f"by step {step:>2}: warned {c}/{len(coll_at)} collapses (by their onsets), "
              f"{n}/{len(learn_at)} held-out learning runs")
    # No detector that reads the runs can warn before BOUND_FROM: onset - BOUND_FROM caps each lead
    cap = [lab["onset"] - BOUND_FROM for lab in labels if lab["label"] == "collapse"]
    summary = {"collapse_runs": len(leads), "oracle_median_lead": statistics.median(leads) if leads else None,
               "cap_median_lead": statistics.median(cap) if cap else None,
               "learning_runs": len(learn_at), "held_out_learners_warned": sum(a is not None for a in learn_at)}
    print(json.dumps(summary))
    twins(labels)
    return summary


def default_cadence() -> int:
    """How often a user's run computes the collapse metrics (`monitor.collapse.every`)."""
    from ragen_cli.spec.monitor_spec import CollapseSpec

    return CollapseSpec().every


def run_dir(lab: dict) -> Path:
    """Where a labelled run's copy lies: its own corpus folder (several `--corpus`), else CORPUS."""
    return Path(lab.get("corpus", CORPUS)) / "runs" / lab["run"]


def run_verdicts(labels: list[dict], cfg=None, collapse_every: int | None = None) -> list[dict]:
    """Each run's first warning and first collapse under `cfg` (default: the HealthSpec defaults),
    the collapse metrics thinned to `collapse_every` (default: a user's cadence; the corpus
    recorded them every step)."""
    from ragen_cli.monitor.replay import replay
    from ragen_cli.spec.health_spec import HealthSpec

    every = default_cadence() if collapse_every is None else collapse_every
    rows = []
    for lab in labels:
        t = replay(run_dir(lab), cfg or HealthSpec(), collapse_every=every)
        warn, coll = (v.step if v else None for v in (t.first_warning(), t.first_collapse()))
        rows.append({**lab, "first_warning": warn, "first_collapse": coll})
    return rows


def summarize(rows: list[dict], warmup_steps: int) -> dict:
    """The summary of `run_verdicts` rows. Lead = onset - first warning; onset delay = first
    collapse - onset. A lead of 3 needs a first warning at step onset - 3 >= warmup_steps (the
    first step a verdict may be other than healthy): collapses with an earlier onset cannot be led
    by 3 at all. `slow_min_lead` is over the collapses with onset >= 8 (None: none, or one unwarned
    counts as no lead: -99)."""
    for r in rows:
        r["lead"] = r["onset"] - r["first_warning"] if r["onset"] is not None and r["first_warning"] is not None else None
    learn = [r for r in rows if r["label"] == "learns"]
    coll = [r for r in rows if r["label"] == "collapse"]
    leads = [r["lead"] for r in coll if r["first_collapse"] is not None and r["lead"] is not None]
    late = [r["lead"] for r in coll if r["onset"] is not None and r["onset"] - 3 >= warmup_steps
            and r["first_collapse"] is not None and r["lead"] is not None]
    delays = [r["first_collapse"] - r["onset"] for r in coll if r["first_collapse"] is not None and r["onset"] is not None]
    slow = [r["lead"] if r["lead"] is not None else -99 for r in coll if r["onset"] is not None and r["onset"] >= 8]
    return {
        "learning_runs": len(learn),
        "false_collapse": sum(r["first_collapse"] is not None for r in learn),
        "collapse_runs": len(coll),
        "caught": sum(r["first_collapse"] is not None for r in coll),
        "median_lead_steps": statistics.median(leads) if leads else None,
        "late_onset_runs": len(late),
        "median_lead_late_onset": statistics.median(late) if late else None,
        "learners_warned": sum(r["first_warning"] is not None for r in learn),
        "max_onset_delay": max(delays) if delays else None,
        "slow_min_lead": min(slow) if slow else None,
        "gain_then_loss_runs": sum(r["label"] == "collapse" and r["best"] >= r["v0"] + GAIN for r in rows),
    }


def evaluate(labels: list[dict], cfg=None, collapse_every: int | None = None) -> tuple[list[dict], dict]:
    from ragen_cli.spec.health_spec import HealthSpec

    rows = run_verdicts(labels, cfg, collapse_every)
    return rows, summarize(rows, (cfg or HealthSpec()).warmup_steps)


THRESHOLDS = ("window", "smooth", "warmup_steps", "collapse_votes", "std_warn", "entropy_warn", "distinct_warn",
              "joint_warn", "identical_warn", "mi_warn", "mi_min_peak", "mi_alone_peak", "grad_z_warn", "grad_ratio_min", "solved",
              "progress_min", "progress_window", "mi_progress_min", "fall_ratio", "fall_z", "dead_frac",
              "no_signal_steps")
"""The HealthSpec fields the rules read, each moved by +-20% one at a time (`robust`)."""


def moved(field: str, factor: float):
    """The default of `field` times `factor`: ints rounded (None when that leaves the value where it
    was), a value past a bound pulled back inside it (le=1: 1.0; lt=1: 0.99)."""
    from pydantic import ValidationError

    from ragen_cli.spec.health_spec import HealthSpec

    default = getattr(HealthSpec(), field)
    value = round(default * factor) if isinstance(default, int) else default * factor
    if value == default:
        return None
    for candidate in (value, 1.0, 0.99):
        try:
            return getattr(HealthSpec(**{field: candidate}), field)
        except ValidationError:
            continue
    return None


def robust(labels: list[dict]) -> list[dict]:
    """The summary with each threshold moved by -20% and +20% (one at a time)."""
    from ragen_cli.spec.health_spec import HealthSpec

    out = []
    for i, field in enumerate(THRESHOLDS, 1):
        progress(f"+-20%: {field} ({i}/{len(THRESHOLDS)})")
        for factor in (0.8, 1.2):
            value = moved(field, factor)
            if value is not None:
                _, summary = evaluate(labels, HealthSpec(**{field: value}))
                out.append({"field": field, "value": value, **summary})
    return out


def progress(what: str) -> None:
    """One line of progress on stderr (the full replay of several corpora takes minutes)."""
    print(f"  ... {what}", file=sys.stderr, flush=True)


MARGIN_FACTORS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0)


def safe_band(marks: dict[float, str], default: float) -> tuple[float, float] | None:
    """The widest run of values around `default` whose mark is not "-" (lowest, highest), or
    None when the default itself fails."""
    values = sorted(marks)
    if marks[default] == "-":
        return None
    j = k = values.index(default)
    while j > 0 and marks[values[j - 1]] != "-":
        j -= 1
    while k < len(values) - 1 and marks[values[k + 1]] != "-":
        k += 1
    return values[j], values[k]


def margins(labels: list[dict]) -> None:
    """How wide is each threshold's safe band? For each field of THRESHOLDS, the detector with that
    field at its default x each of MARGIN_FACTORS (others at their defaults; an integer rounded, a
    value past a bound pulled inside it, repeats dropped), marked: `+` targets 1 and 2 of
    docs/health.md hold (no false collapse, at most 2 learners warned, every collapse called
    within 2 steps of onset, and every collapse with onset >= 8 warned 3 steps ahead), `c` all
    but the last (the slow lead), `-` not even that. Then the band of values around the default
    where `c` or `+` holds, and its width hi / lo: target 3 (1 and 2 with each threshold moved
    +-20%) needs a width of at least 1.2 / 0.8 = 1.5 with the default inside it, for every field."""
    from ragen_cli.spec.health_spec import HealthSpec

    defaults = HealthSpec()
    print("field (default): value mark ...  |  band around the default where 1 and 2's calls hold, width")
    for field in THRESHOLDS:
        default = getattr(defaults, field)
        values = sorted({default, *(v for f in MARGIN_FACTORS if (v := moved(field, f)) is not None)})
        marks = {}
        for value in values:
            _, m = evaluate(labels, HealthSpec(**{field: value}))
            calls = m["false_collapse"] == 0 and m["learners_warned"] <= 2 and m["caught"] == m["collapse_runs"] \
                and (m["max_onset_delay"] or 0) <= 2
            lead = m["slow_min_lead"] is None or m["slow_min_lead"] >= 3
            marks[value] = "+" if calls and lead else ("c" if calls else "-")
        got = safe_band(marks, default)
        band = "none" if got is None else f"[{got[0]:g}, {got[1]:g}] width {got[1] / got[0]:.2f}"
        print(f"{field} ({default:g}): " + " ".join(f"{v:g}{marks[v]}" for v in values) + f"  |  {band}")


def loro(labels: list[dict]) -> list[dict]:
    """Leave one run out: for each run, the SWEEP setting chosen on the other runs (fewest false
    collapses, then most collapses caught, then fewest learners warned, then the largest median
    lead), and that setting's verdict on the held-out run."""
    import itertools

    from ragen_cli.spec.health_spec import HealthSpec

    keys = list(SWEEP)
    settings = [dict(zip(keys, values)) for values in itertools.product(*SWEEP.values())]
    verdicts = []
    for j, s in enumerate(settings, 1):
        if j % 16 == 1:
            progress(f"leave one run out: settings {j}-{min(j + 15, len(settings))} of {len(settings)}")
        verdicts.append(run_verdicts(labels, HealthSpec(**s)))
    out = []
    for i, lab in enumerate(labels):
        def score(j: int) -> tuple:
            others = [r for k, r in enumerate(verdicts[j]) if k != i]
            m = summarize([dict(r) for r in others], HealthSpec(**settings[j]).warmup_steps)
            return (m["false_collapse"], -m["caught"], m["learners_warned"], -(m["median_lead_steps"] or -99))
        best = min(range(len(settings)), key=score)
        out.append({"run": lab["run"], "label": lab["label"], "setting": settings[best],
                    "first_warning": verdicts[best][i]["first_warning"], "first_collapse": verdicts[best][i]["first_collapse"]})
    return out


def alone(labels: list[dict]) -> None:
    """Every warning whose one reason is the template signal, under the defaults with
    `mi_alone_peak` 0 (the rule before the twenty-first session), with I(X;Z)/H(X) now and its peak."""
    from ragen_cli.monitor.replay import replay
    from ragen_cli.spec.health_spec import HealthSpec

    cfg = HealthSpec(mi_alone_peak=0.0)
    for lab in labels:
        t = replay(run_dir(lab), cfg, collapse_every=default_cadence())
        for step, v in zip(t.steps, t.verdicts):
            if v.level == "warning" and [r.signal for r in v.reasons] == ["template"]:
                r = v.reasons[0]
                print(f"{lab['run']:40s} {lab['label']:9s} step {step:3d}  I(X;Z)/H(X) {r.value:.3f}, "
                      f"peak {r.threshold / cfg.mi_warn:.3f}")


def zeros(labels: list[dict], floor: float = 0.1) -> None:
    """Every run with a step in which no episode succeeded (train/success 0) after the smoothed
    success had gained at least `floor` over its first value, with what `wiped_out` makes of the
    first such step (the chance of the zeros from a policy still at its success before them)."""
    import yaml

    from ragen_cli.monitor.outcome import wiped_out
    from ragen_cli.monitor.replay import training_history, with_sample_size
    from ragen_cli.monitor.verdict import smoothed
    from ragen_cli.spec.health_spec import HealthSpec

    cfg = HealthSpec()
    for lab in labels:
        spec = yaml.safe_load((run_dir(lab) / "spec.yaml").read_text())
        history = [r for r in with_sample_size(training_history(_jsonl(run_dir(lab) / "metrics.jsonl")), spec)
                   if "train/success" in r]
        s = smoothed([r["train/success"] for r in history], cfg.smooth)
        at = [i for i in range(1, len(history)) if history[i]["train/success"] == 0 and max(s[:i]) - s[0] >= floor]
        if at:
            why = wiped_out(history[: at[0] + 1], cfg)
            steps = [history[i]["step"] for i in at]
            print(f"{lab['run']:40s} {lab['label']:9s} onset {lab['onset']}  zero at steps {steps[:6]}"
                  f"{' ...' if len(steps) > 6 else ''}; at the first: "
                  + (f"wiped_out, chance {why.value:.2g}" if why else "not wiped_out"))


def table(labels: list[dict]) -> None:
    """One Markdown row per run: label (its rule), validation v_0 / best / final, onset, first
    warning and first collapse (step, with the signals then) and lead, the detector at its defaults
    and a user's cadence."""
    from ragen_cli.monitor.replay import replay
    from ragen_cli.spec.health_spec import HealthSpec

    def at(v) -> str:
        return "-" if v is None else f"{v.step} ({', '.join(r.signal for r in v.reasons)})"

    print("| run | label | v_0 / best / final | onset | first warning | first collapse | lead |")
    print("|---|---|---|---|---|---|---|")
    for lab in labels:
        t = replay(run_dir(lab), HealthSpec(), collapse_every=default_cadence())
        warn, coll = t.first_warning(), t.first_collapse()
        lead = lab["onset"] - warn.step if lab["onset"] is not None and warn is not None else None
        kind = f" ({lab['why'].split(':')[0]})" if lab["label"] == "collapse" else ""
        print(f"| {lab['run']} | {lab['label']}{kind} | {lab['v0']:.2f} / {lab['best']:.2f} / {lab['final']:.2f} | "
              f"{'-' if lab['onset'] is None else lab['onset']} | {at(warn)} | {at(coll)} | {'-' if lead is None else lead} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs="?", default="evaluate",
                    choices=["evaluate", "collect", "shortcuts", "label", "sweep", "bound", "table", "margins", "alone",
                             "zeros"])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--corpus", action="append",
                    help="a batch of data/health_corpus/ (main, fresh, ..., gpu2) or a corpus folder (runs/ and "
                         "labels.json) to work on; default: main. The replay takes several and judges their runs as one corpus")
    args = ap.parse_args(argv)
    corpora = args.corpus or [DEFAULT_CORPUS]
    if len(corpora) > 1 and args.command not in ("evaluate", "margins", "bound", "alone", "zeros"):
        ap.error(f"{args.command} works on one --corpus; the replay (no command), margins, bound, alone and zeros take several")
    if args.command in WRITES and corpus.folder(corpora[0]) != Path(corpora[0]):
        ap.error(f"{args.command} writes into --corpus: give a folder (bench/corpus.py: unpack a batch, pack it back)")
    global CORPUS
    CORPUS = corpus.folder(corpora[0])
    if args.command == "collect":
        collect(args.runs)
        return 0
    if args.command == "shortcuts":
        for run in args.runs or sorted(p for p in (CORPUS / "runs").iterdir() if p.is_dir()):
            got = write_shortcut(run)
            print(f"{run.name:34s} {got['policy']:>18s} {got['success']:.3f} on {got['episodes']} episodes")
        return 0
    if args.command == "label":
        labels = [label(p) for p in sorted((CORPUS / "runs").iterdir()) if p.is_dir()]
        (CORPUS / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")
        for lab in labels:
            print(f"{lab['run']:28s} {lab['label']:9s} onset {lab['onset']}  ({lab['why']})")
        return 0
    if args.command == "table":
        table(json.loads((CORPUS / "labels.json").read_text()))
        return 0
    if args.command == "sweep":
        sweep(json.loads((CORPUS / "labels.json").read_text()))
        return 0
    from ragen_cli.spec.health_spec import HealthSpec

    labels = corpus.labelled(*corpora)
    if args.command == "bound":
        bound(labels)
        return 0
    if args.command == "margins":
        margins(labels)
        return 0
    if args.command == "alone":
        alone(labels)
        return 0
    if args.command == "zeros":
        zeros(labels)
        return 0
    rows, summary = evaluate(labels)
    shaky = robust(labels)
    held = loro(labels)
    summary.update({
        "robust_false_collapse": max(r["false_collapse"] for r in shaky),
        "robust_learners_warned": max(r["learners_warned"] for r in shaky),
        "robust_missed": max(r["collapse_runs"] - r["caught"] for r in shaky),
        "loro_false_collapse": sum(h["label"] == "learns" and h["first_collapse"] is not None for h in held),
        "loro_learners_warned": sum(h["label"] == "learns" and h["first_warning"] is not None for h in held),
        "loro_missed": sum(h["label"] == "collapse" and h["first_collapse"] is None for h in held),
        "collapse_every": default_cadence(),
    })
    print("+-20% of one threshold at a time (an integer rounded: the move in brackets), the settings that change anything:")
    defaults = HealthSpec()
    for r in shaky:
        if (r["false_collapse"], r["caught"], r["learners_warned"]) != (summary["false_collapse"], summary["caught"],
                                                                         summary["learners_warned"]):
            move = r["value"] / getattr(defaults, r["field"]) - 1
            print(f"  {r['field']} = {r['value']:g} ({move:+.0%}): false collapse {r['false_collapse']}, caught {r['caught']}/"
                  f"{r['collapse_runs']}, learners warned {r['learners_warned']}/{r['learning_runs']}")
    print("leave one run out (the SWEEP setting chosen on the others), where the held-out verdict differs from the label:")
    for h in held:
        wrong = (h["label"] == "learns" and (h["first_collapse"] or h["first_warning"])) or \
            (h["label"] == "collapse" and h["first_collapse"] is None)
        if wrong:
            print(f"  {h['run']} ({h['label']}): warned {h['first_warning']}, collapse {h['first_collapse']} with {h['setting']}")
    print(f"{'run':34s} {'label':9s} {'v0':>5s} {'best':>5s} {'final':>5s} {'onset':>5s} {'warn':>5s} {'coll':>5s} {'lead':>5s}")
    for r in rows:
        cells = [r["onset"], r["first_warning"], r["first_collapse"], r["lead"]]
        print(f"{r['run']:34s} {r['label']:9s} {r['v0']:5.2f} {r['best']:5.2f} {r['final']:5.2f} "
              + " ".join(f"{'-' if c is None else c:>5}" for c in cells))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
