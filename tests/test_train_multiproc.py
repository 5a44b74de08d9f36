"""Two CPU processes through the Plan's launch command (the `deepspeed` launcher running
`ragen_cli.train.worker`): both ranks train in lockstep, so their parameters are identical
afterwards (checked from the per-rank checksums in the `end` event)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest


SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_two(tmp_path: Path, name: str, extra: list[str], spec: Path = SPEC, timeout: float = 600,
              resume: bool = False) -> subprocess.CompletedProcess:
    """`ragen train` of tiny-random on 2 CPU processes: 2 groups x 2 rollouts, all kept, micro 1
    (each rank trains 2 rows per step), plus `extra` --set values; `resume`: `--resume` the run."""
    sets = ["model.name=tiny-random", "model.lora=null", "env.train.groups=2", "env.train.group_size=2",
            "algorithm.filter.keep_ratio=1.0", "algorithm.filter.include_zero=true", "algorithm.adv_estimator=grpo", "rollout.backend=hf",
            "rollout.max_tokens_per_turn=8", "train.micro_batch=1", "deepspeed.precision=fp32",
            "deepspeed.procs_per_node=2", f"deepspeed.master_port={free_port()}", "env.val.every=0",
            "checkpoint.every=0", f"output.dir={tmp_path}", f"name={name}", *extra]
    ragen = Path(sys.executable).parent / "ragen"
    args = [str(ragen), "train", str(spec)] + [x for s in sets for x in ("--set", s)]
    if resume:
        args = [str(ragen), "train", "--resume", str(tmp_path / name)] + [x for s in extra for x in ("--set", s)]
    env = {**os.environ, "RAGEN_DS_SHM_COMM": "0"}  # gloo all-reduce: no C++ build in the test
    # its own session: a run past `timeout` (a hung rank) is ended with the launcher and its ranks
    with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_a_quiet_run_turns_off_the_launchers_info_lines():
    """Without --verbose the `deepspeed` launcher runs at --log_level=warning (its runner hands it
    to each node's launch.py); a level the command sets wins, and other commands are left alone."""
    from ragen_cli.quiet import quiet_launcher

    argv = ["/venv/bin/deepspeed", "--num_nodes", "1", "--num_gpus", "2", "--module", "ragen_cli.train.worker", "RUN"]
    assert quiet_launcher(argv) == ["/venv/bin/deepspeed", "--log_level=warning", *argv[1:]]
    assert quiet_launcher(["deepspeed", "--log_level=debug", "x"]) == ["deepspeed", "--log_level=debug", "x"]
    assert quiet_launcher(["torchrun", "x"]) == ["torchrun", "x"] and quiet_launcher([]) == []


@pytest.mark.slow
def test_two_processes_stay_identical(tmp_path, tiny_model_dir):
    proc = train_two(tmp_path, "mp", ["train.steps=2", "train.lr_actor=1e-3"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # quiet (no --verbose): the launcher's INFO lines ("[INFO] [launch.py:245:main] process ...
    # spawned with command") are off, its warning ("Unable to find hostfile") and ragen's lines stay
    console = proc.stdout + proc.stderr
    assert "[INFO]" not in console and "[WARNING] [runner.py" in console and "step 2/2" in console
    events = [json.loads(line) for line in (tmp_path / "mp" / "events.jsonl").read_text().splitlines()]
    start, end = events[0], events[-1]
    assert start["kind"] == "start" and start["world_size"] == 2
    assert end["kind"] == "end" and end["step"] == 2
    checks = end["rank_checksums"]
    assert len(checks) == 2 and checks[0] == checks[1]
    metrics = [json.loads(line) for line in (tmp_path / "mp" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and metrics[-1]["actor/grad_norm"] > 0
    # rank 0's rollout metrics count both ranks' episodes (2 groups x 2 rollouts; 2 each rank)
    assert [m["train/episodes"] for m in metrics] == [4.0, 4.0]
    assert (tmp_path / "mp" / "checkpoints" / "step-2" / "model" / "config.json").is_file()


@pytest.mark.slow
def test_two_processes_stay_identical_on_per_turn_rows(tmp_path, tiny_model_dir):
    # FrozenLake, 3 turns, a 1-turn window, one row per turn (rollout.update_context window): each
    # rank trains its share of the step's turn rows (padded to an even count) in lockstep.
    spec = SPEC.parent / "frozenlake.yaml"
    proc = train_two(tmp_path, "mpw", ["train.steps=1", "train.lr_actor=1e-3", "rollout.context_window=1",
                                       "rollout.update_context=window", "algorithm.mini_batches=1"], spec)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (tmp_path / "mpw" / "events.jsonl").read_text().splitlines()]
    end = events[-1]
    assert end["kind"] == "end" and end["step"] == 1 and end["rank_checksums"][0] == end["rank_checksums"][1]
    [metrics] = [json.loads(line) for line in (tmp_path / "mpw" / "metrics.jsonl").read_text().splitlines()]
    assert metrics["episode/turns"] > 1 and metrics["actor/grad_norm"] > 0


@pytest.mark.slow
def test_two_processes_take_one_health_decision(tmp_path, tiny_model_dir):
    # Greedy sampling: each group's 2 rollouts are identical, so every group has zero reward std
    # (a no-signal run): warning at step 1, collapse and stop at step 2 (empty_stop_steps 2).
    # Both ranks must stop at step 2 in lockstep; a rank that trained on would wait forever in
    # the next collective. (That the verdict is rank 0's even when the ranks' histories differ
    # is shown by test_health_verdict_is_rank_zeros.)
    proc = train_two(tmp_path, "mph", ["rollout.temperature=0", "train.steps=4", "monitor.health.no_signal_steps=1",
                                       "monitor.health.empty_stop_steps=2"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (tmp_path / "mph" / "events.jsonl").read_text().splitlines()]
    assert [(e["step"], e["level"]) for e in events if e["kind"] == "health"] == [(1, "warning"), (2, "collapse")]
    stops = [e for e in events if e["kind"] == "intervention"]
    assert [(e["step"], e["action"]) for e in stops] == [(2, "stop")]
    end = events[-1]
    assert end["kind"] == "end" and end["step"] == 2 and end["stopped"] is True
    assert len(end["rank_checksums"]) == 2 and end["rank_checksums"][0] == end["rank_checksums"][1]


def on_two_ranks(target, *args) -> list:
    """Run `target(rank, port, queue, *args)` in two spawned processes (rank 0 and 1 of a gloo group
    on `port`); the items they put on the queue, sorted."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=target, args=(r, port, out, *args)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return results


def _decide_on_rank(rank: int, port: int, out) -> None:
    """One of two gloo processes: a collapsed history on rank 0, a healthy one on rank 1."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from ragen_cli.monitor.tracker import HealthTracker
    from ragen_cli.spec.health_spec import HealthSpec
    from ragen_cli.train.runtime import health_decision

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    zero = 1.0 if rank == 0 else 0.1  # rank 0: every group without reward variance since step 1
    history = [{"step": t, "filter/zero_std_frac": zero} for t in range(1, 4)]
    cfg = HealthSpec(action="stop", no_signal_steps=1, empty_stop_steps=3)
    state = SimpleNamespace(history=history, keep_ratio=0.25, interventions=0, last_intervention_step=None)
    spec = SimpleNamespace(monitor=SimpleNamespace(health=cfg), algorithm=SimpleNamespace(filter=SimpleNamespace(strategy="top_k")))
    run = SimpleNamespace(spec=spec, state=state, rank=rank, world=2,
                          tracker=HealthTracker(), event=lambda *a, **k: None, say=lambda text: None)
    decision = health_decision(run, 3)
    out.put((rank, run.tracker.level, decision.action))
    dist.destroy_process_group()


def test_health_verdict_is_rank_zeros():
    # Rank 0's history says "no signal for 3 steps" (collapse, stop); rank 1's says nothing is
    # wrong. Each deciding alone would split (stop / continue); both take rank 0's verdict.
    results = on_two_ranks(_decide_on_rank)
    assert results == [(0, "collapse", "stop"), (1, "collapse", "stop")]


@pytest.mark.slow
def test_two_processes_each_with_its_own_vllm_engine(tmp_path, tiny_model_dir):
    """vLLM rollouts on 2 ranks: each rank's engine comes up through vLLM's external launcher
    (rollout.vllm_args.EXTERNAL_LAUNCHER; without it every rank's engine would take local rank 0's
    device), in the rank's own process, generates its share of the groups, takes the weight sync
    and passes the parity probe; the ranks stay in lockstep. A large entropy bonus moves the
    weights every step (the bandit's rewards here do not differ within a group), so a rank whose
    engine kept the old weights would fail the probe."""
    proc = train_two(tmp_path, "mpv", ["rollout.backend=vllm", "train.steps=2", "train.lr_actor=1e-2",
                                       "algorithm.entropy_coef=1.0"])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    engine_log = (tmp_path / "mpv" / "engine.log").read_text()  # the quiet console sends vLLM's lines there
    assert engine_log.count("Using external launcher for distributed inference") == 2
    events = [json.loads(line) for line in (tmp_path / "mpv" / "events.jsonl").read_text().splitlines()]
    assert events[0]["backend"] == "vllm" and events[0]["world_size"] == 2
    end = events[-1]
    assert end["kind"] == "end" and end["step"] == 2 and end["rank_checksums"][0] == end["rank_checksums"][1]
    metrics = [json.loads(line) for line in (tmp_path / "mpv" / "metrics.jsonl").read_text().splitlines()]
    assert [m["train/episodes"] for m in metrics] == [4.0, 4.0]
    assert all(m["actor/grad_norm"] > 1e-3 and m["sync/parity_gap"] < 1e-4 for m in metrics)


def _sync_on_rank(rank: int, port: int, out, broken: int | None) -> None:
    """One of two gloo processes judging its own engine's sync (the four-token probe of
    test_sync_parity: the update moves every log-prob -1 -> -1.5, the kernels add +-0.01): a fresh
    engine has gap 0.01 (ok), one that kept the old weights gap 0.5001 > 0.05 (off)."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from ragen_cli.rollout.parity import ParityError, judge_sync
    from ragen_cli.train.sync import agreed_sync

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    old, new, jitter = [-1.0] * 4, [-1.5] * 4, [0.01, -0.01, 0.01, -0.01]
    before = [o + j for o, j in zip(old, jitter)]
    after = before if rank == broken else [n + j for n, j in zip(new, jitter)]
    check = judge_sync(old, before, new, after, 0.05, 3.0)
    run = SimpleNamespace(rank=rank, world=2, spec=SimpleNamespace(
        rollout=SimpleNamespace(parity_threshold=0.05, parity_noise_factor=3.0)))
    try:
        got = agreed_sync(check, rank, 2, run.spec.rollout)
        out.put((rank, check.verdict, "passed", round(got.gap, 4)))
    except ParityError as exc:
        out.put((rank, check.verdict, "ParityError", str(exc)[:60]))
    dist.destroy_process_group()


@pytest.mark.parametrize("broken", [None, 1])
def test_every_rank_stops_when_one_ranks_engine_fails_the_sync_check(broken):
    # Each rank judges its own engine. When rank 1's kept the old weights, rank 0's own check
    # passes, yet both raise the same ParityError naming rank 1: a rank 0 that trained on would
    # wait forever in the step's next collective while rank 1 saves and stops.
    results = on_two_ranks(_sync_on_rank, broken)
    if broken is None:
        assert results == [(0, "ok", "passed", 0.01), (1, "ok", "passed", 0.01)]
        return
    said = "rank 1's engine: rollout engine and trainer disagree after the weight sync"[:60]
    assert results == [(0, "ok", "ParityError", said), (1, "off", "ParityError", said)]
