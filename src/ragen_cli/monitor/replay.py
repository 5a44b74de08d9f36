"""Replaying the health detector over a run directory, as the trainer saw each step.

The trainer's history holds the records of training steps 1, 2, ...; the step-0 line of
metrics.jsonl (validation of the base model) is not part of it, so a replay drops it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from ragen_cli.monitor.health import Verdict, assess
from ragen_cli.monitor.rundir import RunDir
from ragen_cli.spec.health_spec import HealthSpec


def training_history(records: list[dict]) -> list[dict]:
    """The records the trainer's detector sees: training steps (step >= 1) in step order."""
    return [r for r in records if isinstance(r.get("step"), int) and r["step"] >= 1]


def with_sample_size(history: list[dict], spec: object) -> list[dict]:
    """Runs recorded before the `train/episodes` and `train/groups` metrics existed:
    take them from the spec's env.train groups x group_size and groups, what every step rolled out."""
    env = spec.get("env") if isinstance(spec, dict) else None
    train = env.get("train") if isinstance(env, dict) else None
    groups, size = (train.get("groups"), train.get("group_size")) if isinstance(train, dict) else (None, None)
    if not (isinstance(groups, int) and isinstance(size, int)):
        return history
    known = {"train/episodes": float(groups * size), "train/groups": float(groups)}
    return [r if all(k in r for k in known) else {**known, **r} for r in history]


def health_spec(spec: object) -> tuple[HealthSpec, str]:
    """The run's own `monitor.health` (a parsed spec mapping), or the defaults and a note on why."""
    section = spec.get("monitor", {}) if isinstance(spec, dict) else {}
    section = section.get("health") if isinstance(section, dict) else None
    try:
        return HealthSpec(**(section or {})), ""
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return HealthSpec(), f"monitor.health ignored, defaults used: {where}: {first.get('msg')}{more}"
    except TypeError as exc:
        return HealthSpec(), f"monitor.health ignored, defaults used: {exc}"


@dataclass
class Timeline:
    """The verdict of every training step of one run."""

    run: str
    steps: list[int]
    verdicts: list[Verdict]
    note: str = ""
    changes: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # skipped lines of metrics.jsonl, "FILE:LINE: why"

    def first_warning(self) -> Verdict | None:
        """The first verdict that is not healthy: a collapse is a warning too, so a run that goes
        straight from healthy to collapse was first warned at that step."""
        return next((v for v in self.verdicts if v.level != "healthy"), None)

    def first_collapse(self) -> Verdict | None:
        return next((v for v in self.verdicts if v.level == "collapse"), None)

    def to_json(self) -> dict:
        warn, coll = self.first_warning(), self.first_collapse()
        return {
            "run": self.run,
            "first_warning": warn.step if warn else None,
            "first_collapse": coll.step if coll else None,
            "levels": [v.level for v in self.verdicts],
            "steps": self.steps,
            "changes": self.changes,
            "problems": self.problems,
            **({"note": self.note} if self.note else {}),
        }


def thinned(history: list[dict], every: int) -> list[dict]:
    """`history` as a run computing the template-collapse metrics every `every` steps would have
    recorded it (`monitor.collapse.every`: on steps divisible by it): collapse/* kept there only."""
    if every <= 1:
        return history
    return [r if r.get("step", 0) % every == 0 else {k: v for k, v in r.items() if not k.startswith("collapse/")}
            for r in history]


def replay(run_dir: str | Path, cfg: HealthSpec | None = None, collapse_every: int = 1) -> Timeline:
    """The detector over `run_dir`'s metrics with the run's own HealthSpec (or `cfg`); with
    `collapse_every` > 1 as if the collapse metrics had been computed only every so many steps."""
    run = RunDir(run_dir)
    note = ""
    text = run.read_spec_text()
    try:
        spec = yaml.safe_load(text) if text else {}
    except yaml.YAMLError:
        spec = {}
    if cfg is None:
        cfg, note = health_spec(spec)
    records, problems = run.read_metrics_checked()
    history = thinned(with_sample_size(training_history(records), spec), collapse_every)
    verdicts = [assess(history[: i + 1], cfg) for i in range(len(history))]
    changes, level = [], "healthy"
    for v in verdicts:
        if v.level != level:
            changes.append({"step": v.step, "level": v.level, "previous": level,
                            "reasons": [{"signal": r.signal, "message": r.message} for r in v.reasons]})
            level = v.level
    return Timeline(str(run_dir), [r["step"] for r in history], verdicts, note, changes, problems)
