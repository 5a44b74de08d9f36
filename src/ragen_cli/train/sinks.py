"""Metric sinks beside metrics.jsonl (which is always written): TensorBoard and W&B.

`monitor.loggers` in the spec names them; the spec check makes sure their package is installed.
W&B runs offline unless `WANDB_MODE` says otherwise (no network is assumed)."""

from __future__ import annotations

import os
from pathlib import Path


class TensorBoardSink:
    """Scalars under RUN_DIR/tensorboard (`tensorboard --logdir runs/NAME/tensorboard`)."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run in RUN_DIR/wandb, offline by default (`wandb sync` uploads it later)."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        import wandb

        self.run = wandb.init(project="ragen", name=name, dir=str(run_dir), config=config,
                              mode=os.environ.get("WANDB_MODE", "offline"))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


SINKS = {"tensorboard": TensorBoardSink, "wandb": WandbSink}


def open_sinks(loggers: list[str], run_dir: Path, name: str, config: dict) -> list:
    """One sink per logger besides jsonl (the run directory's own log)."""
    return [SINKS[logger](Path(run_dir), name, config) for logger in loggers if logger in SINKS]
