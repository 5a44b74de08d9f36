"""The Gymnasium adapter (`env.train.name: gymnasium`) against real Gymnasium envs.

FrozenLake-v1's default 4x4 map (gymnasium's MAPS["4x4"]) is fixed, with the start top-left:

    SFFF
    FHFH
    FFFH
    HFFG

Actions 0..3 are Left, Down, Right, Up. Not slippery, Down Down Right Right Down Right walks
(0,0) -> (1,0) -> (2,0) -> (2,1) -> (2,2) -> (3,2) -> (3,3) = G, which pays 1 and ends the
episode; every other cell pays 0; Right then Down from the start falls into the hole at (1,1).
"""

from __future__ import annotations

import gymnasium
import pytest

from ragen_cli.envs.config import EnvConfigError
from ragen_cli.envs.registry import check_env, make_env
from ragen_cli.rollout.driver import run_rollouts
from ragen_cli.spec.models import EnvRef, RolloutSpec
from rollout_scripted import ScriptedBackend

NAMES = ["Left", "Down", "Right", "Up"]
LAKE = {"id": "FrozenLake-v1", "kwargs": {"is_slippery": False}, "action_names": NAMES}
PATH = ["Down", "Down", "Right", "Right", "Down", "Right"]


class ReverseEnv(gymnasium.Env):
    """Text in, text out: the observation is a word drawn from the seed, the action must be the
    word reversed (reward 1, ends the episode); any other word is a wrong answer (reward -0.5)."""

    WORDS = ("stressed", "drawer", "reward")
    metadata = {"render_modes": []}

    def __init__(self, penalty: float = -0.5):
        self.observation_space = gymnasium.spaces.Text(max_length=16)
        self.action_space = gymnasium.spaces.Text(max_length=16)
        self.penalty = penalty

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.word = self.WORDS[int(self.np_random.integers(len(self.WORDS)))]
        return self.word, {}

    def step(self, action):
        if action == self.word[::-1]:
            return "solved", 1.0, True, False, {}
        return self.word, self.penalty, False, False, {}


def cliff_text(state) -> str:
    """CliffWalking's state (row * 12 + col) in words: an observation function."""
    return f"row {int(state) // 12}, column {int(state) % 12}"


def play(env, actions):
    return [env.step(a) for a in actions]


# ----------------------------------------------------------------- FrozenLake through ansi
def test_frozenlake_ansi_first_observation_marks_the_agent_and_names_the_actions():
    env = make_env("gymnasium", LAKE)
    obs, info = env.reset(seed=0)
    # gymnasium's ansi render colours the agent's cell (\x1b[41mS\x1b[0m): ansi_colors brackets -> [S]
    assert obs == "[S]FFF\nFHFH\nFFFH\nHFFG"
    assert info["success"] is False
    assert env.valid_actions() == NAMES
    assert env.instruction().endswith("Your available actions are:\nLeft, Down, Right, Up")
    raw = make_env("gymnasium", {**LAKE, "ansi_colors": "keep"})
    assert raw.reset(seed=0)[0] == "\x1b[41mS\x1b[0mFFF\nFHFH\nFFFH\nHFFG"
    assert make_env("gymnasium", {**LAKE, "ansi_colors": "strip"}).reset(seed=0)[0] == "SFFF\nFHFH\nFFFH\nHFFG"


def test_frozenlake_actions_by_name_reach_the_goal_and_the_reward_flows():
    env = make_env("gymnasium", LAKE)
    env.reset(seed=0)
    steps = play(env, ["down", " DOWN "] + PATH[2:])  # names match in any case and spacing
    assert [s[1] for s in steps] == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert [s[2] for s in steps] == [False] * 5 + [True]
    assert not any(s[3] for s in steps)
    assert steps[-1][0] == "  (Right)\nSFFF\nFHFH\nFFFH\nHFF[G]"  # the render names the last move
    assert steps[-1][4]["success"] is True and all(s[4]["action_is_valid"] for s in steps)


def test_frozenlake_hole_ends_the_episode_without_success():
    env = make_env("gymnasium", LAKE)
    env.reset(seed=0)
    (_, r1, t1, _, _), (obs, r2, t2, tr2, info) = play(env, ["Right", "Down"])
    assert (r1, t1, r2, t2, tr2) == (0.0, False, 0.0, True, False)
    assert obs.endswith("SFFF\nF[H]FH\nFFFH\nHFFG") and info["success"] is False


