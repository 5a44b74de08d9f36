"""Health (Echo Trap) thresholds: a spec section owned by monitor/health.py's rules.

The detector compares each step's metrics with their own recent history (docs/watch.md
explains every signal). Ratios are "current smoothed value / peak of the smoothed value over
the previous `window` steps"; a ratio at or below the threshold fires the signal.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class HealthSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Run the Echo Trap detector every step.")
    action: Literal["warn", "stop", "intervene"] = Field(
        "warn", description="On an alarm: log only (warn), checkpoint and stop (stop), or change the run and continue (intervene)."
    )
    act_on: Literal["warning", "collapse"] = Field("collapse", description="Verdict level at which `stop` or `intervene` acts.")
    window: int = Field(20, ge=2, description="Steps of history the detector compares against (peaks, medians).")
    smooth: int = Field(3, ge=1, description="Steps averaged into a signal's current value (moving mean), against single-step noise.")
    warmup_steps: int = Field(5, ge=0, description="Steps of history needed before any verdict other than healthy.")
    collapse_votes: int = Field(2, ge=1, description="This many signals at warning level at once make a collapse.")
    std_warn: float = Field(0.5, gt=0.0, lt=1.0, description="In-group reward std at or below this fraction of its recent peak: warning.")
    std_collapse: float = Field(0.2, gt=0.0, lt=1.0, description="In-group reward std at or below this fraction of its recent peak: collapse.")
    entropy_warn: float = Field(0.5, gt=0.0, lt=1.0, description="Policy entropy at or below this fraction of its recent peak: warning.")
    entropy_collapse: float = Field(0.2, gt=0.0, lt=1.0, description="Policy entropy at or below this fraction of its recent peak: collapse.")
    grad_z_warn: float = Field(5.0, gt=0.0, description="Actor grad norm this many robust deviations (1.4826 x MAD) above the recent median: warning.")
    grad_z_collapse: float = Field(10.0, gt=0.0, description="Actor grad norm this many robust deviations above the recent median: collapse.")
    grad_ratio_min: float = Field(3.0, ge=1.0, description="A grad-norm spike must also be at least this multiple of the recent median.")
    distinct_warn: float = Field(0.5, gt=0.0, lt=1.0, description="Distinct-bigram ratio at or below this fraction of its recent peak: warning.")
    distinct_collapse: float = Field(0.25, gt=0.0, lt=1.0, description="Distinct-bigram ratio at or below this fraction of its recent peak: collapse.")
    identical_warn: float = Field(0.5, gt=0.0, le=1.0, description="Share of replies identical to another reply at or above this: warning.")
    identical_collapse: float = Field(0.9, gt=0.0, le=1.0, description="Share of replies identical to another reply at or above this: collapse.")
    plateau_window: int = Field(20, ge=0, description="Steps of flat reward after a gain that count as a plateau (warning only); 0 turns it off.")
    plateau_min_gain: float = Field(0.1, ge=0.0, description="Rise of the recent smoothed reward mean above its start (mean of the first `smooth` steps) needed before a plateau counts.")
    plateau_tol: float = Field(0.05, gt=0.0, description="Plateau: smoothed reward range over the plateau window at most this fraction of the gain.")
    keep_ratio_factor: float = Field(0.5, gt=0.0, le=1.0, description="Intervention: multiply the filter's keep_ratio by this (stronger filtering); 1 leaves it.")
    min_keep_ratio: float = Field(0.05, gt=0.0, le=1.0, description="Intervention never lowers keep_ratio below this.")
    lr_factor: float = Field(0.5, gt=0.0, le=1.0, description="Intervention: multiply the learning rates by this; 1 leaves them.")
    rollback: bool = Field(True, description="Intervention: reload the newest checkpoint saved while healthy, then continue.")
    cooldown: int = Field(10, ge=0, description="Steps after an intervention before another one (the history needs time to recover).")
    max_interventions: int = Field(3, ge=0, description="After this many interventions, a further alarm checkpoints and stops the run.")

    @model_validator(mode="after")
    def _ordered(self) -> "HealthSpec":
        pairs = [("std_collapse", "std_warn"), ("entropy_collapse", "entropy_warn"), ("distinct_collapse", "distinct_warn")]
        bad = [f"{lo} ({getattr(self, lo)}) must be below {hi} ({getattr(self, hi)})" for lo, hi in pairs if getattr(self, lo) >= getattr(self, hi)]
        if self.grad_z_collapse < self.grad_z_warn:
            bad.append(f"grad_z_collapse ({self.grad_z_collapse}) must be at least grad_z_warn ({self.grad_z_warn})")
        if self.identical_collapse < self.identical_warn:
            bad.append(f"identical_collapse ({self.identical_collapse}) must be at least identical_warn ({self.identical_warn})")
        if bad:
            raise ValueError("; ".join(bad))
        return self
