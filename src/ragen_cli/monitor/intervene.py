"""What to do about an Echo Trap alarm: a pure decision the trainer carries out and logs.

`HealthSpec.action`:
- `warn`: nothing beyond the `health` event.
- `stop`: save a checkpoint and end the run.
- `intervene`: any of (a) stronger StarPO-S filtering: keep_ratio x keep_ratio_factor (with the
  top_k strategy, the only one with a kept fraction; the paper, Sec. 4.2 / Fig. 6: keeping fewer high-variance groups delays or removes the collapse),
  (b) learning rates x lr_factor, (c) reload the newest checkpoint saved while healthy; then
  continue. After `max_interventions`, a further alarm stops the run; within `cooldown` steps
  of an intervention, alarms are only logged.

The trainer applies the Decision, writes `RunDir.write_event("intervention", step,
**decision.to_event())`, and after a rollback drops its in-memory metric history past the
checkpoint (and calls `HealthTracker.forget_after`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal

from ragen_cli.monitor.health import LEVELS, Verdict

if TYPE_CHECKING:
    from ragen_cli.spec.health_spec import HealthSpec


@dataclass(frozen=True)
class InterventionState:
    """What the trainer knows when it asks: current step and settings, past interventions."""

    step: int
    keep_ratio: float | None  # None: the filter's strategy has no kept fraction to lower (not top_k)
    interventions: int = 0
    last_intervention_step: int | None = None
    healthy_checkpoints: tuple[int, ...] = ()


@dataclass(frozen=True)
class Decision:
    action: Literal["continue", "stop", "intervene"]
    message: str
    save_checkpoint: bool = False
    keep_ratio: float | None = None
    lr_scale: float | None = None
    rollback_to: int | None = None
    changes: dict = field(default_factory=dict)

    def to_event(self) -> dict:
        """Payload for the `intervention` event (also used for stops)."""
        return asdict(self)


def decide(verdict: Verdict, cfg: "HealthSpec", state: InterventionState) -> Decision:
    """The Decision for this step's verdict (see the module docstring for the rules)."""
    if verdict.level == "collapse" and any(r.signal == "no_signal" for r in verdict.reasons):
        return Decision("stop", f"no learning signal for {cfg.empty_stop_steps} steps (health.empty_stop_steps): "
                        "checkpoint and stop", save_checkpoint=True)
    if not cfg.enabled or LEVELS.index(verdict.level) < LEVELS.index(cfg.act_on):
        return Decision("continue", f"verdict {verdict.level}: no action")
    if cfg.action == "warn":
        return Decision("continue", f"verdict {verdict.level}: logged only (health.action = warn)")
    if cfg.action == "stop":
        return Decision("stop", f"verdict {verdict.level}: checkpoint and stop (health.action = stop)", save_checkpoint=True)
    last = state.last_intervention_step
    if last is not None and state.step - last < cfg.cooldown:
        return Decision("continue", f"verdict {verdict.level}: within cooldown of the intervention at step {last}")
    if state.interventions >= cfg.max_interventions:
        return Decision(
            "stop", f"verdict {verdict.level} after {state.interventions} interventions: checkpoint and stop", save_checkpoint=True
        )
    return _intervention(verdict, cfg, state)


def _intervention(verdict: Verdict, cfg: "HealthSpec", state: InterventionState) -> Decision:
    changes: dict = {}
    new_keep = None
    if state.keep_ratio is not None:
        keep = max(cfg.min_keep_ratio, state.keep_ratio * cfg.keep_ratio_factor)
        new_keep = keep if keep < state.keep_ratio else None
    if new_keep is not None:
        changes["keep_ratio"] = [state.keep_ratio, new_keep]
    lr_scale = cfg.lr_factor if cfg.lr_factor < 1.0 else None
    if lr_scale is not None:
        changes["lr_scale"] = lr_scale
    earlier = [s for s in state.healthy_checkpoints if s < state.step]
    rollback_to = max(earlier) if cfg.rollback and earlier else None
    if rollback_to is not None:
        changes["rollback_to"] = rollback_to
    if not changes:
        return Decision("stop", f"verdict {verdict.level}: nothing left to change; checkpoint and stop", save_checkpoint=True)
    parts = [f"{k}={v}" for k, v in changes.items()]
    return Decision(
        "intervene",
        f"verdict {verdict.level}: intervention {state.interventions + 1}/{cfg.max_interventions}: " + ", ".join(parts),
        keep_ratio=new_keep,
        lr_scale=lr_scale,
        rollback_to=rollback_to,
        changes=changes,
    )