def test_invalid_and_ineffective_actions():
    env = make_env("gymnasium", LAKE)
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("Jump")
    assert obs == "[S]FFF\nFHFH\nFFFH\nHFFG" and reward == 0.0 and not term and not trunc
    assert info["action_is_valid"] is False and env.actions_left == 19  # of the default 20
    _, _, _, _, info = env.step("Left")  # into the west edge: valid, the state does not change
    assert info["action_is_valid"] is True and info["action_is_effective"] is False
    assert env.step("I go Down")[4]["action_is_valid"] is False  # exact match by default
    word = make_env("gymnasium", {**LAKE, "action_match": "word"})
    word.reset(seed=0)
    assert word.step("I go Down")[0].endswith("SFFF\n[F]HFH\nFFFH\nHFFG")


def test_max_actions_truncates():
    env = make_env("gymnasium", {**LAKE, "max_actions": 3})
    env.reset(seed=0)
    steps = play(env, ["Left", "Up", "Left"])  # three moves into the corner's edges
    assert [(s[2], s[3]) for s in steps] == [(False, False), (False, False), (False, True)]
    obs, reward, term, trunc, info = env.step("Down")  # after the end: nothing happens
    assert (reward, term, info["action_is_valid"]) == (0.0, True, False)


def test_the_envs_own_time_limit_ends_the_episode():
    # gymnasium.make's max_episode_steps wraps the env in a TimeLimit of 2 steps: its
    # truncation ends the episode even though ragen's budget (20) is not used up
    env = make_env("gymnasium", {**LAKE, "kwargs": {"is_slippery": False, "max_episode_steps": 2}})
    env.reset(seed=0)
    steps = play(env, ["Down", "Down"])
    assert [(s[2], s[3]) for s in steps] == [(False, False), (False, True)]
    assert env.step("Right")[4]["action_is_valid"] is False  # the episode is over
    env.reset(seed=0)  # and a reset starts a new one
    assert env.step("Down")[3] is False


def test_same_seed_same_episode_and_seeds_reach_gymnasium_unchanged():
    cfg = {"id": "FrozenLake-v1", "action_names": NAMES}  # slippery: the seed drives every move
    moves = ["Right", "Down", "Right", "Down", "Right", "Down", "Right", "Down"]

    def episode(seed):
        env = make_env("gymnasium", {**cfg, "ansi_colors": "keep"})
        return [env.reset(seed=seed)[0]] + [s[0] for s in play(env, moves)]

    first = episode(11)
    assert episode(11) == first
    gym = gymnasium.make("FrozenLake-v1", render_mode="ansi")  # Gymnasium itself, seeded alike
    gym.reset(seed=11)
    expected = [gym.render().strip("\n").rstrip()]
    for m in moves:
        if len(expected) > 1 and gym.unwrapped.desc.flatten()[gym.unwrapped.s] in b"HG":
            break
        gym.step(NAMES.index(m))
        expected.append(gym.render().strip("\n").rstrip())
    assert first[:len(expected)] == expected


# ----------------------------------------------------------------- Text spaces, functions, classes
def test_text_spaces_from_a_class_entry():
    cfg = {"entry": "test_envs_gymnasium:ReverseEnv", "kwargs": {"penalty": -0.25}, "success": "return"}
    env = make_env("gymnasium", cfg)
    word, _ = env.reset(seed=0)
    assert word in ReverseEnv.WORDS and env.valid_actions() == []
    assert make_env("gymnasium", cfg).reset(seed=0)[0] == word  # the seed picks the word
    assert env.instruction().endswith("Answer with the action as text.")
    obs, reward, _, _, info = env.step("not it")  # the space's charset has no space: invalid, no step
    assert (obs, reward, info["action_is_valid"]) == (word, 0.0, False)
    obs, reward, term, _, info = env.step("wrong")  # a word the space contains: a real, wrong step
    assert (reward, term, info["action_is_valid"], info["success"]) == (-0.25, False, True, False)
    obs, reward, term, _, info = env.step(word[::-1])
    assert (obs, reward, term) == ("solved", 1.0, True)
    assert info["success"] is True  # return -0.25 + 1 = 0.75 > 0


