"""The probe `ragen validate` and `ragen train` run before anything starts: build each env the spec
names that runs a user's code (a `module:Class` env, a Gymnasium `entry`, a dataset's reward and
feedback functions), reset it at the spec's first seed and take one plausible action, so that a
reward function that raises, returns the wrong number of values or a string fails here, in one
line naming the function, the row and the user's own line, not mid-run. `--no-probe` skips it.

A plausible action: the env's first valid action, else the env's `probe_completion()` (a dataset
row's `answer` column), else "42".
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

PROBED = ("dataset", "gymnasium")  # besides every module:Class env
PACKAGE = str(Path(__file__).resolve().parents[1])
FALLBACK_ACTION = "42"


def user_frame(err: BaseException) -> str:
    """`file:line, in function` of the deepest frame of `err` (or its cause) in the user's own
    code: not ragen's, not the standard library's or an installed package's; '' when none."""
    shared = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = ""
    for exc in (err, err.__cause__):
        if exc is None:
            continue
        for frame in traceback.extract_tb(exc.__traceback__):
            path = os.path.realpath(frame.filename)
            if path.startswith(PACKAGE) or any(path.startswith(p + os.sep) for p in shared) or frame.filename.startswith("<"):
                continue
            found = f"{_short(frame.filename)}:{frame.lineno}, in {frame.name}"
    return found


def _short(filename: str) -> str:
    try:
        return os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename


def _described(err: BaseException, action: str | None) -> str:
    from ragen_cli.envs.base import EnvFailure

    text = str(err) if isinstance(err, EnvFailure) else f"{type(err).__name__}: {err}"
    where = user_frame(err)
    probe = f"probed with the action {action!r}" if action is not None else "probed"
    return f"{text}" + (f" (at {where})" if where else "") + f" [{probe}; --no-probe skips the probe]"


def _key(env: Any, err: BaseException) -> str:
    """The config key a failure belongs to: a dataset's `rewards[i]` or `feedback`, else `name`."""
    function = getattr(err, "function", None)
    config = getattr(env, "config", None)
    if function and config is not None:
        if function == "feedback" and getattr(config, "feedback", None):
            return "config.feedback"
        for i, ref in enumerate(getattr(config, "rewards", []) or []):
            if ref.partition(":")[2] == function:
                return f"config.rewards[{i}]"
    return "name"


def probe_env(name: str, config: dict, seed: int) -> list[tuple[str, str]]:
    """[(key under the env's spec entry, message)] for an env that runs a user's code; empty when
    it builds, resets and takes one action, or when ragen's own env needs no probe."""
    from ragen_cli.envs.registry import make_env

    if ":" not in name and name not in PROBED:
        return []
    try:
        env = make_env(name, config)
    except ValueError:
        return []  # the spec checks already report a config that does not build
    except Exception as err:  # a user's __init__ may raise anything
        return [("name", f"env '{name}': building it raised {_described(err, None)}")]
    action = None
    try:
        env.reset(seed=seed)
        actions = env.valid_actions()
        probe = getattr(env, "probe_completion", None)
        action = actions[0] if actions else probe() if callable(probe) else FALLBACK_ACTION
        env.step(action)
    except Exception as err:  # the user's reset, step or reward function
        return [(_key(env, err), _described(err, action))]
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass
    return []
