"""The warm start end to end on the tiny-random model: the tools template's scripted player, a
2-step warm start through the real DeepSpeed engine, then 2 RL steps with real HF rollouts and
checkpoints. Its first loss equals the NLL computed here independently from the base model; a
run stopped after the warm start (`warm_start_only`) and resumed ends bit-identical to one that
never stopped."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "src" / "ragen_cli" / "templates" / "tools"
TINY = [
    "model.name=tiny-random", "model.lora=null", "rollout.backend=hf", "deepspeed.precision=fp32",
    "env.train.groups=2", "env.train.group_size=2", "algorithm.filter.keep_ratio=0.5", "train.micro_batch=2",
    "train.steps=2", "env.val.episodes=2", "env.val.every=2", "checkpoint.every=1", "checkpoint.keep=4",
    "rollout.max_tokens_per_turn=16", "warm_start.episodes=4", "warm_start.steps=2", "warm_start.batch=4",
    "warm_start.lr=1e-3", "warm_start.eval_samples=2", "monitor.collapse.every=0",
]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("tools")
    for name in ("data.jsonl", "val.jsonl", "my_tools.py", "my_rewards.py", "my_expert.py", "ragen.yaml"):
        (root / name).write_bytes((TEMPLATE / name).read_bytes())
    return root


def run(project: Path, name: str, resume: bool = False, warm_start_only: bool = False) -> dict:
    import os

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    cwd, path = os.getcwd(), list(sys.path)
    os.chdir(project)
    sys.path.insert(0, str(project))
    try:
        spec = load_spec(project / "ragen.yaml", TINY + [f"output.dir={project / 'runs'}", f"name={name}"])
        return train(spec, compile_plan(spec, device="cpu"), project / "runs" / name, resume=resume,
                     warm_start_only=warm_start_only)
    finally:
        os.chdir(cwd)
        sys.path[:] = path


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def whole(project) -> Path:
    summary = run(project, "whole")
    assert summary["step"] == 2 and "success" in summary["warm_start"]
    return project / "runs" / "whole"


def test_the_warm_start_trains_then_rl_goes_on(whole):
    warm = rows(whole / "warm_start" / "metrics.jsonl")
    assert [r["step"] for r in warm] == [1, 2]
    assert all(math.isfinite(r["warm/loss"]) and 0 <= r["warm/token_accuracy"] <= 1 for r in warm)
    assert (whole / "warm_start" / "checkpoints" / "step-2" / "state.json").is_file()
    assert len(rows(whole / "warm_start" / "demos-round-0.jsonl")) == 4  # the player solves every row
    events = rows(whole / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds.index("warm_start") < kinds.index("val")  # the RL start is evaluated before RL's step 0
    start = next(e for e in events if e["kind"] == "warm_start")
    assert {"success", "pass@1", "pass@2", "episodes"} <= start.keys() and start["episodes"] == 2
    assert [r["step"] for r in rows(whole / "metrics.jsonl") if "reward/mean" in r] == [1, 2]
    # every validation episode is kept (env.val.every 2: steps 0 and 2, 2 episodes each), and
    # the saved episodes are the ones the val event's success was computed from
    for val in (e for e in events if e["kind"] == "val"):
        episodes = rows(whole / "val_trajectories" / f"step-{val['step']}.jsonl")
        success = next(v for k, v in val.items() if k.startswith("val/") and k.endswith("/success"))
        assert len(episodes) == 2 and sum(e["success"] for e in episodes) / 2 == success
    assert sorted(p.name for p in (whole / "val_trajectories").iterdir()) == ["step-0.jsonl", "step-2.jsonl"]
    assert (whole / "checkpoints" / "step-2" / "state.json").is_file()
    assert json.loads((whole / "checkpoints" / "step-2" / "state.json").read_text())["warm_done"] is True


def test_the_first_warm_loss_is_the_base_model_s_nll_of_its_rows(whole, tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_cli.train.warm_start import step_rows, trajs_from_jsonl

    demos = trajs_from_jsonl((whole / "warm_start" / "demos-round-0.jsonl").read_text())
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    nll, count = 0.0, 0
    for i in step_rows(len(demos), 4, 1, 42):  # train.seed 42: the rows of step 1
        ids = torch.tensor([demos[i].input_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
        target, mask = ids[0, 1:], torch.tensor(demos[i].loss_mask[1:], dtype=torch.bool)
        nll -= float(logp[torch.arange(len(target)), target][mask].sum())
        count += int(mask.sum())
    first = rows(whole / "warm_start" / "metrics.jsonl")[0]
    assert first["warm/tokens"] == count
    assert first["warm/loss"] == pytest.approx(nll / count, rel=1e-4)


def test_a_run_stopped_after_the_warm_start_resumes_exactly(project, whole):
    from safetensors.torch import load_file

    import torch

    summary = run(project, "split", warm_start_only=True)
    split = project / "runs" / "split"
    assert summary["step"] == 0 and not (split / "checkpoints").exists()
    assert [e["kind"] for e in rows(split / "events.jsonl")][-1] == "end"
    run(project, "split", resume=True)
    for ckpt in ("warm_start/checkpoints/step-2", "checkpoints/step-2"):
        a = load_file(str(next((whole / ckpt / "model").glob("*.safetensors"))))
        b = load_file(str(next((split / ckpt / "model").glob("*.safetensors"))))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), ckpt
    assert (whole / "trajectories" / "step-2.jsonl").read_text() == (split / "trajectories" / "step-2.jsonl").read_text()


def test_rejection_sampling_trains_on_the_model_s_own_best_episodes_in_rounds(project):
    import os

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train
    from ragen_cli.train.warm_start import trajs_from_jsonl

    cwd = os.getcwd()
    os.chdir(project)
    sys.path.insert(0, str(project))
    try:  # the tiny model never answers right: min_return -100 passes every episode, the best one per state kept
        spec = load_spec(project / "ragen.yaml", TINY + [
            f"output.dir={project / 'runs'}", "name=rejection", "warm_start.policy=null", "warm_start.rejection=true",
            "warm_start.rounds=2", "warm_start.episodes=2", "warm_start.min_return=-100", "warm_start.eval_samples=0"])
        train(spec, compile_plan(spec, device="cpu"), project / "runs" / "rejection", warm_start_only=True)
    finally:
        os.chdir(cwd)
        sys.path.remove(str(project))
    warm = project / "runs" / "rejection" / "warm_start"
    assert [r["warm/round"] for r in rows(warm / "metrics.jsonl")] == [0.0, 1.0]  # 2 steps in 2 rounds
    for r in (0, 1):
        demos = trajs_from_jsonl((warm / f"demos-round-{r}.jsonl").read_text())
        assert sorted(d.group for d in demos) == [0, 1]  # one per state: 2 states x group_size 2 played
        assert sorted(d.seed for d in demos) == [1_010_000 + 2 * r, 1_010_001 + 2 * r]  # each round: its own seeds
        assert all(any(m == 1 for m in d.loss_mask) and d.messages for d in demos)
