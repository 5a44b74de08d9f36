"""The OpenEnv adapter against a real openenv-core server on 127.0.0.1 (tests/openenv_echo_server.py:
the seed picks a word from WORDS = apple river stone cloud tiger piano lemon orbit, saying it pays 1).

Starting a server imports openenv-core (gradio, fastmcp): 5-20 s on a shared 2-core machine. The
fast tests share one server, started once through the adapter's `command` mode; the tests that
need a server of their own (stop on close, kill mid-episode, no orphan) are marked slow. The
failure servers (non-JSON over HTTP and over WebSocket) are tiny stdlib / websockets servers.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from test_rollout_reaper import alive  # running; a zombie counts as gone
from websockets.sync.server import serve

from ragen_cli.envs.adapters.openenv_env import EnvServerError
from ragen_cli.envs.adapters.openenv_server import running_servers, stop_servers
from ragen_cli.envs.base import EnvFailure
from ragen_cli.envs.registry import check_env, make_env

ECHO = Path(__file__).with_name("openenv_echo_server.py")


def command(sessions: int) -> list[str]:
    """The echo server's command; the session count also makes each test's server its own."""
    return ["{python}", str(ECHO), "--port", "{port}", "--sessions", str(sessions)]


def server_of(cmd: list[str]):
    [server] = [s for s in running_servers() if list(s.command) == cmd]
    return server




def wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


@pytest.fixture(scope="module")
def shared():
    """The config of envs on one shared server (8 sessions), started by the first reset."""
    cfg = {"command": command(8), "observation": "prompt", "timeout_s": 10.0}
    env = make_env("openenv", cfg)
    env.reset(seed=0)
    env.close()
    yield cfg
    stop_servers()


def test_reset_step_reward_flow(shared):
    env = make_env("openenv", shared)
    obs, info = env.reset(seed=3)
    assert obs == "Say the word cloud." and info["success"] is False
    obs, reward, terminated, truncated, info = env.step("hello")
    assert (obs, reward, terminated, truncated) == ("You said 'hello'. Say the word cloud.", 0.0, False, False)
    assert info["action_is_valid"] and not info["success"]
    obs, reward, terminated, truncated, info = env.step("cloud")
    assert (obs, reward, terminated, truncated) == ("Right.", 1.0, True, False)
    assert info["success"]
    assert env.step("cloud")[1:3] == (0.0, True)  # the episode is over: nothing more is sent
    env.close()


def test_same_seed_same_first_observation(shared):
    envs = [make_env("openenv", shared) for _ in range(3)]
    firsts = [env.reset(seed=s)[0] for env, s in zip(envs, (5, 5, 6))]
    assert firsts == ["Say the word piano.", "Say the word piano.", "Say the word lemon."]
    for env in envs:
        env.close()


def test_envs_share_one_started_server_each_with_its_own_episode(shared):
    server = server_of(shared["command"])
    before = server.users
    envs = [make_env("openenv", shared) for _ in range(6)]
    for i, env in enumerate(envs):
        env.reset(seed=i // 2)  # 3 groups x 2 copies
    assert server_of(shared["command"]) is server and server.users == before + 6
    # copies of seed 1 ("river") on separate sessions: one answers right, the other wrong
    assert envs[2].step("river")[1:3] == (1.0, True)
    assert envs[3].step("stone")[1:3] == (0.0, False)
    assert envs[3].step("river")[1:3] == (1.0, True)
    for env in envs:
        env.close()
    assert server.users == before and server.proc.poll() is None  # keep_alive_s None: up until exit


def test_an_env_reset_after_close_holds_the_server_again(shared):
    server = server_of(shared["command"])
    before = server.users
    env = make_env("openenv", shared)
    env.reset(seed=0)
    env.close()
    assert env.reset(seed=1)[0] == "Say the word river." and server.users == before + 1
    env.close()
    assert server.users == before


def test_base_url_mode_starts_nothing(shared):
    url = server_of(shared["command"]).url
    count = len(running_servers())
    env = make_env("openenv", {"base_url": url, "observation": "prompt"})
    assert env.reset(seed=2)[0] == "Say the word stone."
    assert env.step("stone")[1:3] == (1.0, True)
    assert len(running_servers()) == count
    env.close()


def test_invalid_actions_and_mappings(shared):
    env = make_env("openenv", {**shared, "observation": "openenv_mapping:shout", "action": "openenv_mapping:say"})
    assert env.reset(seed=4)[0] == "SAY THE WORD TIGER."
    # refused by the mapping (never sent), then by the server's Action model (min_length=1)
    for action in ("!tiger", ""):
        obs, reward, terminated, _, info = env.step(action)
        assert (obs, reward, terminated, info["action_is_valid"]) == ("SAY THE WORD TIGER.", 0.0, False, False)
    assert env.step("TIGER")[1:3] == (1.0, True)  # the mapping lowers it
    env.close()
    env = make_env("openenv", {**shared, "action": "openenv_mapping:broken"})
    env.reset(seed=4)
    with pytest.raises(EnvFailure, match=r"openenv_mapping:broken raised .*episode seed 4.*KeyError"):
        env.step("tiger")
    env.close()


def test_step_timeout_names_server_and_episode(shared):
    url = server_of(shared["command"]).url
    env = make_env("openenv", {**shared, "timeout_s": 0.5})
    env.reset(seed=4)
    start = time.monotonic()
    with pytest.raises(EnvServerError) as err:
        env.step("sleep:3")
    assert time.monotonic() - start < 2.5  # one timeout, the step not resent
    assert url in str(err.value) and "episode seed 4" in str(err.value) and "step 1" in str(err.value)
    assert "no answer within 0.5 s" in str(err.value)
    assert isinstance(err.value, EnvFailure)  # what the training loop checkpoints and stops on
    env.close()


def test_too_many_sessions_is_a_clear_error(shared):
    envs = [make_env("openenv", shared) for _ in range(9)]  # the shared server allows 8
    with pytest.raises(EnvServerError, match=r"refused another session \(CAPACITY_REACHED.*max_concurrent_envs=K\), K >= P x N"):
        for seed, env in enumerate(envs):
            env.reset(seed=seed)
    for env in envs:
        env.close()


class _NotJson(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):
        type(self).hits += 1
        body = b"<html>hello, I am not JSON</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_http_server_answering_garbage_fails_after_bounded_retries():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotJson)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        env = make_env("openenv", {"base_url": url, "retries": 2, "backoff_s": 0.05, "timeout_s": 2.0})
        with pytest.raises(EnvServerError) as err:
            env.reset(seed=7)
    finally:
        server.shutdown()
        server.server_close()
    message = str(err.value)
    assert url in message and "episode seed 7" in message and "reset failed 3 times" in message
    assert "not an OpenEnv server?" in message
    assert _NotJson.hits == 3  # 1 try + 2 retries, then no more


@pytest.fixture
def ws_garbage():
    """A WebSocket server at /ws answering resets properly and steps with non-JSON; counts messages."""
    seen = []

    def handler(conn):
        for raw in conn:
            kind = json.loads(raw)["type"]
            seen.append(kind)
            if kind == "reset":
                conn.send(json.dumps({"type": "observation", "data": {"observation": {"prompt": "hi"}, "reward": None, "done": False}}))
            elif kind == "step":
                conn.send("}{ this is not JSON")

    with serve(handler, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.socket.getsockname()[1]}", seen
        server.shutdown()


def test_websocket_garbage_mid_episode_is_not_resent(ws_garbage):
    url, seen = ws_garbage
    env = make_env("openenv", {"base_url": url, "observation": "prompt"})
    assert env.reset(seed=12)[0] == "hi"
    with pytest.raises(EnvServerError, match=rf"OpenEnv server {url}, episode seed 12: step 1: .*non-JSON"):
        env.step("hello")
    assert seen.count("step") == 1 and seen[:2] == ["reset", "step"]  # then only the session's close
    env.close()


def test_observation_without_the_configured_field(ws_garbage):
    url, _ = ws_garbage
    env = make_env("openenv", {"base_url": url, "observation": "text", "retries": 1, "backoff_s": 0.01})
    with pytest.raises(EnvServerError, match=r"without the field 'text' \(fields: prompt\)"):
        env.reset(seed=1)


def test_a_command_that_exits_fails_with_its_output():
    cmd = ["{python}", "-c", "import sys; print('no server here'); sys.exit(4)", "{port}"]
    env = make_env("openenv", {"command": cmd, "start_timeout_s": 20})
    with pytest.raises(EnvServerError, match=r"(?s)did not answer GET /health.*exited with code 4.*no server here"):
        env.reset(seed=0)
    assert not [s for s in running_servers() if list(s.command) == cmd]


@pytest.mark.parametrize("config, message", [
    ({}, "exactly one of base_url"),
    ({"base_url": "http://127.0.0.1:1", "command": "x --port {port}"}, "exactly one of base_url"),
    ({"command": "python server.py"}, "put {port} in it"),
    ({"base_url": "127.0.0.1:8000"}, "base_url must start with"),
    ({"base_url": "http://h", "timeout_s": 0}, "timeout_s must be > 0"),
    ({"base_url": "http://h", "observation": "no_such_module:f"}, "observation function 'no_such_module:f': cannot import module 'no_such_module'"),
    ({"base_url": "http://h", "port": 1}, "unknown key 'port'"),
])
def test_config_errors(config, message):
    problems = check_env("openenv", config)
    assert any(message in p for p in problems), problems


@pytest.mark.slow
def test_command_mode_stops_the_server_when_the_last_env_closes():
    cmd = command(4)
    a, b = (make_env("openenv", {"command": cmd, "observation": "prompt", "keep_alive_s": 0}) for _ in range(2))
    a.reset(seed=0)
    b.reset(seed=1)
    server = server_of(cmd)
    pid = server.proc.pid
    assert server.users == 2 and alive(pid)
    a.close()
    assert alive(pid)
    b.close()
    assert not alive(pid) and server not in running_servers()


@pytest.mark.slow
def test_server_killed_mid_episode_names_server_and_episode():
    cmd = command(5)
    env = make_env("openenv", {"command": cmd, "observation": "prompt", "timeout_s": 5, "keep_alive_s": 0})
    env.reset(seed=11)
    assert env.step("hello")[1] == 0.0
    server = server_of(cmd)
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait(10)
    with pytest.raises(EnvServerError) as err:
        env.step("orbit")
    message = str(err.value)
    assert server.url in message and "openenv_echo_server.py" in message
    assert "episode seed 11: step 2" in message and "exited with code -9" in message
    with pytest.raises(EnvServerError, match="is no longer running"):
        make_env("openenv", {"command": cmd, "observation": "prompt"}).reset(seed=1)
    env.close()  # the last user: the dead server leaves the registry
    assert server not in running_servers()


TRAINER = textwrap.dedent("""
    import sys, time
    from ragen_cli.envs.registry import make_env
    from ragen_cli.envs.adapters.openenv_server import running_servers
    env = make_env("openenv", {"command": %r})
    env.reset(seed=0)
    print(running_servers()[0].proc.pid, running_servers()[0].log, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
""")


@pytest.mark.slow
@pytest.mark.parametrize("end", ["exit", "sigkill"])
def test_no_server_outlives_its_trainer(end):
    """Interpreter exit (atexit) and SIGKILL (parent-death signal) both take the server down."""
    proc = subprocess.Popen([sys.executable, "-c", TRAINER % (command(3),), "hang" if end == "sigkill" else "exit"],
                            stdout=subprocess.PIPE, text=True)
    pid, log = proc.stdout.readline().split()
    pid = int(pid)
    assert alive(pid)
    if end == "sigkill":
        proc.kill()
    proc.wait(30)
    assert wait_gone(pid), f"server {pid} outlived its trainer ({end})"
    Path(log).unlink(missing_ok=True)  # a SIGKILLed trainer leaves its server's log behind


@pytest.mark.slow
def test_rollouts_through_the_driver(shared, tiny_model_dir):
    """A real rollout: the HF backend on tiny-random, 2 seeds x 2 copies, 2 turns."""
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    tok = load_tokenizer(tiny_model_dir)
    backend = HFBackend(load_causal_lm(tiny_model_dir), tok)
    rollout = RolloutSpec(max_turns=2, max_tokens_per_turn=6, think=False)
    server = server_of(shared["command"])
    trajs = run_rollouts(backend, tok, EnvRef(name="openenv", config=shared), [1, 2], 2, rollout, 4096, sample_seed=0)
    assert [t.group for t in trajs] == [0, 0, 1, 1]
    assert [t.turns[0].obs for t in trajs] == ["Say the word river."] * 2 + ["Say the word stone."] * 2
    steps = [turn for t in trajs for turn in t.turns if turn.executed]
    assert steps, "no reply reached the server"
    for t in trajs:
        assert len(t.turns) == 2  # random words are wrong: the episodes run to max_turns
        if t.turns[0].executed and t.turns[0].valid:  # the server echoed the reply back
            assert t.turns[1].obs.startswith("You said ")
        assert t.task_reward == 0.0
    del trajs
    import gc

    gc.collect()
    assert server.users == 0  # the driver's env objects released their sessions when collected
