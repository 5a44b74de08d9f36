"""The metric sinks (train/sinks.py) with the real packages, writing locally, no network.

One real 2-step run on the tiny-random model (in-process loop, HF rollouts) logs to jsonl,
TensorBoard, W&B (WANDB_MODE=offline), trackio (its store in a tmp TRACKIO_DIR) and MLflow (the
SQLite store in the run directory); each tool's own files are read back and compared with
metrics.jsonl, step by step and key by key. A missing tracker package stops `ragen train` with
exit 2 and the pip command before any work (the package is hidden by an import finder)."""

from __future__ import annotations

import json
import math
import struct
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.monitor.rundir import RunDir
from ragen_cli.spec import checks
from ragen_cli.train.sinks import TABLE_COLUMNS, wandb_mode
from test_train_e2e import SPEC, TINY, run_tiny

ROOT = Path(__file__).resolve().parents[1]
TRACKED = ["train.steps=2", "monitor.loggers=[jsonl, tensorboard, wandb, trackio, mlflow]",
           "monitor.wandb.project=ragen-test", "monitor.wandb.group=g1", "monitor.wandb.tags=[tiny, cpu]",
           "monitor.wandb.run_name=tiny-tracked", "monitor.wandb.trajectory_table_every=2"]


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("trackers")
    with pytest.MonkeyPatch.context() as mp:
        for key in ("WANDB_API_KEY", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "TRACKIO_SPACE_ID"):
            mp.delenv(key, raising=False)
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_SILENT", "true")
        for key in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            mp.setenv(key, str(root / key.lower()))
        mp.setenv("TRACKIO_DIR", str(root / "trackio"))
        import trackio.utils

        # trackio reads TRACKIO_DIR once, at import: point an already imported trackio there too
        for name, module in list(sys.modules.items()):
            if name.startswith("trackio") and isinstance(getattr(module, "TRACKIO_DIR", None), Path):
                mp.setattr(module, "TRACKIO_DIR", root / "trackio")
        out = root / "tracked"
        run_tiny(out, TRACKED)
        yield out  # the tests read trackio's store through the same TRACKIO_DIR


def jsonl_metrics(run: Path) -> dict[int, dict[str, float]]:
    """metrics.jsonl less its `step` and `time` stamps (the line's own fields, not metrics)."""
    return {r["step"]: {k: v for k, v in r.items() if k not in ("step", "time")} for r in RunDir(run).read_metrics()}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def assert_same_metrics(got: dict[int, dict[str, float]], expected: dict[int, dict[str, float]], cast=float):
    assert sorted(got) == sorted(expected) == [1, 2]
    for step, metrics in expected.items():
        assert sorted(got[step]) == sorted(metrics), step
        bad = {k: (got[step][k], v) for k, v in metrics.items() if not same(float(got[step][k]), cast(v))}
        assert not bad, f"step {step}: {bad}"


