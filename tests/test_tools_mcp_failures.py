"""MCP servers that fail without dying, and ones that hang or break the protocol (issue 72, items
3 and 8; docs/tools.md, "Limits"), each a hand-written stdio server (tests/mcp_raw_server.py)
whose bytes the test chooses: JSON-RPC error responses and a result failing its outputSchema are
error results and the same process keeps serving; a hung server is restarted once for all the
calls that found it hung, and a turn of several episodes waits for it once, not once per call; a
line over the limit is a broken connection, not a full memory; a broken inputSchema stops the
start with an error naming the tool."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

RAW = Path(__file__).resolve().parent / "mcp_raw_server.py"
REWARDS = '''
def correct(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    from ragen_cli.envs.tools.mcp_server import stop_all

    (tmp_path / "raw_rewards.py").write_text(REWARDS, encoding="utf-8")
    (tmp_path / "data.jsonl").write_text(json.dumps({"prompt": "What is plum worth?", "answer": "8"}) + "\n",
                                         encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "raw_rewards", raising=False)
    yield tmp_path
    stop_all()


def env_of(mode: str, project: Path, **kw):
    from ragen_cli.envs.registry import make_env

    command = f"{{python}} {RAW} {mode} {project / 'starts.txt'}"
    return make_env("tools", {"path": "data.jsonl", "rewards": ["raw_rewards:correct"], "mcp_servers": [command],
                              "max_actions": 9, **kw})


def starts(project: Path) -> int:
    return len((project / "starts.txt").read_text().split())


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_json_rpc_errors_and_a_bad_structured_result_are_error_results_from_a_live_server(project):
    env = env_of("errors", project)
    env.reset(seed=0)
    for _ in range(2):  # the server's first two answers are InvalidParams error responses
        obs, reward, term, trunc, info = env.step(call("lookup", key="plum"))
        assert env.chat_messages() == [{"role": "tool", "name": "lookup",
                                        "content": "Error: lookup failed: no such key: plum (JSON-RPC error -32602)"}]
        assert info["tool_calls"][0]["status"] == "error" and not term
    env.step(call("lookup", key="plum"))
    assert env.chat_messages()[0]["content"] == "8"
    # structured content {"n": "x"} against its outputSchema {"n": integer}: refused by the SDK, the server lives
    env.step(call("shaped"))
    assert env.chat_messages()[0]["content"] == ("Error: shaped failed: Invalid structured content returned by tool "
                                                 "shaped: 'x' is not of type 'integer'")
    obs, reward, term, trunc, info = env.step("8")
    assert (reward, term) == (1.0, True)
    assert info["tool_stats"] == {"calls": 4, "invalid": 0, "errors": 3, "per_tool": {"lookup": 3, "shaped": 1}}
    assert starts(project) == 1  # never restarted


def test_a_hung_server_is_restarted_once_for_a_whole_turn_of_episodes(project, monkeypatch):
    from ragen_cli.envs.tools import mcp_server
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.spec.models import EnvRef, ModelSpec, RolloutSpec

    monkeypatch.setattr(mcp_server, "PROBE_TIMEOUT_S", 1.0)
    tok = load_tokenizer(resolve_model("tiny-random"), ModelSpec())
    command = f"{{python}} {RAW} hang {project / 'starts.txt'}"
    env = EnvRef(name="tools", config={"path": "data.jsonl", "rewards": ["raw_rewards:correct"],
                                       "mcp_servers": [command], "timeout_s": 2.0, "max_concurrent_calls": 6})

    def policy(env, obs, turn):  # 6 episodes call the hanging tool at turn 1, echo at turn 2
        return call("hang") if turn == 1 else call("echo", text="hi")

    start = time.perf_counter()
    trajs = run_rollouts(None, tok, env, [0, 1], 3, RolloutSpec(max_turns=2, max_tokens_per_turn=64, think=False),
                         4096, 7, policy=policy)
    seconds = time.perf_counter() - start
    first = [t.turns[0].tool_calls[0]["result"] for t in trajs]
    hung = ("Error: hang timed out after 2 s, and the server did not answer within 1 s after it; the server was "
            "restarted")
    assert first == [hung] * 6
    assert [t.turns[1].tool_calls[0]["result"] for t in trajs] == ["hi"] * 6  # the new process answers at once
    assert starts(project) == 2  # one restart for the six calls
    # one call after another, the six waits alone would take 6 x 2 s; at once: 2 s + 1 s + the restart
    assert seconds < 10, seconds


def test_a_line_over_the_limit_closes_the_connection_and_the_server_is_restarted(project):
    env = env_of("giant", project)  # mcp_stdio.MAX_LINE_BYTES: 8 MiB
    env.reset(seed=0)
    env.step(call("dump", mib=7))  # under the limit: read, then cut to the turn's tokens
    assert env.chat_messages()[0]["content"] == "x" * 2048 + "...(truncated)" + "x" * 2048  # 1024 tokens of 4 chars
    env.step(call("dump", mib=9))
    assert env.chat_messages()[0]["content"] == (
        "Error: MCP server failed during the call to dump (MCPError: Connection closed): the server wrote a line of "
        f"more than {8 << 20} bytes (the limit of one message); the server was restarted")
    env.step(call("echo", text="still here"))
    assert env.chat_messages()[0]["content"] == "still here"
    assert starts(project) == 2


def test_a_broken_input_schema_stops_the_start_naming_the_tool(project):
    from ragen_cli.envs.tools.mcp_server import ToolServerError

    with pytest.raises(ToolServerError) as err:
        env_of("badschema", project)
    assert str(err.value) == (f"tool 'broken' (MCP server `{sys.executable} {RAW} badschema {project / 'starts.txt'}`): "
                              "its input schema is not a valid JSON schema (properties/a/type: 'integr' is not valid "
                              "under any of the given schemas)")
