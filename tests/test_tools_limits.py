"""Tool calls that must never end a run, and the tool limits (issue 72, items 1, 3 and 8;
docs/tools.md, "Limits"): calls nested too deep or with a too-long integer (via the env and via
`ragen envs play`), calls per reply, result tokens per turn and the truncate side, Python tool
threads after a timeout, a tool's `sys.exit`, and the driver stepping a turn's episodes at once.
MCP servers that answer with errors, hang, write a giant line or list a broken schema are in
tests/test_tools_mcp_failures.py."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

TOOLS = '''
import sys
import threading
import time

IN_FLIGHT = {"now": 0, "most": 0}
LOCK = threading.Lock()


def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def repeat(text: str, n: int) -> str:
    """The text n times.

    Args:
        text: What to repeat.
        n: How often.
    """
    return text * n


def slow(seconds: float) -> str:
    """Sleeps.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "done"


def quits(code: int) -> str:
    """Ends the process, if it could.

    Args:
        code: The exit status.
    """
    sys.exit(code)


def busy(seconds: float) -> int:
    """Sleeps, counting the calls in flight at once.

    Args:
        seconds: How long.
    """
    with LOCK:
        IN_FLIGHT["now"] += 1
        IN_FLIGHT["most"] = max(IN_FLIGHT["most"], IN_FLIGHT["now"])
    time.sleep(seconds)
    with LOCK:
        IN_FLIGHT["now"] -= 1
    return IN_FLIGHT["most"]
