"""The health verdict's types and the metric-series helpers every health rule reads
(monitor/health.py: narrowing signals and the verdict; monitor/outcome.py: progress and failure).
Stdlib only."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

Level = Literal["healthy", "warning", "collapse"]
LEVELS: tuple[Level, ...] = ("healthy", "warning", "collapse")
MAD_SCALE = 1.4826  # MAD * 1.4826 estimates the std of a normal distribution


@dataclass(frozen=True)
class Reason:
    signal: str
    value: float
    threshold: float
    message: str
    level: Level = "warning"


@dataclass(frozen=True)
class Verdict:
    level: Level
    reasons: list[Reason] = field(default_factory=list)
    step: int | None = None

    def to_event(self) -> dict:
        """Payload for `RunDir.write_event("health", step, **verdict.to_event())`. Non-finite
        numbers (a grad-norm z-score against a zero MAD is +inf) become None: strict JSON."""
        reasons = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(r).items()}
                   for r in self.reasons]
        return {"level": self.level, "reasons": reasons}


def series(history: list[dict], name: str, last: int | None = None) -> list[float]:
    """Finite values of metric `name` in step order (missing / None / NaN skipped).

    `last`: only the last this many values (scans from the end: O(last) on a long history).
    """
    out: list[float] = []
    for rec in reversed(history):
        if last is not None and len(out) >= last:
            break
        v = rec.get(name)
        if finite(v):
            out.append(float(v))
    out.reverse()
    return out


def finite(v) -> bool:
    """A metric value the rules read: a real number, not a bool, not NaN or infinite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def smoothed(xs: list[float], k: int) -> list[float]:
    """Trailing moving mean: s_t = mean(x_{max(0,t-k+1)..t})."""
    return [sum(xs[max(0, t - k + 1) : t + 1]) / (t + 1 - max(0, t - k + 1)) for t in range(len(xs))]