# ------------------------------------------------------------------ readers of each tool's files
def tensorboard_metrics(run: Path) -> dict[int, dict[str, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    out: dict[int, dict[str, float]] = {}
    for tag in acc.Tags()["scalars"]:
        for event in acc.Scalars(tag):
            out.setdefault(event.step, {})[tag] = event.value
    return out


def wandb_records(run: Path) -> list:
    """The records of the offline run's `.wandb` file: W&B's append-only log (a 7-byte header
    `:W&B`, 0xBEE1, version 0, then 32 KiB blocks of records, each `crc32 u32, length u16, type u8`
    + data; a record split over blocks is FIRST, MIDDLE..., LAST), each a `Record` protobuf."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = (run / "wandb").glob("offline-run-*/run-*.wandb")
    data, block = path.read_bytes(), 32768
    assert struct.unpack("<4sHB", data[:7]) == (b":W&B", 0xBEE1, 0)
    pos, part, records = 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # no room for a record header: the rest of the block is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos: pos + 7])
        if kind == 0:
            break
        part += data[pos + 7: pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = pb.Record()
            record.ParseFromString(part)
            records.append(record)
            part = b""
    return records


def wandb_history(records) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            out.setdefault(r.history.step.num, {}).update(items)
    return out


def trackio_metrics(name: str) -> dict[int, dict[str, float]]:
    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs("ragen", name)
    return {row["step"]: {k: v for k, v in row.items() if k not in ("step", "timestamp")} for row in logs}


def mlflow_run(run: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{run / 'mlflow' / 'mlflow.db'}")
    (found,) = client.search_runs([client.get_experiment_by_name("ragen").experiment_id])
    history: dict[int, dict[str, float]] = {}
    for key in found.data.metrics:
        for m in client.get_metric_history(found.info.run_id, key):
            history.setdefault(m.step, {})[key] = m.value
    return found, history


# ------------------------------------------------------------------------------------- tests
@pytest.mark.slow
def test_every_sink_gets_every_metric_of_every_step(tracked):
    import numpy as np

    expected = jsonl_metrics(tracked)
    assert len(expected[1]) > 20 and all(math.isfinite(v) for v in expected[1].values())
    assert_same_metrics(tensorboard_metrics(tracked), expected, cast=lambda v: float(np.float32(v)))
    history = wandb_history(wandb_records(tracked))
    assert_same_metrics({s: {k: v for k, v in m.items() if not k.startswith(("_", "trajectories/"))}
                         for s, m in history.items()}, expected)
    assert_same_metrics(trackio_metrics("tracked"), expected)
    assert_same_metrics(mlflow_run(tracked)[1], expected)


@pytest.mark.slow
def test_wandb_run_takes_the_spec_settings_and_the_trajectory_table(tracked):
    records = wandb_records(tracked)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (run.project, run.display_name, run.run_group, list(run.tags)) == ("ragen-test", "tiny-tracked", "g1", ["tiny", "cpu"])
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["name"] == "tracked" and config["monitor"]["wandb"]["trajectory_table_every"] == 2
    assert config["algorithm"]["clip_high"] == pytest.approx(0.28)  # the resolved spec (starpo-s preset)
    # trajectory_table_every=2: a table at step 2 only, one row per sampled trajectory
    history = wandb_history(records)
    assert "trajectories/_type" not in history[1] and history[2]["trajectories/_type"] == "table-file"
    table = json.loads((next((tracked / "wandb").glob("offline-run-*")) / "files" / history[2]["trajectories/path"]).read_text())
    sampled = RunDir(tracked).read_trajectories(2)
    assert table["columns"] == list(TABLE_COLUMNS) and len(table["data"]) == len(sampled) == 4
    assert [row[1:4] for row in table["data"]] == [[t["group"], t["seed"], t["env"]] for t in sampled]
    assert sampled[0]["turns"][0]["reply"] in table["data"][0][-1]


@pytest.mark.slow
def test_trackio_and_mlflow_runs_are_named_and_configured(tracked):
    from trackio.sqlite_storage import SQLiteStorage

    assert SQLiteStorage.get_runs("ragen") == ["tracked"]
    found, _ = mlflow_run(tracked)
    assert found.info.run_name == "tracked" and found.info.status == "FINISHED"
    assert found.data.params["name"] == "tracked" and float(found.data.params["algorithm.clip_high"]) == pytest.approx(0.28)
    assert (tracked / "mlflow" / "mlflow.db").is_file()


@pytest.mark.parametrize("env,netrc_host,mode", [
    ({"WANDB_MODE": "disabled", "WANDB_API_KEY": "k" * 40}, None, "disabled"),  # WANDB_MODE wins
    ({"WANDB_API_KEY": "k" * 40}, None, "online"),
    ({}, "api.wandb.ai", "online"),  # `wandb login` wrote the netrc entry
    ({"WANDB_BASE_URL": "https://wandb.example.org"}, "api.wandb.ai", "offline"),  # logged in elsewhere
    ({}, None, "offline"),
])
def test_wandb_mode(env, netrc_host, mode, tmp_path):
    netrc = tmp_path / "netrc"
    if netrc_host:
        netrc.write_text(f"machine {netrc_host}\n  login user\n  password {'p' * 40}\n")
        netrc.chmod(0o600)
    assert wandb_mode({**env, "NETRC": str(netrc)}) == mode


class Hide:
    """An import finder that makes `names` look uninstalled (find_spec and import both fail)."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.mark.parametrize("logger,hidden,pip", [
    ("wandb", "wandb", "pip install wandb"),
    ("trackio", "trackio", "pip install trackio"),
    ("mlflow", "mlflow", "pip install mlflow-skinny sqlalchemy alembic"),
    ("mlflow", "sqlalchemy", "pip install mlflow-skinny sqlalchemy alembic"),  # the SQLite store's
])
def test_missing_package_stops_before_any_work(logger, hidden, pip, tmp_path, monkeypatch):
    for name in [n for n in sys.modules if n.split(".")[0] == hidden]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [Hide([hidden]), *sys.meta_path])
    with pytest.raises(ModuleNotFoundError):
        __import__(hidden)
    out = tmp_path / "runs"
    sets = [*TINY, f"output.dir={out}", "name=hidden", f"monitor.loggers=[jsonl, {logger}]"]
    result = CliRunner().invoke(app, ["train", str(SPEC), *[x for s in sets for x in ("--set", s)]])
    assert result.exit_code == 2, result.output
    assert f"monitor.loggers[1]: logger '{logger}' needs the '{hidden}' package: {pip}" in result.stderr
    assert "pip install 'ragen-cli[trackers]'" in result.stderr
    assert not out.exists()  # nothing started: no run directory


def test_pip_names_match_the_trackers_extra():
    """The packages the error tells to install are the ones pyproject's `trackers` extra pins."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trackers"]
    pinned = {spec.split("==")[0].lower() for spec in extra}
    named = {p for logger, pip in checks.LOGGER_PIP.items() if logger != "tensorboard" for p in pip.split()}
    assert pinned == named


def test_the_trainer_imports_deepspeed_without_mlflow_and_mlflow_still_imports():
    """DeepSpeed's autotuner imports mlflow when it is installed (2.3 s of every trainer's start);
    `import_deepspeed` keeps it out, and leaves mlflow importable for the MLflow sink."""
    import subprocess

    code = ("import sys; from ragen_cli.models.load import import_deepspeed; import_deepspeed(); "
            "from deepspeed.autotuning import autotuner; print(autotuner.has_mlflow, 'mlflow' in sys.modules); "
            "import mlflow; print(mlflow.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-3:] == ["False", "False", "mlflow"]
