"""MCP servers as tools through the real `mcp` SDK (2.x): a stdio server the test starts
(tests/mcp_tool_server.py, the SDK's MCPServer), its tools listed into schemas, called with the
model's arguments, error results, timeouts, and a server that dies: restarted, and when it dies
again before answering a call `ToolServerError` names it; and the same server over Streamable
HTTP, reached by its URL. Servers that fail without dying: tests/test_tools_mcp_failures.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parent / "mcp_tool_server.py"
REWARDS = '''
def correct(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(REWARDS, encoding="utf-8")
    (tmp_path / "data.jsonl").write_text(json.dumps({"prompt": "What is plum worth?", "answer": "8"}) + "\n",
                                         encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)  # another test's module of the same name
    return tmp_path


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_an_mcp_server_s_tools_are_listed_called_and_fail_softly(project):
    from ragen_cli.envs.registry import make_env
    from ragen_cli.envs.tools.mcp_server import stop_all

    command = f"{{python}} {SERVER}"
    try:
        env = make_env("tools", {"path": "data.jsonl", "rewards": ["my_rewards:correct"], "mcp_servers": [command],
                                 "timeout_s": 8.0})
        schemas = {s["function"]["name"]: s["function"] for s in env.tool_schemas()}
        assert list(schemas) == ["multiply", "lookup", "fail", "nap", "crash"]
        # the server's own inputSchema (pydantic's, from its type hints) is the schema the model sees
        assert schemas["lookup"] == {"name": "lookup", "description": "The value of a fruit in the table.", "parameters": {
            "type": "object", "properties": {"key": {"title": "Key", "type": "string"}}, "required": ["key"],
            "title": "lookupArguments"}}
        env.reset(seed=0)
        env.step(call("lookup", key="plum") + call("multiply", a=3, b=4))
        assert env.chat_messages() == [{"role": "tool", "name": "lookup", "content": "8"},
                                       {"role": "tool", "name": "multiply", "content": "12"}]
        env.step(call("fail", reason="no fruit") + call("nap", seconds=60))
        fail, nap = env.chat_messages()
        assert fail["content"] == "Error executing tool fail: no fruit"  # isError from the server: counted
        assert nap["content"] == "Error: nap timed out after 8 s"
        obs, reward, term, trunc, info = env.step("8")
        assert (reward, term, info["success"]) == (1.0, True, True)
        assert info["tool_stats"] == {"calls": 4, "invalid": 0, "errors": 2,
                                      "per_tool": {"lookup": 1, "multiply": 1, "fail": 1, "nap": 1}}
        # the session outlives a timed-out call: the next call is answered
        env.reset(seed=0)
        env.step(call("multiply", a=7, b=6))
        assert env.chat_messages()[0]["content"] == "42"
    finally:
        stop_all()


def test_a_server_that_dies_is_restarted_and_stops_the_run_when_it_dies_again_before_answering(project):
    from ragen_cli.envs.base import EnvFailure
    from ragen_cli.envs.registry import make_env
    from ragen_cli.envs.tools.mcp_server import ToolServerError, stop_all

    starts = project / "starts.txt"
    command = [sys.executable, str(SERVER), str(starts)]
    try:
        env = make_env("tools", {"path": "data.jsonl", "rewards": ["my_rewards:correct"],
                                 "mcp_servers": [" ".join(command)], "max_actions": 9})
        env.reset(seed=0)
        env.step(call("crash"))
        [result] = env.chat_messages()
        assert result["content"].startswith("Error: MCP server failed during the call to crash")
        assert result["content"].endswith("the server was restarted")
        assert len(starts.read_text().split()) == 2  # started, died, started again
        env.step(call("lookup", key="apple"))
        assert env.chat_messages()[0]["content"] == "3"  # the restarted server answers
        # an answered call resets the count: dying now and then over a long run is survived
        env.step(call("crash"))
        assert env.chat_messages()[0]["content"].endswith("the server was restarted")
        assert len(starts.read_text().split()) == 3
        # dying again before answering any call since its restart stops the run
        with pytest.raises(ToolServerError) as err:
            env.step(call("crash"))
        assert isinstance(err.value, EnvFailure)  # the training loop saves its last step and stops on it
        assert f"MCP server `{' '.join(command)}` died again after its one restart, before answering a call" \
            in str(err.value)
        assert len(starts.read_text().split()) == 3
    finally:
        stop_all()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_server(port: int) -> subprocess.Popen:
    """tests/mcp_tool_server.py over Streamable HTTP, once it accepts connections."""
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return proc
        except OSError:
            assert proc.poll() is None, "the HTTP test server exited"
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the HTTP test server did not listen within 120 s")


def test_a_server_at_a_url_is_connected_to_not_started_and_reconnected(project):
    from ragen_cli.envs.registry import make_env
    from ragen_cli.envs.tools.mcp_server import ToolServerError, stop_all

    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = _http_server(port)
    try:
        env = make_env("tools", {"path": "data.jsonl", "rewards": ["my_rewards:correct"], "mcp_servers": [url],
                                 "max_actions": 9})
        assert [s["function"]["name"] for s in env.tool_schemas()] == ["multiply", "lookup", "fail", "nap", "crash"]
        env.reset(seed=0)
        env.step(call("lookup", key="plum") + call("multiply", a=3, b=4))
        assert [m["content"] for m in env.chat_messages()] == ["8", "12"]
        # the server goes away and another comes up at the URL: the call that found it gone is an
        # error result, ragen connects once more, and the next call is answered
        proc.kill()
        proc.wait()
        proc = _http_server(port)
        env.step(call("multiply", a=7, b=6))
        [result] = env.chat_messages()
        assert result["content"].startswith("Error: MCP server failed during the call to multiply")
        assert result["content"].endswith("the server was connected to again")
        env.step(call("multiply", a=7, b=6))
        assert env.chat_messages()[0]["content"] == "42"
        # gone for good: connecting again fails, and the run stops, naming the URL
        proc.kill()
        proc.wait()
        with pytest.raises(ToolServerError, match=f"MCP server `{url}` did not start: ConnectError.*"
                                                  r"\(restarting it after: MCP server failed during the call to multiply"):
            env.step(call("multiply", a=1, b=2))
    finally:
        proc.kill()
        stop_all()


def test_a_url_with_nobody_there_stops_with_an_error_naming_it(project):
    from ragen_cli.envs.registry import make_env
    from ragen_cli.envs.tools.mcp_server import ToolServerError, stop_all

    url = f"http://127.0.0.1:{_free_port()}/mcp"
    try:
        with pytest.raises(ToolServerError, match=f"MCP server `{url}` did not start: ConnectError"):
            make_env("tools", {"path": "data.jsonl", "rewards": ["my_rewards:correct"], "mcp_servers": [url]})
    finally:
        stop_all()
