"""The verdict level a run is at, between steps: health events only on a change, and the
checkpoints saved while healthy (rollback targets for monitor/intervene.py)."""

from __future__ import annotations

from ragen_cli.monitor.health import Level, Verdict


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
