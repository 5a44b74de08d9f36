"""Metric sinks beside metrics.jsonl (which is always written): TensorBoard, W&B, trackio, MLflow.

`monitor.loggers` in the spec names them; the spec check makes sure their packages are installed,
so a missing one stops `ragen train` before any work. Every sink speaks the same protocol, which
is all the loop knows of it (rank 0 only):

    Sink(run_dir, name, config)   at start; `config` is the resolved spec as a dict
    sink.log(step, metrics)       every metric of every step, the record metrics.jsonl gets
    sink.close()                  at the end of the run, also after an error

Where each one writes (docs/training.md, Tracking): TensorBoard to RUN_DIR/tensorboard; W&B to
RUN_DIR/wandb, online when the user is logged in or as WANDB_MODE says, else offline; trackio to
its own local store (TRACKIO_DIR, default the Hugging Face cache) in project `ragen`; MLflow to
MLFLOW_TRACKING_URI, else a SQLite store RUN_DIR/mlflow/mlflow.db, in experiment
MLFLOW_EXPERIMENT_NAME (default `ragen`).
"""

from __future__ import annotations

import netrc
import os
import time
from pathlib import Path
from urllib.parse import urlsplit

PROJECT = "ragen"  # trackio project and MLflow experiment (W&B's comes from monitor.wandb.project)


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
    """A W&B run in RUN_DIR/wandb: project, entity, name, group and tags from `monitor.wandb`, the
    resolved spec as its config, and every `trajectory_table_every` steps the step's sampled
    trajectories (RUN_DIR/trajectories/step-K.jsonl, written before the step's metrics) as a table.
    Offline runs upload later with `wandb sync RUN_DIR/wandb/offline-run-*`."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        import wandb

        opts = config.get("monitor", {}).get("wandb", {})
        self.run_dir, self.every = run_dir, int(opts.get("trajectory_table_every", 0))
        self.run = wandb.init(project=opts.get("project", PROJECT), entity=opts.get("entity"),
                              name=opts.get("run_name") or name, group=opts.get("group"),
                              tags=list(opts.get("tags", [])), dir=str(run_dir), config=config,
                              mode=wandb_mode(os.environ))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        data: dict = dict(metrics)
        if self.every and step % self.every == 0:
            table = self.trajectory_table(step)
            if table is not None:
                data["trajectories"] = table
        self.run.log(data, step=step)

    def trajectory_table(self, step: int):
        import wandb

        from ragen_cli.monitor.rundir import RunDir

        records = RunDir(self.run_dir).read_trajectories(step)
        if not records:  # monitor.trajectories_per_step: 0
            return None
        return wandb.Table(columns=list(TABLE_COLUMNS), data=[trajectory_row(step, r) for r in records])

    def close(self) -> None:
        self.run.finish()


TABLE_COLUMNS = ("step", "group", "seed", "env", "reward", "task_reward", "success", "turns", "transcript")


def trajectory_row(step: int, record: dict) -> list:
    """One table row of a trajectory record (`Trajectory.to_record`): the episode's numbers and its
    transcript, each turn's observation and reply."""
    turns = record.get("turns", [])
    transcript = "\n\n".join(f"[obs {i}]\n{t.get('obs', '')}\n[reply {i}]\n{t.get('reply', '')}"
                             for i, t in enumerate(turns, start=1))
    return [step, record.get("group"), record.get("seed"), record.get("env"), record.get("reward"),
            record.get("task_reward"), record.get("success"), len(turns), transcript]


def wandb_mode(environ) -> str:
    """WANDB_MODE when set; else online when the user is logged in (WANDB_API_KEY, or a netrc
    entry for the W&B host, which `wandb login` writes); else offline."""
    if environ.get("WANDB_MODE"):
        return environ["WANDB_MODE"]
    if environ.get("WANDB_API_KEY"):
        return "online"
    host = urlsplit(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or ""
    path = environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        logged_in = netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):  # no netrc, or one W&B could not read either
        logged_in = False
    return "online" if logged_in else "offline"


class TrackioSink:
    """A trackio run (project `ragen`, named after the spec, the spec as config) in trackio's local
    store: `trackio show --project ragen`. TRACKIO_DIR moves the store; TRACKIO_SPACE_ID sends
    the run to a Hugging Face Space instead (trackio's own settings)."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        import trackio

        self.run = trackio.init(project=PROJECT, name=name, config=config, embed=False)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowSink:
    """An MLflow run named after the spec, its settings as params (dotted keys, `algorithm.clip_low`).
    Without MLFLOW_TRACKING_URI the store is RUN_DIR/mlflow/mlflow.db (MLflow's own default kind
    of local store; it has deprecated plain files): `mlflow ui --backend-store-uri
    sqlite:///RUN_DIR/mlflow/mlflow.db`."""

    MAX_PARAM = 6000  # characters of one param value MLflow stores

    def __init__(self, run_dir: Path, name: str, config: dict):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        local = run_dir / "mlflow"
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            local.mkdir(parents=True, exist_ok=True)
            uri = f"sqlite:///{(local / 'mlflow.db').resolve()}"
        self.client = MlflowClient(tracking_uri=uri)
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or PROJECT
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(
            experiment, artifact_location=None if os.environ.get("MLFLOW_TRACKING_URI") else (local / "artifacts").resolve().as_uri())
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        params = [Param(k, str(v)[: self.MAX_PARAM]) for k, v in flatten(config).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=params[i: i + 100])

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def flatten(config: dict, prefix: str = "") -> dict[str, object]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay whole values."""
    out: dict[str, object] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


SINKS = {"tensorboard": TensorBoardSink, "wandb": WandbSink, "trackio": TrackioSink, "mlflow": MlflowSink}


def open_sinks(loggers: list[str], run_dir: Path, name: str, config: dict) -> list:
    """One sink per logger besides jsonl (the run directory's own log); when one fails to open,
    those already open are closed before the error goes on."""
    sinks: list = []
    try:
        for logger in loggers:
            if logger in SINKS:
                sinks.append(SINKS[logger](Path(run_dir), name, config))
    except BaseException:
        for sink in sinks:
            sink.close()
        raise
    return sinks
