"""Echo Trap early warning: pure rules over the metric history (list of metrics.jsonl records).

RAGEN (arXiv 2504.20073, Sec. 4.1 and Fig. 4) finds that multi-turn RL collapses into the
"Echo Trap": reward variance within a group falls off a cliff, entropy drops, gradient norms
spike, and the model repeats the same reasoning templates, often after the reward plateaus. Each
signal below is one small function `(history, cfg) -> Reason | None`; `assess` combines them:
collapse if any signal reaches its collapse threshold or `cfg.collapse_votes` signals warn at
once; warning if any warns. Thresholds live in `HealthSpec` (spec/health_spec.py).

Notation: x_t the metric at step t (records missing the metric or holding NaN are skipped);
s_t = mean of the last `smooth` values; the "recent peak" is max s over the `window` values
before the current one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Callable, Literal

if TYPE_CHECKING:  # monitor/ is stdlib-only at run time; the spec object is duck-typed.
    from ragen_cli.spec.health_spec import HealthSpec

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
        """Payload for `RunDir.write_event("health", step, **verdict.to_event())`.

        Non-finite numbers (a grad-norm z-score against a zero MAD is +inf) become None, so
        events.jsonl stays strict JSON.
        """
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
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    out.reverse()
    return out


def smoothed(xs: list[float], k: int) -> list[float]:
    """Trailing moving mean: s_t = mean(x_{max(0,t-k+1)..t})."""
    return [sum(xs[max(0, t - k + 1) : t + 1]) / (t + 1 - max(0, t - k + 1)) for t in range(len(xs))]


def drop_ratio(xs: list[float], window: int, smooth: int) -> float | None:
    """s_now / max(s over the `window` values before now); None without history or a zero peak."""
    s = smoothed(xs, smooth)
    if len(s) < 2:
        return None
    peak = max(s[max(0, len(s) - 1 - window) : -1])
    if peak <= 1e-12:
        return None
    return s[-1] / peak


def robust_z(xs: list[float], window: int) -> tuple[float, float] | None:
    """(z, median) of the last value against the `window` before it: (x - med) / (1.4826 MAD)."""
    if len(xs) < 4:
        return None
    prev = xs[max(0, len(xs) - 1 - window) : -1]
    med = median(prev)
    mad = median(abs(x - med) for x in prev)
    diff = xs[-1] - med
    if mad == 0.0:
        return (math.inf if diff > 0 else 0.0), med
    return diff / (MAD_SCALE * mad), med


def _ratio_signal(signal, metric, warn, collapse, what) -> Callable[[list[dict], "HealthSpec"], Reason | None]:
    def check(history: list[dict], cfg: "HealthSpec") -> Reason | None:
        # drop_ratio reads the last window + 1 smoothed values, i.e. window + smooth raw ones
        ratio = drop_ratio(series(history, metric, cfg.window + cfg.smooth), cfg.window, cfg.smooth)
        if ratio is None:
            return None
        lo, hi = getattr(cfg, collapse), getattr(cfg, warn)
        if ratio > hi:
            return None
        level: Level = "collapse" if ratio <= lo else "warning"
        threshold = lo if level == "collapse" else hi
        msg = f"{what} fell to {ratio:.0%} of its recent peak (limit {threshold:.0%})"
        return Reason(signal, ratio, threshold, msg, level)

    check.__doc__ = f"{what} ({metric}) relative to its recent peak."
    return check


in_group_std = _ratio_signal("in_group_std", "filter/in_group_std_before", "std_warn", "std_collapse", "in-group reward std")
entropy = _ratio_signal("entropy", "actor/entropy", "entropy_warn", "entropy_collapse", "policy entropy")
distinct = _ratio_signal("distinct_ngrams", "diversity/distinct_2", "distinct_warn", "distinct_collapse", "distinct-bigram ratio")


def grad_spike(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Actor grad norm far above its recent median (robust z-score and a minimum ratio)."""
    xs = series(history, "actor/grad_norm", cfg.window + 1)
    zm = robust_z(xs, cfg.window)
    if zm is None:
        return None
    z, med = zm
    if z < cfg.grad_z_warn or xs[-1] < cfg.grad_ratio_min * med:
        return None
    level: Level = "collapse" if z >= cfg.grad_z_collapse else "warning"
    threshold = cfg.grad_z_collapse if level == "collapse" else cfg.grad_z_warn
    msg = f"grad norm {xs[-1]:.3g} is {z:.1f} robust deviations above its median {med:.3g} (limit {threshold:g})"
    return Reason("grad_norm", z, threshold, msg, level)