def test_observation_function_and_terminated_success_on_cliffwalking():
    # CliffWalking-v1: 4x12, start (3, 0) = state 36, goal (3, 11); Up, then 11 Right, then Down.
    # Each step pays -1 (the cliff -100 and back to the start); only the goal terminates.
    cfg = {"id": "CliffWalking-v1", "observation": "test_envs_gymnasium:cliff_text",
           "action_names": ["Up", "Right", "Down", "Left"], "success": "terminated"}
    env = make_env("gymnasium", cfg)
    assert env.reset(seed=0)[0] == "row 3, column 0"
    steps = play(env, ["Up"] + ["Right"] * 11 + ["Down"])
    assert [s[0] for s in steps[:2]] == ["row 2, column 0", "row 2, column 1"]
    assert sum(s[1] for s in steps) == -13.0 and steps[-1][2] is True and steps[-1][4]["success"] is True
    cliff = make_env("gymnasium", cfg)
    cliff.reset(seed=0)
    assert cliff.step("Right")[:3] == ("row 3, column 0", -100.0, False)


def test_cliffwalking_ansi_render_is_plain_text():
    env = make_env("gymnasium", {"id": "CliffWalking-v1", "action_names": ["Up", "Right", "Down", "Left"]})
    row = "  ".join("o" * 12)
    assert env.reset(seed=0)[0] == "\n".join([row, row, row, "x  " + "  ".join("C" * 10) + "  T"])


# ----------------------------------------------------------------- failure cases
@pytest.mark.parametrize("config, message", [
    ({"id": "FrozenLak-v1", "action_names": NAMES}, "unknown Gymnasium id 'FrozenLak-v1': Environment `FrozenLak` doesn't exist"),
    ({"id": "FrozenLake-v1"}, "'FrozenLake-v1' has a Discrete(4) action space: give action_names, one name per action (4 names)"),
    ({"id": "FrozenLake-v1", "action_names": ["Left", "Right"]},
     "action_names has 2 names but the action space of 'FrozenLake-v1' is Discrete(4): give 4 names"),
    ({"id": "CartPole-v1", "action_names": ["Push left", "Push right"]},
     "Gymnasium env 'CartPole-v1' has no text observation: its observation space is Box("),
    ({"id": "CartPole-v1", "action_names": ["L", "R"], "observation": "no_such_module:fn"},
     "observation function 'no_such_module:fn': cannot import module 'no_such_module'"),
    ({"id": "CartPole-v1", "action_names": ["L", "R"], "observation": "test_envs_gymnasium:no_fn"},
     "observation function 'test_envs_gymnasium:no_fn': module 'test_envs_gymnasium' has no attribute 'no_fn'"),
    ({"id": "FrozenLake-v1", "action_names": NAMES, "observation": "cliff_text"},
     "observation must be one of auto, ansi, text or a function module:function, got 'cliff_text'"),
    ({"id": "FrozenLake-v1", "action_names": NAMES, "observation": "text"}, "has no text observation of kind 'text'"),
    ({"entry": "test_envs_gymnasium:ReverseEnv", "observation": "ansi"}, "has no text observation of kind 'ansi'"),
    ({"entry": "test_envs_gymnasium:ReverseEnv", "action_names": ["a"]}, "has a Text action space (the reply is the action): leave action_names empty"),
    ({"entry": "test_envs_gymnasium:cliff_text"}, "entry 'test_envs_gymnasium:cliff_text' is not a gymnasium.Env subclass"),
    ({"id": "Pendulum-v1", "observation": "test_envs_gymnasium:cliff_text"}, "the action space of 'Pendulum-v1' is Box("),
    ({"id": "FrozenLake-v1", "entry": "test_envs_gymnasium:ReverseEnv"}, "give exactly one of 'id'"),
    ({"action_names": NAMES}, "give exactly one of 'id'"),
    ({**LAKE, "kwargs": {"render_mode": "human"}}, "kwargs must not set render_mode"),
    ({**LAKE, "kwargs": {"slippery": False}}, "gymnasium.make('FrozenLake-v1', **kwargs) failed: TypeError"),
    ({**LAKE, "action_names": ["Left", "left", "Right", "Up"]}, "action_names must differ"),
    ({**LAKE, "success": "goal"}, "success must be one of reward, return, terminated, got 'goal'"),
    ({**LAKE, "idd": "x"}, "unknown key 'idd'"),
])
def test_bad_configs_are_reported_by_validation_and_construction(config, message):
    [problem] = check_env("gymnasium", config)
    assert problem.startswith("env 'gymnasium': ") and message in problem
    with pytest.raises(EnvConfigError) as err:
        make_env("gymnasium", config)
    assert message in str(err.value)


