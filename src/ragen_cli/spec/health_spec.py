"""Health (Echo Trap) thresholds: a spec section owned by monitor/health.py's rules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class HealthSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["warn", "stop", "intervene"] = Field("warn", description="On collapse: log only, checkpoint and stop, or intervene.")
    window: int = Field(10, ge=2, description="Steps of history the detector compares against.")
