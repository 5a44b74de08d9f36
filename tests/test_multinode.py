"""Several nodes, each starting its own ranks (`ragen train --node-rank R`).

The slow test runs docs/training.md's "Several nodes" section as written, on one machine: its
hostfile (node0 as 127.0.0.1, node1 as localhost), its spec values (the tiny Bandit run of
test_train_multiproc around them: tiny-random, HF rollouts, 2 groups x 2, one CPU process a
node, gloo), its commands, one `ragen train` per node, each a real DeepSpeed launcher with
--no_ssh. An uninterrupted 4-step run is the reference; a second run loses node1 (its whole
process tree SIGKILLed, as a dead machine) once the step-2 checkpoint is written, node0 must stop
on its own, and the docs' resume commands must finish steps 3 and 4 exactly as the reference did.
The fast tests pin the launch command, the node-rank checks and the join rules."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from test_train_kill import alive, descendants_of
from test_train_multiproc import free_port

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "bandit.yaml"
RAGEN = Path(sys.executable).parent / "ragen"
HOSTS = {"node0": "127.0.0.1", "node1": "localhost"}  # two names this machine resolves to itself
# the rest of the spec, "as for one machine": the 2-rank run of test_train_multiproc, 4 steps
TINY = ["model.name=tiny-random", "model.lora=null", "env.train.groups=2", "env.train.group_size=2",
        "algorithm.filter.keep_ratio=1.0", "algorithm.filter.include_zero=true", "algorithm.adv_estimator=grpo",
        "rollout.backend=hf", "rollout.max_tokens_per_turn=8", "train.micro_batch=1", "deepspeed.precision=fp32",
        "env.val.every=0", "train.lr_actor=1e-3", "train.steps=4"]


def doc_section() -> str:
    text = (ROOT / "docs" / "training.md").read_text()
    return text.split("\n## Several nodes\n", 1)[1].split("\n## ", 1)[0]


def doc_block(lang: str, index: int = 0) -> str:
    return re.findall(rf"```{lang}\n(.*?)```", doc_section(), re.S)[index]


def flatten(tree: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for key, value in tree.items():
        out += flatten(value, f"{prefix}{key}.") if isinstance(value, dict) else [(f"{prefix}{key}", value)]
    return out


class Cluster:
    """The docs' two nodes on this machine: a working directory holding the docs' hostfile (its
    names mapped by HOSTS), the docs' spec values (output.dir and master_port made this test's),
    and each node's command from the docs' bash blocks."""

    def __init__(self, work: Path, out: Path):
        work.mkdir(parents=True)
        hostfile = doc_block("text")
        for name, address in HOSTS.items():
            hostfile = hostfile.replace(name, address)
        (work / "hostfile").write_text(hostfile)
        values = dict(flatten(yaml.safe_load(doc_block("yaml"))))
        self.shared = values["output.dir"]
        values.update({"output.dir": str(out), "deepspeed.master_port": free_port()})
        self.name = values["name"]
        self.work, self.out, self.run_dir = work, out, out / self.name
        self.sets = [x for key, value in values.items() for x in ("--set", f"{key}={value}")]
        self.sets += [x for s in TINY for x in ("--set", s)]
        self.env = {**os.environ, "RAGEN_DS_SHM_COMM": "0"}  # gloo all-reduce: no C++ build in the test

    def commands(self, block: int) -> dict[str, list[str]]:
        """node -> argv of the docs' bash block `block` (0: train, 1: resume)."""
        out = {}
        for line in doc_block("bash", block).strip().splitlines():
            command, node = line.split("#")
            argv = shlex.split(command.replace(self.shared, str(self.out)))
            assert argv[:2] == ["ragen", "train"]
            argv = [str(RAGEN), *argv[1:]]
            if "spec.yaml" in argv:
                i = argv.index("spec.yaml")
                argv[i:i + 1] = [str(SPEC), *self.sets]
            out[node.strip().removeprefix("on ")] = argv
        return out

    def start(self, block: int) -> dict[str, subprocess.Popen]:
        logs = {node: open(self.out.parent / f"{self.out.name}-{block}-{node}.log", "w") for node in HOSTS}
        return {node: subprocess.Popen(argv, cwd=self.work, env=self.env, stdout=logs[node], stderr=subprocess.STDOUT)
                for node, argv in self.commands(block).items()}

    def log(self, block: int, node: str) -> str:
        return (self.out.parent / f"{self.out.name}-{block}-{node}.log").read_text()[-3000:]


