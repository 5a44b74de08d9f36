"""The Python API: what the `ragen` commands do, as functions (docs/api.md).

    import ragen_cli as ragen

    spec = ragen.load_spec("specs/bandit.yaml", ["train.steps=5"])
    result = ragen.train_policy(spec)                 # TrainResult(run_dir, step, stopped, ...)
    rows = ragen.read_metrics(result.run_dir)         # one dict per step
    report = ragen.evaluate(checkpoint=result.checkpoint, spec="specs/bandit.yaml")

`ragen train` and `ragen eval` call these same functions; the CLI adds exit codes and
messages. Importing this module is light: torch, DeepSpeed and vLLM load when a function that
needs them runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from ragen_cli.compile.plan import Plan
    from ragen_cli.spec.models import RunSpec


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> "RunSpec":
    """A validated run spec from a YAML file, with `--set`-style overrides ("train.steps=5").
    Raises `ragen_cli.spec.errors.SpecError` listing every problem."""
    from ragen_cli.spec.loader import load_spec as _load

    return _load(path, overrides)


def compile_plan(spec: "RunSpec", device: str | None = None) -> "Plan":
    """Everything the run decides before it starts (sizes, DeepSpeed config, vLLM arguments,
    placement, launch); `device` None resolves the spec's `deepspeed.device` on this machine."""
    from ragen_cli.compile.plan import compile_plan as _compile

    return _compile(spec, device=device)


@dataclass
class TrainResult:
    """What a training run left: its directory, the last finished step, whether it stopped
    early (health, Ctrl-C, an empty filter), its last metrics and newest checkpoint."""

    run_dir: Path
    step: int
    stopped: bool
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint: Path | None = None


def train_policy(spec: "RunSpec | str | Path", overrides: Sequence[str] = (), *,
                 resume: str | Path | None = None) -> TrainResult:
    """Train as `ragen train` does (not named `train`: that is the `ragen_cli.train` package,
    which would shadow the function on `ragen_cli` once imported). `spec`: a RunSpec or a YAML path (with `overrides`); with
    `resume` a run directory to continue from its newest checkpoint (its own spec.yaml, plus
    `overrides`; `spec` is then ignored)."""
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.train.checkpoint import check_checkpoint, latest_checkpoint
    from ragen_cli.train.job import prepare_run, run_job

    if resume is not None:
        run_dir = Path(resume)
        latest = latest_checkpoint(run_dir / "checkpoints")
        if latest is not None:
            check_checkpoint(latest)
        spec = load_spec(run_dir / "spec.yaml", overrides)
    elif not hasattr(spec, "model_dump"):
        spec = load_spec(spec, overrides)
    resolve_model(spec.model.name)  # a built-in converted once, a hub id fetched: before any run dir, and
    plan = compile_plan(spec)       # before the Plan, whose template check reads the model's tokenizer
    run_dir = Path(resume) if resume is not None else Path(plan.run_dir)
    lock = prepare_run(spec, plan, run_dir, resume is not None)
    try:
        summary = run_job(spec, plan, run_dir, resume is not None)
    finally:
        lock.release()
    return TrainResult(run_dir, summary["step"], summary["stopped"], dict(summary.get("metrics", {})),
                       latest_checkpoint(run_dir / "checkpoints"))


def evaluate(checkpoint: str | Path | None = None, *, model: str | None = None, spec: str | Path | None = None,
             envs: Sequence[str] | None = None, episodes: int | None = None, greedy: bool = False,
             temperature: float | None = None, backend: str | None = None, out: str | Path | None = None,
             quiet: bool = True) -> dict[str, Any]:
    """Evaluate a checkpoint or a model as `ragen eval` does; returns eval.json's contents (its
    path under "path"). `quiet` keeps the tables off the console."""
    import io

    from rich.console import Console

    from ragen_cli.eval.cli_run import EvalOptions, run_eval

    opts = EvalOptions(checkpoint=Path(checkpoint) if checkpoint is not None else None, model=model,
                       spec=Path(spec) if spec is not None else None, envs=list(envs) if envs else None,
                       episodes=episodes, greedy=greedy, temperature=temperature, backend=backend,
                       out=Path(out) if out is not None else None)
    console = Console(file=io.StringIO()) if quiet else None
    path = run_eval(opts, console)
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    report["path"] = str(path)
    return report


def read_metrics(run_dir: str | Path) -> list[dict]:
    """A run's metrics.jsonl, one dict per step (a damaged line is skipped, as `ragen watch` does)."""
    from ragen_cli.monitor.rundir import RunDir

    return RunDir(Path(run_dir)).read_metrics()

