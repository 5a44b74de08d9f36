"""The watched run's data, refreshed incrementally from its directory (no Textual here).

`RunState.poll()` reads what was appended since the last call (metrics, events, new
trajectory files) and recomputes the health verdicts of the new steps with the run's own
HealthSpec (the same pure rules the trainer applies), so charts can mark alarm steps even for
runs whose trainer did not log health events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from ragen_cli.monitor.health import Verdict, assess
from ragen_cli.monitor.replay import health_spec, training_history
from ragen_cli.monitor.rundir import RunDir
from ragen_cli.spec.health_spec import HealthSpec


@dataclass(frozen=True)
class SpecInfo:
    """What the header needs from spec.yaml / plan.json."""

    name: str
    description: str
    total_steps: int | None
    health: HealthSpec = field(default_factory=HealthSpec)
    note: str = ""


def spec_info(spec_text: str | None, plan: dict | None, fallback_name: str) -> SpecInfo:
    """Read the run name, a one-line description, total steps and HealthSpec from the spec."""
    try:
        spec = yaml.safe_load(spec_text) if spec_text else {}
    except yaml.YAMLError:
        spec = {}
    spec = spec if isinstance(spec, dict) else {}
    get = lambda d, *keys: _dig(d, keys)  # noqa: E731
    total = get(spec, "train", "steps") or (plan or {}).get("steps")
    env = get(spec, "env", "train", "name")
    algo = get(spec, "algorithm", "preset") or get(spec, "algorithm", "adv_estimator")
    model = get(spec, "model", "name")
    desc = "  ".join(f"{k} {v}" for k, v in (("env", env), ("algo", algo), ("model", model)) if v)
    health, note = health_spec(spec)
    return SpecInfo(str(spec.get("name") or fallback_name), desc, total if isinstance(total, int) else None, health, note)


def _dig(d: object, keys: tuple[str, ...]) -> object:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


class RunState:
    """One watched run directory; `poll()` returns True when anything new arrived."""

    def __init__(self, path: str | Path) -> None:
        self.run = RunDir(path)
        self.info: SpecInfo | None = None
        self.history: list[dict] = []
        self.verdicts: list[Verdict] = []
        self.events: list[dict] = []
        self.traj_steps: list[int] = []
        self.version = 0  # bumped whenever `history` changes
        self.seen = False  # the directory existed at some poll
        self._metrics = self.run.tail_metrics()
        self._events = self.run.tail_events()

    @property
    def exists(self) -> bool:
        return self.run.path.is_dir()

    @property
    def deleted(self) -> bool:
        """The directory existed and is gone (what was read stays on screen)."""
        return self.seen and not self.exists

    @property
    def problems(self) -> list[str]:
        """Lines of metrics.jsonl / events.jsonl that were skipped, `FILE:LINE: why`."""
        return self._metrics.problems + self._events.problems

    @property
    def health(self) -> HealthSpec:
        return self.info.health if self.info else HealthSpec()

    @property
    def verdict(self) -> Verdict | None:
        return self.verdicts[-1] if self.verdicts else None

    def poll(self) -> bool:
        if not self.exists:
            return False
        self.seen = True
        changed = False
        if self.info is None and self.run.spec_path.exists():
            self.info = spec_info(self.run.read_spec_text(), self.run.read_plan(), self.run.name)
            changed = True
        if self._poll_metrics():
            self.version += 1
            changed = True
        new_events = self._events.read_new()
        if self._events.restarts:
            self.events, self._events.restarts = [], 0
        self.events.extend(new_events)
        steps = self.run.steps_with_trajectories()
        changed |= bool(new_events) or steps != self.traj_steps
        self.traj_steps = steps
        return changed

    def _poll_metrics(self) -> bool:
        new = self._metrics.read_new()  # records with a whole-number step (others are named in problems)
        if self._metrics.restarts:
            self.history, self.verdicts, self._metrics.restarts = [], [], 0
        if not new:
            return False
        seq = self.history[-1:] + new
        in_order = all(b["step"] > a["step"] for a, b in zip(seq, seq[1:]))
        if in_order:
            self.history.extend(new)
        else:  # a repeated step (resume): keep the last record of each step, recompute all
            by_step = {r["step"]: r for r in self.history + new}
            self.history = [by_step[s] for s in sorted(by_step)]
            self.verdicts = []
        cfg = self.health
        for i in range(len(self.verdicts), len(self.history)):
            self.verdicts.append(assess(training_history(self.history[: i + 1]), cfg))
        return True

    def trajectories(self, step: int) -> list[dict]:
        return self.run.read_trajectories(step)