def finish(procs: dict[str, subprocess.Popen], cluster: Cluster, block: int, timeout: float = 300) -> None:
    for node, proc in procs.items():
        assert proc.wait(timeout=timeout) == 0, f"{node}:\n{cluster.log(block, node)}"


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def same_metrics(row: dict) -> dict:
    """A metrics row without its clock readings (time, timing/*, rates per second)."""
    return {k: v for k, v in row.items() if k != "time" and not k.startswith("timing/") and not k.endswith("_per_s")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_model_dir) -> Path:
    """The docs' run on both nodes, uninterrupted: its run directory."""
    ref = Cluster(tmp_path_factory.mktemp("ref") / "work", tmp_path_factory.mktemp("ref") / "runs")
    finish(ref.start(0), ref, 0)
    return ref.run_dir


@pytest.mark.slow
def test_two_nodes_train_in_lockstep(reference):
    events = jsonl(reference / "events.jsonl")
    assert events[0]["kind"] == "start" and events[0]["world_size"] == 2
    end = events[-1]
    assert end["kind"] == "end" and end["step"] == 4 and len(end["rank_checksums"]) == 2
    assert end["rank_checksums"][0] == end["rank_checksums"][1]
    # rank 0's rollout metrics count both nodes' episodes: 2 groups x 2 rollouts, one group on each
    assert [m["train/episodes"] for m in jsonl(reference / "metrics.jsonl")] == [4.0] * 4
    plan = json.loads((reference / "plan.json").read_text())  # node0's: its own launcher, no ssh
    assert plan["launch"]["argv"][:12] == ["deepspeed", "--num_nodes", "2", "--num_gpus", "1", "--hostfile", "hostfile",
                                           "--no_ssh", "--node_rank", "0", "--master_addr", "127.0.0.1"]


