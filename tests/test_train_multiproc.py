"""Two CPU processes through the Plan's launch command (the `deepspeed` launcher running
`ragen_cli.train.worker`): both ranks train in lockstep, so their parameters are identical
afterwards (checked from the per-rank checksums in the `end` event)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_stay_identical(tmp_path, tiny_model_dir):
    # 2 groups x 2 rollouts, keep all 4; micro 1 x 2 ranks: each rank trains 2 rows per step.
    sets = ["model.name=tiny-random", "model.lora=null", "env.train.groups=2", "env.train.group_size=2",
            "algorithm.filter.keep_ratio=1.0", "algorithm.adv_estimator=grpo", "rollout.backend=hf",
            "rollout.max_tokens_per_turn=8", "train.micro_batch=1", "train.steps=2", "train.lr_actor=1e-3",
            "deepspeed.precision=fp32", "deepspeed.procs_per_node=2", f"deepspeed.master_port={free_port()}",
            "env.val.every=0", "checkpoint.every=0", f"output.dir={tmp_path}", "name=mp"]
    ragen = Path(sys.executable).parent / "ragen"
    args = [str(ragen), "train", str(SPEC)] + [x for s in sets for x in ("--set", s)]
    env = {**os.environ, "RAGEN_DS_SHM_COMM": "0"}  # gloo all-reduce: no C++ build in the test
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (tmp_path / "mp" / "events.jsonl").read_text().splitlines()]
    start, end = events[0], events[-1]
    assert start["kind"] == "start" and start["world_size"] == 2
    assert end["kind"] == "end" and end["step"] == 2
    checks = end["rank_checksums"]
    assert len(checks) == 2 and checks[0] == checks[1]
    metrics = [json.loads(line) for line in (tmp_path / "mp" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and metrics[-1]["actor/grad_norm"] > 0
    assert (tmp_path / "mp" / "checkpoints" / "step-2" / "model" / "config.json").is_file()
