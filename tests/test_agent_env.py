"""Your own agent program as the env (envs/adapters/agent_env.py, rollout/agent_driver.py; issue
74): agents written with the real `openai` client play episodes against the policy on ragen's
endpoint, through `run_rollouts` as every caller uses it; failures are failed episodes, a batch
that only fails stops with the agent's own frame; and a real 2-step `train` learns from an
agent that makes two model calls an episode, on exact per-request rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

AGENT = '''
import time


def larger(client, row):
    """The larger-number task as a 10-line agent: ask, read the reply, score it here."""
    reply = client.chat.completions.create(model="policy", messages=[
        {"role": "system", "content": "Compare the two numbers."},
        {"role": "user", "content": row["prompt"] + " Reply with the larger number only."}])
    text = reply.choices[0].message.content
    return 1.0 if row["answer"] in text else 0.0


def two_calls(client, row):
    """Two model calls a conversation; the reward functions score the last reply (returns None)."""
    messages = [{"role": "user", "content": row["prompt"]}]
    first = client.chat.completions.create(model="policy", messages=messages).choices[0].message
    messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": "Are you sure?"}]
    client.chat.completions.create(model="policy", messages=messages)
    return None


def raises(client, row):
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": row["prompt"]}])
    raise RuntimeError("the agent's own bug")


def silent(client, row):
    return 1.0


def hangs(client, row):
    time.sleep(30)


def odd_then_fine(client, row):
    if int(row["answer"]) % 2:
        raise KeyError("odd")
    client.chat.completions.create(model="policy", messages=[{"role": "user", "content": row["prompt"]}])
    return 0.5
'''

ROWS = [{"prompt": "Which number is larger: 47 or 83?", "answer": "83"},
        {"prompt": "Which number is larger: 12 or 5?", "answer": "12"},
        {"prompt": "Which number is larger: 9 or 31?", "answer": "31"},
        {"prompt": "Which number is larger: 70 or 64?", "answer": "70"}]


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "my_agent.py").write_text(AGENT, encoding="utf-8")
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_agent", raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def engine(tiny_hf):
    return tiny_hf


def rollouts(engine, entry: str, seeds=(0, 1), group_size=2, **config):
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    backend, _, tok = engine
    env = EnvRef(name="agent", config={"entry": f"my_agent:{entry}", "path": "data.jsonl", "shuffle": False, **config})
    return run_rollouts(backend, tok, env, list(seeds), group_size, RolloutSpec(max_tokens_per_turn=6), 1024, 5)


def test_an_agent_s_episodes_become_trajectories_with_its_rewards(project, engine):
    trajs = rollouts(engine, "larger")
    assert [(t.group, t.seed) for t in trajs] == [(0, 0), (0, 0), (1, 1), (1, 1)]
    assert all(t.info["agent_requests"] == 1 and t.info["agent_failed"] == 0 for t in trajs)
    assert all(len(t.turns) == 1 and t.num_generated > 0 for t in trajs)
    # the reward is what the agent returned: tiny-random's six tokens name no number
    assert [t.episode_reward for t in trajs] == [0.0] * 4


def test_reward_functions_score_the_last_reply_when_the_agent_returns_none(project, engine):
    from ragen_cli.rollout.driver import rollout_stats

    trajs = rollouts(engine, "two_calls", rewards=["ragen_cli.envs.rewards:first_number"])
    assert all(t.info["agent_requests"] == 2 and t.info["agent_new_rows"] == 0 for t in trajs)
    assert all(t.turn_prompts == [None, None] for t in trajs)  # stitched: one token list
    assert all("reward_fns" in t.info for t in trajs)
    stats = rollout_stats(trajs, 1.0)
    assert (stats["agent/requests"], stats["agent/failed_ratio"], stats["agent/new_row_ratio"]) == (2.0, 0.0, 0.0)
    # without rewards: a None reward is a failed episode saying why
    with pytest.raises(Exception, match="every agent episode of the batch failed .4 of 4.; the last: ValueError: "
                                        "my_agent:two_calls returned None and the agent env has no rewards"):
        rollouts(engine, "two_calls")


@pytest.mark.parametrize("entry, why", [
    ("raises", r"RuntimeError: the agent's own bug \(at .*my_agent.py:\d+ in raises\)"),
    ("silent", r"the agent made no request to the model"),
    ("hangs", r"TimeoutError: the episode ran past timeout_s = 1 s"),
])
def test_an_agent_that_only_fails_stops_the_batch_naming_its_own_frame(project, engine, entry, why):
    from ragen_cli.rollout.agent_driver import AgentFailure

    with pytest.raises(AgentFailure, match=why):
        rollouts(engine, entry, timeout_s=1.0)


def test_failed_episodes_are_counted_and_not_trained(project, engine):
    from ragen_cli.rollout.driver import rollout_stats

    # rows 0..3 in file order: answers 83 (odd: fails), 12, 31 (odd), 70
    trajs = rollouts(engine, "odd_then_fine", seeds=(0, 1, 2, 3), group_size=1)
    assert [t.info["agent_failed"] for t in trajs] == [1, 0, 1, 0]
    assert "KeyError: 'odd' (at " in trajs[0].info["agent_error"] and trajs[0].num_generated == 0
    assert [t.episode_reward for t in trajs] == [0.0, 0.5, 0.0, 0.5]
    assert rollout_stats(trajs, 1.0)["agent/failed_ratio"] == 0.5


def test_bad_agent_configs_are_spec_errors(project):
    from ragen_cli.envs.registry import check_env

    assert any("entry is required" in p for p in check_env("agent", {"path": "data.jsonl"}))
    assert any("has no attribute 'nope'" in p for p in check_env("agent", {"path": "data.jsonl", "entry": "my_agent:nope"}))
    assert check_env("agent", {"path": "data.jsonl", "entry": "my_agent:larger"}) == []


SPEC = """\
name: agent-run
model: {{name: tiny-random, max_context: 1024}}
env:
  train:
    name: agent
    config: {{entry: "my_agent:two_calls", path: data.jsonl, rewards: ["ragen_cli.envs.rewards:first_number"]}}
    groups: 2
    group_size: 2
  val: {{every: 0}}
rollout: {{backend: hf, max_tokens_per_turn: 6}}
algorithm: {{adv_estimator: grpo, filter: {{keep_ratio: 1.0}}, mini_batches: 1, kl_coef: 0.0}}
train: {{steps: 2, micro_batch: 4, lr_actor: 1.0e-3}}
deepspeed: {{precision: fp32}}
output: {{dir: {out}}}
"""


def test_ragen_train_runs_an_agent_on_exact_per_request_rows(project):
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    (project / "agent.yaml").write_text(SPEC.format(out=project / "runs"), encoding="utf-8")
    spec = load_spec(project / "agent.yaml")
    plan = compile_plan(spec, device="cpu")
    assert plan.turn_rows  # every request is its own row
    train(spec, plan, project / "runs" / "agent-run")
    metrics = [json.loads(line) for line in (project / "runs" / "agent-run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["agent/requests"] == 2.0 and m["agent/failed_ratio"] == 0.0 for m in metrics)
    # each saved episode holds its two requests as two turns (rows exact: tests/test_endpoint.py)
    saved = [json.loads(line) for line in (project / "runs" / "agent-run" / "trajectories" / "step-1.jsonl")
             .read_text().splitlines()]
    assert saved and all(len(t["turns"]) == 2 for t in saved)