# ----------------------------------------------------------------- behind the rollout driver
@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from ragen_cli.models.load import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def test_scripted_rollout_walks_to_the_goal_through_the_driver(tok):
    # think off, "<answer>" pre-filled: three moves per reply. Turn 1 ends at (2,1) (reward 0),
    # turn 2 reaches G (reward 1, terminated): two turns, success, not truncated.
    rollout = RolloutSpec(max_turns=3, max_actions_per_turn=3, max_tokens_per_turn=16, think=False)
    backend = ScriptedBackend(tok, ["Down || Down || Right<|im_end|>", "Right || Down || Right<|im_end|>"])
    [traj] = run_rollouts(backend, tok, EnvRef(name="gymnasium", config=LAKE), [5], 1, rollout, 4096, 0)
    first = tok.decode(backend.calls[0][0])
    assert "Your available actions are:\nLeft, Down, Right, Up" in first and "[S]FFF\nFHFH\nFFFH\nHFFG" in first
    assert "SFFF\nFHFH\nF[F]FH\nHFFG" in tok.decode(backend.calls[1][0])
    assert traj.turn_rewards == [0.0, 1.0] and traj.task_reward == 1.0
    assert traj.success is True and traj.truncated is False


def test_hf_rollout_on_the_tiny_model(tok, tiny_model_dir):
    # A random 2-layer model: its replies parse (think off) but name no action, or name one the
    # env judges. Whatever it writes, one action per turn cannot reach the goal (6 moves away) in
    # 2 turns, so the env pays 0 and each turn's reward is the format penalty when its action
    # was invalid, else 0.
    from ragen_cli.rollout.backend import make_backend
    from ragen_cli.spec.models import RunSpec

    spec = RunSpec(name="t", env={"train": {"name": "gymnasium", "config": LAKE}}, deepspeed={"precision": "fp32"})
    backend = make_backend("hf", tiny_model_dir, spec)
    rollout = RolloutSpec(max_turns=2, max_actions_per_turn=1, max_tokens_per_turn=6, think=False, format_penalty=-0.1)
    trajs = run_rollouts(backend, tok, EnvRef(name="gymnasium", config=LAKE), [0, 1], 1, rollout, 2048, 0)
    assert [t.group for t in trajs] == [0, 1]
    for traj in trajs:
        assert "[S]FFF\nFHFH\nFFFH\nHFFG" in tok.decode(traj.input_ids) and traj.task_reward == 0.0
        for turn, reward in zip(traj.turns, traj.turn_rewards):
            assert reward == pytest.approx(0.0 if turn.format_ok and turn.valid == turn.executed else -0.1)
        assert traj.truncated == (len(traj.turns) == 2 and not traj.info.get("success"))


# ----------------------------------------------------------------- the `ragen init --template gymnasium` project
def test_template_scaffolds_validates_and_compiles(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ragen_cli.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["init", str(tmp_path / "proj"), "--template", "gymnasium"])
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(tmp_path / "proj")
    result = runner.invoke(app, ["validate", "ragen.yaml"])
    assert result.exit_code == 0, result.output
    assert "env gymnasium, 4x4 trajectories per step" in result.output
    result = runner.invoke(app, ["train", "ragen.yaml", "--dry-run", "--set", f"output.dir={tmp_path / 'runs'}"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "runs").exists()  # a dry run starts nothing


@pytest.mark.slow
def test_template_trains_one_step_on_the_tiny_model(tmp_path, tiny_model_dir):
    # The shipped template with the tiny model and the HF backend (the real spec's model and
    # vLLM take minutes on 2 cores): one real training step through the adapter.
    import json
    import math

    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.commands import templates_dir
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    sets = ["model.name=tiny-random", "model.lora={rank: 4, alpha: 8}", "rollout.backend=hf", "train.steps=1",
            "env.train.groups=2", "env.train.group_size=2", "algorithm.filter.keep_ratio=0.5",
            "algorithm.mini_batches=1", "train.micro_batch=2", "deepspeed.precision=fp32",
            "env.val.every=0", "checkpoint.every=0",
            f"output.dir={tmp_path}", "name=gym"]
    spec = load_spec(templates_dir("gymnasium") / "ragen.yaml", sets)
    train(spec, compile_plan(spec, device="cpu"), tmp_path / "gym")
    [metrics] = [json.loads(line) for line in (tmp_path / "gym" / "metrics.jsonl").read_text().splitlines()]
    assert metrics["train/episodes"] == 4.0 and all(math.isfinite(v) for v in metrics.values() if isinstance(v, float))
    [traj] = [json.loads(line) for line in (tmp_path / "gym" / "trajectories" / "step-1.jsonl").read_text().splitlines()[:1]]
    assert traj["env"] == "gymnasium" and traj["turns"][0]["obs"] == "[S]FFF\nFHFH\nFFFH\nHFFG"  # the fixed map
