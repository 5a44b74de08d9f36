"""The spec's `monitor` section: metric sinks, W&B, saved trajectories, the health monitor
(`health_spec.py`) and the template-collapse metrics. Part of the run spec (`models.py`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from ragen_cli.spec.health_spec import HealthSpec


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class CollapseSpec(_Section):
    every: int = Field(2, ge=0, description="Compute the template-collapse metrics (collapse/*: I(X;Z), H(Z|X), retrieval accuracy) every this many steps; 0 turns them off. Each computation costs about a quarter of a Bandit step on 2 CPU cores with 32 replies (docs/health.md).")
    replies: int = Field(16, ge=2, description="First-turn replies cross-scored under every distinct initial-state prompt (spread over the chosen groups); the cost grows with replies x prompts.")
    groups: int = Field(8, ge=2, description="Initial states (groups, spread over the step's P) whose prompts and replies are cross-scored: one prompt forward each, the main cost.")


def _wandb_tags(tags: list[str]) -> list[str]:
    """W&B refuses a tag over 64 characters at init, after the model has loaded: refuse it here."""
    for i, tag in enumerate(tags):
        if not 1 <= len(tag) <= 64:
            raise PydanticCustomError("wandb_tag", "tag {i} must be 1 to 64 characters, got {n}", {"i": i, "n": len(tag)})
    return tags


class WandbSpec(_Section):
    project: str = Field("ragen", min_length=1, max_length=128, pattern=r"^[^/\\#?%:]+$",
                         description="W&B project the run is logged to (at most 128 characters, none of / \\ # ? % :).")
    entity: str | None = Field(None, min_length=1, description="W&B team or user that owns the project; null: the logged-in user's default entity.")
    run_name: str | None = Field(None, min_length=1, max_length=128, description="Display name of the W&B run; null: the spec's `name`.")
    group: str | None = Field(None, min_length=1, max_length=128, description="W&B group, to show related runs (a sweep, seeds of one setting) together.")
    tags: Annotated[list[str], AfterValidator(_wandb_tags)] = Field(
        default_factory=list, description="W&B tags of the run (each 1 to 64 characters).")
    trajectory_table_every: int = Field(10, ge=0, description="Every this many steps, log the step's sampled trajectories (`trajectories_per_step` of them) as a W&B table `trajectories`; 0: never.")


class MonitorSpec(_Section):
    loggers: list[Literal["jsonl", "tensorboard", "wandb", "trackio", "mlflow"]] = Field(
        ["jsonl"], description="Metric sinks, each getting every metric of every step; jsonl (RUN_DIR/metrics.jsonl) is always written. Tracking in docs/training.md says where each one writes.")
    wandb: WandbSpec = Field(default_factory=WandbSpec, description="W&B run settings (used when `loggers` has wandb).")
    trajectories_per_step: int = Field(8, ge=0, description="Sampled trajectories saved per step for `ragen watch` and `ragen inspect`.")
    health: HealthSpec = Field(default_factory=HealthSpec, description="Echo Trap early warning and what to do about it.")
    collapse: CollapseSpec = Field(default_factory=CollapseSpec, description="Template-collapse metrics (RAGEN-2): how much replies depend on the initial state.")
