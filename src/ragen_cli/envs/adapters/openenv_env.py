"""OpenEnv servers as ragen envs (`env.train.name: openenv`; docs/envs.md, "Bring your own: OpenEnv").

    env:
      train:
        name: openenv
        config:
          command: "{python} my_server.py --host {host} --port {port}"   # or base_url: http://host:8000
          observation: prompt          # an observation field, or module:function(obs dict) -> str
          action: message              # the action field the reply fills, or module:function(text) -> dict | None

Sessions. An openenv-core server (`openenv.core.env_server.create_app`) keeps episode state only
on its WebSocket endpoint `/ws`: each connection is a session with its own `Environment`
instance (its HTTP /reset and /step build a fresh env per request, so they cannot run a
multi-step episode). Each env object here holds one connection, opened at `reset` and closed
when its episode ends, at `close()` or when the object is collected. The P x N episodes of a
step are open at once, so the server must allow that many sessions: `create_app(...,
max_concurrent_envs=K)` with K >= P x N, and an Environment with `SUPPORTS_CONCURRENT_SESSIONS =
True`. A single-session server cannot run lockstep rollouts (every episode waits for the
model at once, none could be serialised behind another); it is refused with a message saying so.

Wire protocol (openenv/core/env_server/types.py, http_server.py `websocket_endpoint`):
`{"type": "reset", "data": {"seed": s, ...}}` and `{"type": "step", "data": {action fields}}`
answer `{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}` or
`{"type": "error", "data": {"message": ..., "code": ...}}`. It is spoken here with
websockets' sync client rather than openenv-core's `EnvClient`, whose import pulls in gradio and
fastmcp (5-10 s on 2 cores) and whose errors arrive as strings; the tests run against a real
openenv-core server, which pins the protocol.

Servers ragen starts (`command`) are shared by every env object of the process, one per
(command, cwd), and stopped with their process group (openenv_server.py).

Failures: a server that dies, times out or answers garbage raises `EnvServerError` (an
`EnvFailure`: the loop checkpoints, then stops) naming the server and the episode's seed. Only
connecting and resetting are retried (`retries`, with backoff): a reset on a new session is the
same episode; a step is never resent, as the server may have applied it, and a lost connection
has lost the server's episode with it. A step the server refuses as invalid (a validation error
of its Action model), or one the `action` function maps to None, is an invalid action.
"""

from __future__ import annotations

import json
import shlex
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake, WebSocketException

from ragen_cli.envs.adapters.openenv_server import EnvServerError, acquire_server, release_server
from ragen_cli.envs.adapters.openenv_session import Garbage, Refused, Session, close_quietly
from ragen_cli.envs.base import EnvFailure, TextEnv, import_ref

__all__ = ["EnvServerError", "OpenEnvConfig", "OpenEnvEnv"]

INSTRUCTION = ("You interact with an environment. Each turn you see its observation; "
               "reply with your next action.")