def identical_replies(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Share of the step's replies identical to another reply (smoothed)."""
    xs = series(history, "diversity/identical_share", cfg.smooth)
    if not xs:
        return None
    share = smoothed(xs, cfg.smooth)[-1]
    if share < cfg.identical_warn:
        return None
    level: Level = "collapse" if share >= cfg.identical_collapse else "warning"
    threshold = cfg.identical_collapse if level == "collapse" else cfg.identical_warn
    return Reason("identical_replies", share, threshold, f"{share:.0%} of replies repeat another reply (limit {threshold:.0%})", level)


def reward_plateau(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Reward flat for `plateau_window` steps after rising at least `plateau_min_gain` above
    its start (the mean of the first `smooth` values)."""
    w = cfg.plateau_window
    if w == 0:
        return None
    first = series(history[: 4 * cfg.smooth], "reward/mean")[: cfg.smooth]
    recent = smoothed(series(history, "reward/mean", w + cfg.smooth - 1), cfg.smooth)[-w:]
    if len(first) < cfg.smooth or len(recent) < w or len(history) < w + cfg.smooth:
        return None
    gain = max(recent) - sum(first) / len(first)
    spread = max(recent) - min(recent)
    if gain < max(cfg.plateau_min_gain, 1e-12) or spread > cfg.plateau_tol * gain:
        return None
    return Reason("reward_plateau", spread / gain, cfg.plateau_tol, f"reward flat for {w} steps (range {spread:.3g} after a gain of {gain:.3g})")


SIGNALS: dict[str, Callable[[list[dict], "HealthSpec"], Reason | None]] = {
    "in_group_std": in_group_std,
    "entropy": entropy,
    "grad_norm": grad_spike,
    "distinct_ngrams": distinct,
    "identical_replies": identical_replies,
    "reward_plateau": reward_plateau,
}


def assess(history: list[dict], cfg: "HealthSpec") -> Verdict:
    """The verdict for the last step of `history` (records in step order)."""
    step = history[-1].get("step") if history else None
    if not cfg.enabled or len(history) < max(cfg.warmup_steps, 1):
        return Verdict("healthy", [], step)
    reasons = [r for check in SIGNALS.values() if (r := check(history, cfg)) is not None]
    if any(r.level == "collapse" for r in reasons) or len(reasons) >= cfg.collapse_votes:
        level: Level = "collapse"
    elif reasons:
        level = "warning"
    else:
        level = "healthy"
    return Verdict(level, reasons, step)


def assess_all(history: list[dict], cfg: "HealthSpec") -> list[Verdict]:
    """The verdict at every step, as the trainer saw it then (for charts and replays)."""
    return [assess(history[: i + 1], cfg) for i in range(len(history))]


class HealthTracker:
    """Remembers the last verdict level; reports a verdict only when the level changes.

    Also remembers which checkpoints were saved while healthy (for rollback).
    """

    def __init__(self) -> None:
        self.level: Level = "healthy"
        self.healthy_checkpoints: list[int] = []

    def observe(self, verdict: Verdict) -> dict | None:
        """The `health` event payload when the level changed (with `previous`), else None."""
        if verdict.level == self.level:
            return None
        previous, self.level = self.level, verdict.level
        return {**verdict.to_event(), "previous": previous}

    def note_checkpoint(self, step: int) -> None:
        """Call after saving a checkpoint at `step`; kept as a rollback target if healthy now."""
        if self.level == "healthy":
            self.healthy_checkpoints.append(step)

    def forget_after(self, step: int) -> None:
        """After a rollback to `step`: later checkpoints are no longer on the run's path."""
        self.healthy_checkpoints = [s for s in self.healthy_checkpoints if s <= step]
        self.level = "healthy"
