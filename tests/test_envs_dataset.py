"""The dataset adapter (envs/adapters/dataset_env.py) on real files: jsonl, csv, parquet and a
`datasets` folder; TRL-signature reward functions from a module the test writes; row order by
seed; multi-turn feedback; every failure with its message; a run that stops on a raising reward
function after saving the last finished step."""

from __future__ import annotations

import json
import textwrap

import pytest

from ragen_cli.envs.adapters.dataset_env import RewardFunctionError, load_rows
from ragen_cli.envs.registry import check_env, make_env

ROWS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b), "level": a % 2} for a, b in
        [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]]

REWARDS = '''
def correct(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]

def short(prompts, completions, **kwargs):
    return [None if len(c) > 3 else 0.5 for c in completions]

def hint(prompt, completion, answer, **kwargs):
    return None if completion.strip() == answer else "Not quite. Try again."

def boom(prompts, completions, **kwargs):
    raise KeyError("no such column")

def not_a_list(prompts, completions, **kwargs):
    return 1.0
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A directory with the data in every format and a reward module, as the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(REWARDS))
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "data.csv").write_text("prompt,answer,level\n" + "".join(
        f"\"{r['prompt']}\",{r['answer']},{r['level']}\n" for r in ROWS))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(ROWS), str(tmp_path / "data.parquet"))
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_list(ROWS), "validation": Dataset.from_list(ROWS[:2])}).save_to_disk(
        str(tmp_path / "saved"))
    yield tmp_path
    import sys

    sys.modules.pop("my_rewards", None)


def cfg(**kw):
    return {"path": "data.jsonl", "rewards": ["my_rewards:correct"], "shuffle": False, **kw}


@pytest.mark.parametrize("path,split", [("data.jsonl", None), ("data.csv", None), ("data.parquet", None),
                                        ("saved", "train")])
def test_every_format_reads_the_same_rows(project, path, split):
    rows = load_rows(path, split)
    assert [r["prompt"] for r in rows] == [r["prompt"] for r in ROWS]
    assert [str(r["answer"]) for r in rows] == ["3", "7", "11", "15", "19"]
    assert len(load_rows("saved", "validation")) == 2


def test_a_correct_answer_scores_the_weighted_sum(project):
    env = make_env("dataset", cfg(rewards=["my_rewards:correct", "my_rewards:short"], weights=[1.0, 2.0]))
    obs, _ = env.reset(seed=1)  # shuffle off: seed 1 -> row 1
    assert obs == "What is 3 + 4?" and env.instruction() == "Answer the question." and env.valid_actions() == []
    _, reward, terminated, truncated, info = env.step("7")
    # correct 1.0 x 1 + short ("7" has 1 char <= 3) 0.5 x 2 = 2.0
    assert (reward, terminated, truncated) == (2.0, True, False)
    assert info["reward_fns"] == {"correct": 1.0, "short": 0.5} and info["success"]  # 2.0 >= 1.0
    env.reset(seed=6)  # 6 mod 5 = row 1 again
    _, reward, *_, info = env.step("seven")  # correct 0; short None (5 chars): left out of the sum
    assert reward == 0.0 and info["reward_fns"] == {"correct": 0.0, "short": None} and not info["success"]


def test_seeds_walk_a_fixed_permutation(project):
    a = [make_env("dataset", cfg(shuffle=True)) for _ in range(2)]
    firsts = [[e.reset(seed=s)[0] for s in range(5)] for e in a]
    assert firsts[0] == firsts[1]  # the same order every time
    assert sorted(firsts[0]) == sorted(r["prompt"] for r in ROWS)  # 5 seeds visit all 5 rows once
    assert firsts[0] != [r["prompt"] for r in ROWS]  # shuffled (seed 0's permutation of 5 is not identity)


def test_feedback_makes_a_multi_turn_episode(project):
    env = make_env("dataset", cfg(feedback="my_rewards:hint", max_actions=3))
    env.reset(seed=0)  # 1 + 2
    obs, r, term, trunc, _ = env.step("4")
    assert (obs, r, term, trunc) == ("Not quite. Try again.", 0.0, False, False)
    obs, r, term, trunc, info = env.step("3")
    assert (r, term, info["success"], info["reward_fns"]) == (1.0, True, True, {"correct": 1.0})
    env.reset(seed=0)
    for guess in ("1", "2"):
        env.step(guess)
    *_, term, trunc, info = env.step("5")  # the third wrong answer uses the budget: truncated
    assert (term, trunc, info["success"]) == (False, True, False)


@pytest.mark.parametrize("config,message", [
    ({"path": "nope.jsonl"}, "no such data file or folder: nope.jsonl"),
    ({"prompt_field": "question"}, "no column 'question' (prompt_field); columns: answer, level, prompt"),
    ({"rewards": []}, "rewards is required"),
    ({"rewards": ["my_rewards"]}, "reward function must be written module:name, got 'my_rewards'"),
    ({"rewards": ["my_rewards:nothing"]}, "reward function 'my_rewards:nothing': module 'my_rewards' has no attribute 'nothing'"),
    ({"rewards": ["no_such_module:f"]}, "reward function 'no_such_module:f': cannot import module 'no_such_module'"),
    ({"weights": [1.0, 2.0]}, "weights has 2 values for 1 reward functions"),
    ({"max_actions": 2}, "max_actions > 1 needs feedback"),
    ({"path": "saved"}, "holds splits train, validation: set split"),
    ({"path": "data.txt"}, "unknown data format '.txt'"),
])
def test_bad_configs_are_named(project, config, message):
    (project / "data.txt").write_text("x\n")
    problems = check_env("dataset", cfg(**config))
    assert len(problems) == 1 and message in problems[0], problems


def test_a_garbled_jsonl_line_is_named(project):
    (project / "bad.jsonl").write_text('{"prompt": "a", "answer": "1"}\n{"prompt": \n')
    assert "bad.jsonl:2: not a JSON object" in check_env("dataset", cfg(path="bad.jsonl"))[0]


def test_a_reward_function_that_fails_names_itself_and_the_row(project):
    env = make_env("dataset", cfg(rewards=["my_rewards:boom"]))
    env.reset(seed=3)
    with pytest.raises(RewardFunctionError, match=r"boom raised on row 3 of data.jsonl \(episode seed 3\): "
                                                  r"KeyError: 'no such column'"):
        env.step("15")
    env = make_env("dataset", cfg(rewards=["my_rewards:not_a_list"]))
    env.reset(seed=0)
    with pytest.raises(RewardFunctionError, match="not_a_list must return a list with one value per completion"):
        env.step("3")


def test_per_function_means_reach_the_metrics(project):
    from ragen_cli.monitor.metrics import validate_metrics
    from ragen_cli.rollout.driver import reward_fn_means
    from ragen_cli.rollout.types import Trajectory

    trajs = [Trajectory(info={"reward_fns": {"correct": 1.0, "short": None}}),
             Trajectory(info={"reward_fns": {"correct": 0.0, "short": 0.5}}), Trajectory()]
    means = reward_fn_means(trajs)
    assert means == {"reward/fn/correct": 0.5, "reward/fn/short": 0.5}  # short: its one value
    assert validate_metrics(means) == []


def test_rollouts_through_the_driver(project, tiny_model_dir):
    """The adapter behind the driver's protocol: P=2 rows x N=2 samples on the tiny model."""
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.driver import rollout_stats, run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    tok = load_tokenizer(tiny_model_dir)
    backend = HFBackend(load_causal_lm(tiny_model_dir, "float32"), tok)
    rollout = RolloutSpec(max_turns=1, max_actions_per_turn=1, max_tokens_per_turn=6, think=False)
    trajs = run_rollouts(backend, tok, EnvRef(name="dataset", config=cfg()), [0, 1], 2, rollout, 1024, 0)
    assert len(trajs) == 4 and all(len(t.turns) == 1 for t in trajs)
    stats = rollout_stats(trajs, 1.0)
    scored = [t for t in trajs if t.info.get("reward_fns")]
    if scored:  # replies that parse were scored by the function (random weights rarely say "3")
        assert stats["reward/fn/correct"] == sum(t.info["reward_fns"]["correct"] for t in scored) / len(scored)


@pytest.mark.slow
def test_a_failing_reward_function_stops_the_run_after_a_checkpoint(project, tiny_model_dir):
    """A real run: step 1 trains; at step 2 the reward function raises (it fails from its second
    call on row 1 onward: a module-level counter). The run saves step 1, records the error naming
    the function and the row, and raises RewardFunctionError."""
    (project / "flaky.py").write_text(textwrap.dedent('''
        calls = {"n": 0}
        def reward(prompts, completions, **kwargs):
            calls["n"] += len(completions)
            if calls["n"] > 4:   # step 1 has 2 rows x 2 answers = 4 calls
                raise ValueError("lost the answer key")
            return [0.0 if i % 2 else 1.0 for i in range(len(completions))]
        '''))
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    spec_path = project / "spec.yaml"
    spec_path.write_text(textwrap.dedent(f'''
        name: ds
        model: {{name: tiny-random, max_context: 512, lora: null}}
        env:
          train: {{name: dataset, config: {{path: data.jsonl, rewards: ["flaky:reward"], shuffle: false}},
                  groups: 2, group_size: 2}}
          val: {{every: 0}}
        rollout: {{backend: hf, max_turns: 1, max_actions_per_turn: 1, max_tokens_per_turn: 4, think: false,
                  prompt_allowance: 256}}
        algorithm: {{adv_estimator: grpo, filter: {{keep_ratio: 1.0}}, mini_batches: 1}}
        train: {{steps: 3, micro_batch: 4}}
        deepspeed: {{precision: fp32}}
        checkpoint: {{every: 0}}
        output: {{dir: {project}}}
        '''))
    spec = load_spec(spec_path)
    with pytest.raises(RewardFunctionError, match="reward raised on row"):
        train(spec, compile_plan(spec, device="cpu"), project / "ds")
    events = [json.loads(line) for line in (project / "ds" / "events.jsonl").read_text().splitlines()]
    error = events[-1]
    assert error["kind"] == "error" and error["step"] == 1 and "lost the answer key" in error["error"]
    assert error["checkpoint"].endswith("step-1") and (project / "ds" / "checkpoints" / "step-1" / "model").is_dir()
    # the seed cursor of the saved state has moved past step 1's 2 seeds only (first seed 10000):
    # a resumed run replays the failed step's seeds instead of skipping them
    state = json.loads((project / "ds" / "checkpoints" / "step-1" / "state.json").read_text())
    assert state["cursor"] == 10002