@dataclass(frozen=True)
class OpenEnvConfig:
    base_url: str = ""
    """A running server (http://host:port); give this or `command`."""
    command: str | tuple[str, ...] = ""
    """A server for ragen to start and stop: an argv list or a string (split like a shell, no shell runs). `{port}` (required) is a free port ragen picks, `{host}` is 127.0.0.1, `{python}` this Python."""
    cwd: str = ""
    """Where `command` runs (default: the directory ragen runs in)."""
    start_timeout_s: float = 120.0
    """Seconds to wait for a started server's GET /health."""
    keep_alive_s: float | None = None
    """Seconds a started server outlives its last env (None: until ragen exits; 0: stop at once)."""
    observation: str = ""
    """The observation's text: a field name, or `module:function` (obs dict -> str); empty: the observation as JSON."""
    action: str = "message"
    """The server's action from a reply: the field the text goes in, or `module:function` (text -> dict, or None for an invalid action)."""
    reset_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments of the server's reset (the episode seed is always sent as `seed`)."""
    instruction: str = INSTRUCTION
    """The rules shown in the first user turn."""
    actions: tuple[str, ...] = ()
    """Valid action names, if the game has a fixed set (for answer examples)."""
    success_reward: float = 1.0
    """An episode that the server ended (done) is a success when its rewards sum to at least this."""
    timeout_s: float = 30.0
    """Seconds to wait for a connection or an answer."""
    retries: int = 2
    """Extra tries of a failed connect or reset (a step is never resent)."""
    backoff_s: float = 0.5
    """Wait before the first retry; doubles with each retry."""
    max_actions: int = 10
    """Actions per episode."""

    def __post_init__(self):
        if bool(self.base_url) == bool(self.command):
            raise ValueError("give exactly one of base_url (a running server) and command (a server ragen starts)")
        if self.base_url and not self.base_url.startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError(f"base_url must start with http://, https://, ws:// or wss://, got {self.base_url!r}")
        if self.command and not any("{port}" in a for a in argv(self.command)):
            raise ValueError("command must pass the port ragen picks: put {port} in it (e.g. --port {port})")
        for name in ("timeout_s", "start_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError(f"retries and backoff_s must be >= 0, got {self.retries} and {self.backoff_s}")
        if self.keep_alive_s is not None and self.keep_alive_s < 0:
            raise ValueError(f"keep_alive_s must be >= 0 or null, got {self.keep_alive_s}")
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")
        for key in ("observation", "action"):
            if ":" in getattr(self, key):
                load_function(getattr(self, key), key)


def argv(command: str | tuple[str, ...]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else list(command)


def load_function(target: str, key: str) -> Callable:
    """The `observation` / `action` mapping function, `module:function` (`base.import_ref`)."""
    fn = import_ref(target, f"{key} function")
    if not callable(fn):
        raise ValueError(f"{key}: {target!r} is not a function")
    return fn


def _finalize(res: dict) -> None:
    """Close the env's session and release its server (at `close()`, or when it is collected)."""
    close_quietly(res)
    server = res.pop("server", None)
    if server is not None:
        release_server(server)


_TRANSPORT = (OSError, TimeoutError, WebSocketException, Garbage, Refused)
_INVALID = {"action_is_valid": False, "action_is_effective": False}


class OpenEnvEnv(TextEnv):
    name = "openenv"
    description = "An OpenEnv server: a base_url, or a command ragen starts on 127.0.0.1 and stops."
    config_class = OpenEnvConfig

    def __init__(self, config: Any = None):
        super().__init__(config)
        c = self.config
        self._obs_fn = load_function(c.observation, "observation") if ":" in c.observation else None
        self._action_fn = load_function(c.action, "action") if ":" in c.action else None
        self._res: dict = {}  # "session", "server": what the finalizer closes (never refers to self)
        self._close = weakref.finalize(self, _finalize, self._res)
        self._obs_text, self._total, self._done, self._steps = "", 0.0, False, 0

    def close(self) -> None:
        """End the session and release the server (the last env stops a server ragen started)."""
        self._close()

    # ----------------------------------------------------------------- errors
    def _server(self) -> str:
        server = self._res.get("server")
        if server is None:
            return f"OpenEnv server {self.config.base_url or '(not started)'}"
        return server.describe()

    def _error(self, what: str) -> EnvServerError:
        server = self._res.get("server")
        died = "" if server is None else server.exit_note()
        tail = f"; its output:\n{server.log_tail()}" if died else ""
        return EnvServerError(f"{self._server()}, episode seed {self.episode_seed}: {what}{died}{tail}")

    # ----------------------------------------------------------------- hooks
    def _reset(self, rng: np.random.Generator) -> dict:
        c = self.config
        close_quietly(self._res)
        if not self._close.alive:  # reset after close(): hold the server again, release it again
            self._close = weakref.finalize(self, _finalize, self._res)
        self._obs_text, self._total, self._done, self._steps = "", 0.0, False, 0
        if c.command and "server" not in self._res:
            self._res["server"] = acquire_server(tuple(argv(c.command)), c.cwd, c.keep_alive_s, c.start_timeout_s)
        url = c.base_url or self._res["server"].url
        data = dict(c.reset_kwargs)
        if self.episode_seed is not None:
            data["seed"] = int(self.episode_seed)
        last: Exception | None = None
        for attempt in range(c.retries + 1):
            if attempt:
                time.sleep(c.backoff_s * 2 ** (attempt - 1))
            try:
                self._res["session"] = Session(url, c.timeout_s)
                body = self._res["session"].call("reset", data)
                self._obs_text = self._text(body["observation"])
                return {}
            except Refused as err:
                if err.code == "CAPACITY_REACHED":
                    close_quietly(self._res)
                    raise self._error(f"the server refused another session ({err}). Rollouts keep every episode "
                                      "of a step open at once (P groups x N copies): start the server with "
                                      "create_app(..., max_concurrent_envs=K), K >= P x N, and an Environment "
                                      "with SUPPORTS_CONCURRENT_SESSIONS = True") from None
                last = err
            except _TRANSPORT as err:
                last = err
            close_quietly(self._res)
        raise self._error(f"reset failed {c.retries + 1} times; last: {_what(last, c.timeout_s)}")

    def _step(self, action: str) -> tuple[float, bool, dict]:
        session = self._res.get("session")
        if session is None or self._done:
            return 0.0, False, dict(_INVALID)
        self._steps += 1
        if self._action_fn is not None:
            try:
                payload = self._action_fn(action)
            except Exception as err:  # the user's function: a bug, not a bad action
                raise EnvFailure(f"openenv action function {self.config.action} raised on {action[:200]!r} "
                                 f"(episode seed {self.episode_seed}): {type(err).__name__}: {err}") from err
            if payload is None:
                return 0.0, False, dict(_INVALID)
        else:
            payload = {self.config.action: action}
        try:
            body = session.call("step", payload)
            reward = body.get("reward")
            if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
                raise Garbage(f"answered step with reward {reward!r}, not a number")
            text = self._text(body["observation"])
        except Refused as err:
            if err.code == "VALIDATION_ERROR":  # the action does not fit the server's Action model
                return 0.0, False, {**_INVALID, "server_message": str(err)[:300]}
            close_quietly(self._res)
            raise self._error(f"step {self._steps} was refused: {err}") from None
        except _TRANSPORT as err:
            close_quietly(self._res)
            raise self._error(f"step {self._steps}: {_what(err, self.config.timeout_s)}") from None
        reward = float(reward or 0.0)
        self._obs_text, self._total = text, self._total + reward
        self._done = bool(body.get("done"))
        if self._done or self._actions_taken + 1 >= self.max_actions:  # the episode is over: free the session
            close_quietly(self._res)
        return reward, self._done, {"action_is_valid": True, "action_is_effective": True}

    def _text(self, obs: dict) -> str:
        key = self.config.observation
        if self._obs_fn is not None:
            try:
                return str(self._obs_fn(obs))
            except Exception as err:
                raise EnvFailure(f"openenv observation function {key} raised (episode seed "
                                 f"{self.episode_seed}): {type(err).__name__}: {err}") from err
        if not key:
            return json.dumps(obs, sort_keys=True, ensure_ascii=False)
        if key not in obs:
            raise Garbage(f"sent an observation without the field {key!r} (fields: {', '.join(sorted(obs)) or 'none'})")
        value = obs[key]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def _render(self) -> str:
        return self._obs_text

    def _success(self) -> bool:
        return self._done and self._total >= self.config.success_reward

    def instruction(self) -> str:
        return self.config.instruction

    def valid_actions(self) -> list[str]:
        return list(self.config.actions)


def _what(err: Exception | None, timeout_s: float) -> str:
    """A transport failure in words."""
    if isinstance(err, TimeoutError):
        return f"no answer within {timeout_s:g} s (timeout_s)"
    if isinstance(err, ConnectionClosed):
        return ("the connection closed (the server died, restarted, or dropped the session: an idle-session "
                f"timeout shorter than a turn?): {err}")
    if isinstance(err, InvalidHandshake):
        return f"it opened no WebSocket session at /ws (not an OpenEnv server?): {type(err).__name__}: {err}"
    if isinstance(err, ConnectionRefusedError):
        return f"connection refused: {err}"
    return f"{type(err).__name__}: {err}"