@pytest.mark.slow
@pytest.mark.parametrize("lost", ["node1", "node0"])
def test_a_lost_node_stops_both_and_both_resume_exactly(reference, tmp_path, lost):
    import torch

    from test_train_e2e import safetensors_state

    run = Cluster(tmp_path / "work", tmp_path / "runs")
    procs = run.start(0)
    other = next(node for node in procs if node != lost)
    step2 = run.run_dir / "checkpoints" / "step-2" / "state.json"
    deadline = time.monotonic() + 300
    while not step2.is_file():
        assert all(p.poll() is None for p in procs.values()) and time.monotonic() < deadline, run.log(0, "node0")
        time.sleep(0.05)
    dead = [procs[lost].pid, *descendants_of(procs[lost].pid)]  # the node dies: every process on it
    living = descendants_of(procs[other].pid)
    for pid in dead:
        os.kill(pid, signal.SIGKILL)
    procs[lost].wait()
    assert procs[other].wait(timeout=180) != 0, f"{other} went on without {lost}"  # its next collective failed
    time.sleep(1.0)
    left = [p for p in dead + living if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"processes left after {lost} was lost: {left}"
    assert [m["step"] for m in jsonl(run.run_dir / "metrics.jsonl")] == [1, 2]
    assert sorted(p.name for p in (run.run_dir / "checkpoints").glob("step-*")) == ["step-1", "step-2"]

    finish(run.start(1), run, 1)  # the docs' resume, on both nodes
    rows, ref_rows = jsonl(run.run_dir / "metrics.jsonl"), jsonl(reference / "metrics.jsonl")
    assert [m["step"] for m in rows] == [1, 2, 3, 4]
    assert [same_metrics(m) for m in rows[2:]] == [same_metrics(m) for m in ref_rows[2:]]
    for step in (3, 4):
        name = f"trajectories/step-{step}.jsonl"
        assert (run.run_dir / name).read_text() == (reference / name).read_text(), name
    resumed_end, end = jsonl(run.run_dir / "events.jsonl")[-1], jsonl(reference / "events.jsonl")[-1]
    assert resumed_end["kind"] == "end" and resumed_end["rank_checksums"] == end["rank_checksums"]
    wa = safetensors_state(run.run_dir / "checkpoints" / "step-4" / "model")
    wb = safetensors_state(reference / "checkpoints" / "step-4" / "model")
    w3 = safetensors_state(reference / "checkpoints" / "step-3" / "model")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any(not torch.equal(w3[k], wb[k]) for k in wb), "step 4 moved the weights: the comparison means something"


def spec_with(**deepspeed):
    from ragen_cli.spec.loader import load_spec

    return load_spec(SPEC, ["model.name=tiny-random", *(f"deepspeed.{k}={v}" for k, v in deepspeed.items())])


def test_each_node_runs_its_own_launcher(tmp_path, monkeypatch):
    from ragen_cli.compile.launch import launch_command, node_rank_problem

    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("# node 0 first\nnode-a slots=2\nnode-b slots=2  # the second\n")
    spec = spec_with(nodes=2, procs_per_node=2, hostfile="hosts", master_port=29555)
    head = ["deepspeed", "--num_nodes", "2", "--num_gpus", "2", "--hostfile", "hosts"]
    tail = ["--master_port", "29555", "--module", "ragen_cli.train.worker", "{run_dir}"]
    assert launch_command(spec).argv == (*head, *tail)  # node 0 starts every node through ssh
    # with a node rank: no ssh, this node's rank, node 0 (the hostfile's first host) as the master
    assert launch_command(spec, 1).argv == (*head, "--no_ssh", "--node_rank", "1", "--master_addr", "node-a", *tail)
    assert node_rank_problem(spec, None) == node_rank_problem(spec, 0) == node_rank_problem(spec, 1) == ""
    assert node_rank_problem(spec, 2) == "--node-rank 2 is not a node of this run: deepspeed.nodes = 2, so 0 to 1"
    assert node_rank_problem(spec, -1).startswith("--node-rank -1 is not a node")
    assert node_rank_problem(spec_with(), 0) == "--node-rank is for a run on several nodes, and deepspeed.nodes is 1"


def test_train_refuses_a_node_rank_outside_the_run(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ragen_cli.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "hostfile").write_text("node0 slots=1\nnode1 slots=1\n")
    sets = ["--set", "model.name=tiny-random", "--set", "deepspeed.nodes=2", "--set", "deepspeed.hostfile=hostfile"]
    result = CliRunner().invoke(app, ["train", str(SPEC), *sets, "--node-rank", "2", "--dry-run"])
    assert result.exit_code == 2 and "--node-rank 2 is not a node of this run" in result.output
    result = CliRunner().invoke(app, ["train", str(SPEC), "--set", "model.name=tiny-random", "--node-rank", "0"])
    assert result.exit_code == 2 and "deepspeed.nodes is 1" in result.output
    result = CliRunner().invoke(app, ["train", str(SPEC), *sets, "--node-rank", "1", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    argv = json.loads(result.stdout)["launch"]["argv"]
    assert argv[7:12] == ["--no_ssh", "--node_rank", "1", "--master_addr", "node0"]


def test_a_node_joins_only_node_zeros_run_directory(tmp_path):
    from ragen_cli.train.job import JoinFailed, join_run

    run = tmp_path / "run"
    with pytest.raises(JoinFailed, match="never saw it: a run on several nodes needs its run directory"):
        join_run(run, "spec\n", resume=False, node_rank=1, timeout_s=0)  # not shared, or node 0 never came
    run.mkdir()
    (run / "spec.yaml").write_text("spec\n")
    with pytest.raises(JoinFailed, match="never saw it"):
        join_run(run, "spec\n", resume=False, node_rank=1, timeout_s=0)  # spec.yaml without plan.json yet
    (run / "plan.json").write_text("{}\n")
    join_run(run, "spec\n", resume=False, node_rank=1, timeout_s=0)  # node 0 wrote both: join
    with pytest.raises(JoinFailed, match="differs from this node's spec"):
        join_run(run, "other\n", resume=False, node_rank=1, timeout_s=60)  # at once, no wait
    with pytest.raises(JoinFailed, match="waited 0 s for .* to match this node's spec"):
        join_run(run, "other\n", resume=True, node_rank=1, timeout_s=0)  # resuming: node 0 may rewrite it
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(JoinFailed, match="already trained; node 0 refuses it too"):
        join_run(run, "spec\n", resume=False, node_rank=1, timeout_s=60)
    join_run(run, "spec\n", resume=True, node_rank=1, timeout_s=0)


def test_the_docs_section_is_what_the_slow_test_runs(tmp_path):
    # The docs' hostfile, spec values and per-node commands, as the slow test reads them: a doc edit
    # that breaks their shape fails here, without the slow run.
    cluster = Cluster(tmp_path / "work", tmp_path / "runs")
    assert (tmp_path / "work" / "hostfile").read_text() == "127.0.0.1 slots=1\nlocalhost slots=1\n"
    assert cluster.shared == "/shared/runs" and cluster.run_dir == tmp_path / "runs" / "two-nodes"
    train, resume = cluster.commands(0), cluster.commands(1)
    assert sorted(train) == sorted(resume) == ["node0", "node1"]
    for rank, node in enumerate(["node0", "node1"]):
        assert train[node][-2:] == resume[node][-2:] == ["--node-rank", str(rank)]
        assert resume[node][1:4] == ["train", "--resume", str(cluster.run_dir)]
        assert train[node][1:3] == ["train", str(SPEC)] and "deepspeed.nodes=2" in train[node]
