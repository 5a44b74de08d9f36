"""Health (Echo Trap) thresholds: a spec section owned by monitor/health.py's rules.

Narrowing signals compare each step's metrics with their own recent history; progress and
failure read the outcome (docs/health.md explains every rule and how each default was chosen).
Ratios are "current smoothed value / peak of the smoothed value over the previous `window`
steps"; a ratio at or below the threshold fires the signal.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class HealthSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = Field(True, description="Run the Echo Trap detector every step.")
    action: Literal["warn", "stop", "intervene"] = Field(
        "warn", description="On an alarm: log only (warn), checkpoint and stop (stop), or change the run and continue (intervene)."
    )
    act_on: Literal["warning", "collapse"] = Field("collapse", description="Verdict level at which `stop` or `intervene` acts.")
    window: int = Field(20, ge=2, description="Steps of history a narrowing signal compares against (peaks, medians).")
    smooth: int = Field(3, ge=1, description="Steps averaged into a signal's current value (moving mean), against single-step noise.")
    warmup_steps: int = Field(5, ge=0, description="Steps of history needed before a warning (no_signal excepted); a collapse is called from `smooth` steps on (at least 2: step 1 samples the base model).")
    collapse_votes: int = Field(2, ge=1, description="Narrowing signals needed, beside a failure, for a collapse.")
    std_warn: float = Field(0.5, gt=0.0, lt=1.0, description="Narrowing: in-group std of the task reward at or below this fraction of its recent peak.")
    entropy_warn: float = Field(0.5, gt=0.0, lt=1.0, description="Narrowing: policy entropy at or below this fraction of its recent peak.")
    distinct_warn: float = Field(0.5, gt=0.0, lt=1.0, description="Narrowing: distinct-bigram ratio at or below this fraction of its recent peak.")
    joint_warn: float = Field(0.8, gt=0.0, le=1.0, description="Narrowing (early): policy entropy and the distinct-bigram "
                              "ratio both at or below this fraction of their recent peaks: two measures of reply diversity falling "
                              "together, before either reaches its own limit. 1 turns it off.")
    identical_warn: float = Field(0.5, gt=0.0, le=1.0, description="Narrowing: share of replies identical to another reply at or above this.")
    mi_warn: float = Field(0.5, gt=0.0, lt=1.0, description="Narrowing (template): I(X;Z)/H(X) at or below this fraction of its recent peak.")
    mi_min_peak: float = Field(0.05, ge=0.0, le=1.0, description="The template signal needs a recent I(X;Z)/H(X) peak of at least this (below it the replies never depended on the state).")
    mi_alone_peak: float = Field(0.2, ge=0.0, le=1.0, description="The template signal warns on its own only from a recent "
                                 "I(X;Z)/H(X) peak of at least this; a fall from a lower peak is within the estimate's step-to-step "
                                 "noise and counts only beside another narrowing signal (docs/health.md).")
    grad_z_warn: float = Field(5.0, gt=0.0, description="Narrowing: actor grad norm this many robust deviations (1.4826 x MAD) above the recent median.")
    grad_ratio_min: float = Field(3.0, ge=1.0, description="A grad-norm spike must also be at least this multiple of the recent median.")
    solved: float = Field(0.9, gt=0.0, le=1.0, description="Progress: smoothed train/success at or above this, or below it by less than "
                          "fall_z standard errors (train/episodes per step), is solved (narrowing is then convergence).")
    progress_min: float = Field(0.02, ge=0.0, description="Progress: the smoothed success (or task reward) must beat every earlier value by more than this to count as a new high.")
    progress_window: int = Field(5, ge=1, description="Progress: a new high of success or of I(X;Z)/H(X) within this many steps.")
    mi_progress_min: float = Field(0.1, ge=0.0, description="Progress: margin for a new high of I(X;Z)/H(X) (the policy learning to read the state); above the step-to-step noise of the estimate (docs/health.md).")
    fall_ratio: float = Field(0.5, ge=0.0, lt=1.0, description="Failure: smoothed success has kept at most this fraction of its gain over the start.")
    fall_z: float = Field(2.0, ge=0.0, description="Failure: success_fell needs a gain, and a fall from its peak, of at least this many "
                          "standard errors of the smoothed success at the peak (binomial, over the `smooth` steps' "
                          "train/episodes): a gain or fall within sampling noise is neither; the same margin lets a success just "
                          "under `solved` count as solved; a success of at least 1/2 within the larger of this margin and as many "
                          "standard errors from the run's own step-to-step changes of its peak is a held gain (progress); "
                          "0 turns the guard off.")
    dead_frac: float = Field(0.95, gt=0.0, le=1.0, description="Failure / no signal: at least this share of groups with zero reward std (or of turns with format errors) for `smooth` steps; a failure only while the smoothed success is below 1/2.")
    stall_steps: int = Field(10, ge=1, description="Unused (the stall rule counted elapsed steps; `no_gain` replaced it); accepted so that earlier run directories load.")
    no_signal_steps: int = Field(3, ge=0, description="Say 'no signal' when this many steps in a row had no learning signal (at least dead_frac of the groups with one reward for all their rollouts, or of the turns unparsed), unless the run is solved; 0 turns it off.")
    empty_stop_steps: int = Field(0, ge=0, description="After this many steps in a row without a learning signal, the verdict is a collapse (RAGEN-2's rollout_filter_empty_stop_steps; with health.action stop the run ends); 0: only warn.")
    keep_ratio_factor: float = Field(0.5, gt=0.0, le=1.0, description="Intervention: multiply the filter's keep_ratio by this (stronger filtering; strategy top_k only); 1 leaves it.")
    min_keep_ratio: float = Field(0.05, gt=0.0, le=1.0, description="Intervention never lowers keep_ratio below this.")
    lr_factor: float = Field(0.5, gt=0.0, le=1.0, description="Intervention: multiply the learning rates by this; 1 leaves them.")
    rollback: bool = Field(True, description="Intervention: reload the newest checkpoint saved while healthy, then continue.")
    cooldown: int = Field(10, ge=0, description="Steps after an intervention before another one (the history needs time to recover).")
    max_interventions: int = Field(3, ge=0, description="After this many interventions, a further alarm checkpoints and stops the run.")

    @model_validator(mode="after")
    def _ordered(self) -> "HealthSpec":
        if self.empty_stop_steps and self.no_signal_steps and self.empty_stop_steps < self.no_signal_steps:
            raise ValueError(f"empty_stop_steps ({self.empty_stop_steps}) must be at least no_signal_steps ({self.no_signal_steps})")
        return self