'''
REWARDS = '''
def correct(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
'''
DEEP = "[" * 1200 + "1" + "]" * 1200  # json.loads raises RecursionError near 1,000 levels
HUGE = "9" * 5000  # over Python's 4,300-digit int-string limit: json.loads raises ValueError


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "lim_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "lim_rewards.py").write_text(REWARDS, encoding="utf-8")
    rows = [{"prompt": "What is 3 * 4?", "answer": "12"}, {"prompt": "What is 5 * 6?", "answer": "30"}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("lim_tools", "lim_rewards"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def config(**kw):
    tools = ["lim_tools:multiply", "lim_tools:repeat", "lim_tools:slow", "lim_tools:quits", "lim_tools:busy"]
    return {"path": "data.jsonl", "rewards": ["lim_rewards:correct"], "shuffle": False, "tools": tools,
            "timeout_s": 5.0, **kw}


def hermes(name: str, arguments: str) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {arguments}}}</tool_call>'


# ----------------------------------------------------------------- item 1: a reply never crashes the run
@pytest.mark.parametrize("parser,reply,message", [
    ("hermes", hermes("multiply", f'{{"a": {DEEP}, "b": 2}}'), "tool call 1 is not valid JSON (nested too deep to read)"),
    ("hermes", hermes("multiply", f'{{"a": {HUGE}, "b": 2}}'),
     "tool call 1 is not valid JSON (ValueError: Exceeds the limit (4300 digits) for integer string conversion)"),
    ("llama3", f'{{"name": "multiply", "parameters": {{"a": {DEEP}, "b": 2}}}}',
     "tool call 1 is not valid JSON (nested too deep to read)"),
    ("llama3", f'{{"name": "multiply", "parameters": {{"a": {HUGE}, "b": 2}}}}',
     "tool call 1 is not valid JSON (ValueError: Exceeds the limit (4300 digits) for integer string conversion)"),
    # parses, but 65 levels (the call object, its arguments, 63 lists) is over MAX_DEPTH = 64
    ("hermes", hermes("multiply", '{"a": ' + "[" * 63 + "]" * 63 + "}"), "tool call 1 is nested more than 64 levels deep"),
    # arguments as a JSON string: the string is read with json.loads too
    ("hermes", hermes("multiply", json.dumps(f'{{"a": {DEEP}}}')), 'the "arguments" of tool call 1 is a string that is '
                                                                  "not a JSON object"),
])
def test_deep_and_huge_calls_are_invalid_actions_with_a_message(project, parser, reply, message):
    from ragen_cli.envs.registry import make_env

    env = make_env("tools", config(parser=parser))
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(reply)
    assert (reward, term, trunc, info["action_is_valid"]) == (0.0, False, False, False)
    assert obs == env.chat_messages()[0]["content"] == f"Error: {message}"
    assert info["tool_calls"] == [{"name": None, "arguments": None, "result": f"Error: {message}", "status": "invalid"}]
    assert info["tool_stats"] == {"calls": 0, "invalid": 1, "errors": 0, "per_tool": {}}
    # 64 levels in all is the most a call may nest: it is read and run (the schema allows extra keys)
    env.step(hermes("repeat", '{"text": "x", "n": 1, "deep": ' + "[" * 62 + "]" * 62 + "}") if parser == "hermes" else
             '{"name": "repeat", "parameters": {"text": "x", "n": 1, "deep": ' + "[" * 62 + "]" * 62 + "}}")
    assert env.chat_messages()[0]["content"] == "Error: repeat raised TypeError: repeat() got an unexpected keyword " \
                                                "argument 'deep'"


def test_envs_play_reads_a_deep_call_as_an_invalid_action(project):
    from typer.testing import CliRunner

    from ragen_cli.cli import app

    sets = ["--set", "path=data.jsonl", "--set", "rewards=[lim_rewards:correct]", "--set", "tools=[lim_tools:multiply]"]
    replies = hermes("multiply", f'{{"a": {DEEP}, "b": 2}}') + "\n" + hermes("multiply", f'{{"a": {HUGE}, "b": 2}}') + "\n12\n"
    result = CliRunner().invoke(app, ["envs", "play", "tools", "--seed", "0", *sets], input=replies)
    assert result.exception is None and result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    assert result.output.count("[invalid action]") == 2
    assert "Error: tool call 1 is not valid JSON (nested too deep to read)" in result.output
    assert "Exceeds the limit (4300 digits)" in result.output
    assert "episode terminated; success: True; total reward 1" in result.output  # the episode went on to its answer


# ----------------------------------------------------------------- item 8: calls per reply
def test_calls_beyond_max_calls_per_turn_are_not_run_and_make_the_reply_invalid(project):
    from ragen_cli.envs.registry import make_env

    env = make_env("tools", config(max_calls_per_turn=2))
    env.reset(seed=0)
    reply = "".join(hermes("multiply", f'{{"a": {k}, "b": 10}}') for k in (1, 2, 3, 4))
    obs, reward, term, trunc, info = env.step(reply)
    note = "Error: 4 calls in one reply; only the first 2 ran (max_calls_per_turn), the other 2 were not run"
    assert env.chat_messages() == [{"role": "tool", "name": "multiply", "content": "10"},
                                   {"role": "tool", "name": "multiply", "content": "20"},
                                   {"role": "tool", "content": note}]
    assert (info["action_is_valid"], info["action_is_effective"]) == (False, True)  # the driver adds the format penalty
    assert info["tool_stats"] == {"calls": 2, "invalid": 2, "errors": 0, "per_tool": {"multiply": 2}}
    assert info["tool_calls"][-1] == {"name": None, "arguments": None, "result": note, "status": "invalid"}
    env.step(hermes("multiply", '{"a": 5, "b": 6}') * 2)  # at the limit: both run, the reply is valid
    assert [m["content"] for m in env.chat_messages()] == ["30", "30"]


# ----------------------------------------------------------------- item 8: result tokens per turn
def test_fair_shares_give_short_results_all_they_need_and_split_the_rest():
    from ragen_cli.envs.tools.limits import fair_shares

    # budget 90 over [10, 100, 100]: 10 keeps 10 (under 90 // 3 = 30); 80 left, 40 each for the others
    assert fair_shares([10, 100, 100], 90) == [10, 40, 40]
    assert fair_shares([7, 3], 4) == [2, 2]  # 3 gets 4 // 2 = 2; 2 left for 7
    assert fair_shares([5, 5], 100) == [5, 5] and fair_shares([], 10) == []
    assert fair_shares([1, 1, 1], 2) == [0, 1, 1]  # 2 // 3 = 0 for the first, then 2 // 2 = 1 each


def test_each_truncate_side_keeps_its_part_as_verl_does():
    from ragen_cli.envs.tools.limits import Chars, fit_results

    text = "abcdefghijklmnop"  # 16 characters: 4 tokens of 4 characters without a tokenizer
    assert fit_results([text], 2, "left", Chars()) == ["abcdefgh...(truncated)"]  # the start kept
    assert fit_results([text], 2, "right", Chars()) == ["...(truncated)ijklmnop"]  # the end kept
    assert fit_results([text], 3, "middle", Chars()) == ["abcdefgh...(truncated)mnop"]  # 2 tokens then 1
    assert fit_results([text], 4, "middle", Chars()) == [text]  # fits: untouched


def test_a_turn_s_results_share_max_result_tokens_counted_with_the_run_s_tokenizer(project):
    from ragen_cli.envs.registry import make_env
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.spec.models import ModelSpec

    # without the run's tokenizer a token is 4 characters: 6 tokens over [5, 1] -> [5, 1]; 5 over them -> [4, 1]
    env = make_env("tools", config(max_result_tokens=5, result_truncate_side="left"))
    env.reset(seed=0)
    env.step(hermes("repeat", '{"text": "ab", "n": 10}') + hermes("repeat", '{"text": "c", "n": 2}'))
    assert [m["content"] for m in env.chat_messages()] == ["ab" * 8 + "...(truncated)", "cc"]
    # with the run's tokenizer (the driver hands it over): " word" is one token of the built-in tokenizer
    tok = load_tokenizer(resolve_model("tiny-random"), ModelSpec())
    assert len(tok.encode(" word" * 30, add_special_tokens=False)) == 30
    env = make_env("tools", config(max_result_tokens=24, result_truncate_side="right"))
    env.use_tokenizer(tok)
    env.reset(seed=0)
    env.step(hermes("repeat", '{"text": " word", "n": 30}') + hermes("repeat", '{"text": " word", "n": 4}') +
             hermes("repeat", '{"text": " word", "n": 30}'))
    # 24 tokens over [30, 4, 30]: 4 keeps 4 (under 24 // 3 = 8), the others 20 // 2 = 10 each, the end kept
    assert [m["content"] for m in env.chat_messages()] == ["...(truncated)" + " word" * 10, " word" * 4,
                                                           "...(truncated)" + " word" * 10]


def test_max_result_chars_is_removed_with_a_message_and_sides_are_checked(project):
    from ragen_cli.envs.registry import check_env

    [problem] = check_env("tools", config(max_result_chars=2000))
    assert "max_result_chars was removed: tool results are limited in tokens per turn; set max_result_tokens" in problem
    [problem] = check_env("tools", config(result_truncate_side="top"))
    assert "result_truncate_side must be one of left, right, middle, got 'top'" in problem
    for key in ("max_calls_per_turn", "max_result_tokens", "max_concurrent_calls"):
        [problem] = check_env("tools", config(**{key: 0}))
        assert "must be positive" in problem


# ----------------------------------------------------------------- item 8: Python tool threads, sys.exit
def tool_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("ragen-tool-")]


def test_timed_out_python_tools_hold_at_most_the_pool_s_threads_then_fail_fast(project):
    from ragen_cli.envs.registry import make_env

    before = len(tool_threads())
    env = make_env("tools", config(timeout_s=0.3, max_concurrent_calls=2, max_actions=20))
    env.reset(seed=0)
    results = []
    for _ in range(6):  # before the pool, each timeout left one more thread sleeping
        start = time.perf_counter()
        env.step(hermes("slow", '{"seconds": 30}'))
        results.append((env.chat_messages()[0]["content"], time.perf_counter() - start))
    assert [text for text, _ in results[:2]] == ["Error: slow timed out after 0.3 s"] * 2
    assert [text for text, _ in results[2:]] == ["Error: slow not run: all 2 tool workers still hold calls that "
                                                 "timed out"] * 4
    assert all(seconds < 0.25 for _, seconds in results[2:])  # no wait behind the stuck ones
    assert len(tool_threads()) - before == 2


def test_a_tool_calling_sys_exit_is_an_error_result(project):
    from ragen_cli.envs.registry import make_env

    env = make_env("tools", config())
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(hermes("quits", '{"code": 3}'))
    assert env.chat_messages() == [{"role": "tool", "name": "quits", "content": "Error: quits raised SystemExit: 3"}]
    assert info["tool_calls"][0]["status"] == "error" and not term
    env.step(hermes("multiply", '{"a": 2, "b": 3}'))
    assert env.chat_messages()[0]["content"] == "6"  # the env, and its worker pool, still serve


# ----------------------------------------------------------------- item 8: a turn's episodes at once
@pytest.mark.parametrize("workers", [1, 3])
def test_the_driver_runs_a_turn_s_calls_concurrently_bounded_by_max_concurrent_calls(project, workers):
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, ModelSpec, RolloutSpec

    tok = load_tokenizer(resolve_model("tiny-random"), ModelSpec())

    def policy(env, obs, turn):  # every episode calls `busy` at turn 1, then answers
        return hermes("busy", '{"seconds": 0.4}') if turn == 1 else "12"

    rollout = RolloutSpec(max_turns=2, max_tokens_per_turn=64, think=False)
    env = EnvRef(name="tools", config=config(max_concurrent_calls=workers))
    trajs = run_rollouts(None, tok, env, [0, 1], 3, rollout, 4096, 7, policy=policy)
    most = [int(t.turns[0].tool_calls[0]["result"]) for t in trajs]  # calls in flight when each ended
    assert max(most) == workers  # 6 episodes: 1 at a time before, 3 at once with max_concurrent_calls: 3
    assert [t.episode_reward for t in trajs] == [1.0] * 3 + [0.0] * 3
