"""Find envs by name: built-ins (with their variants), adapters of outside envs and data
(gymnasium, textarena, openenv, dataset, tools, agent), `module.path:ClassName`, or an entry point in the
group `ragen.envs`. `check_env` gives spec validation the same messages that
`make_env` raises."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field

from ragen_cli.envs.base import TextEnv, import_ref
from ragen_cli.envs.config import EnvConfigError, config_from_dict

ENTRY_POINT_GROUP = "ragen.envs"


@dataclass(frozen=True)
class _Builtin:
    target: str
    description: str
    defaults: dict = field(default_factory=dict)


_VOCAB = {"wall": "W", "floor": ".", "target": "G", "box_on_target": "C", "box": "B",
          "player": "A", "player_on_target": "@"}

BUILTINS: dict[str, _Builtin] = {
    "bandit": _Builtin("ragen_cli.envs.bandit:BanditEnv",
                       "Two-armed bandit, arms Phoenix (safe, 0.1) and Dragon (risky, 1.0 w.p. 0.25); one pull."),
    "bandit-test": _Builtin("ragen_cli.envs.bandit:BanditEnv",
                            "Bandit with unseen arm names Trader (safe) and Librarian (risky): generalisation check.",
                            {"arm_names": ("Trader", "Librarian")}),
    "sokoban": _Builtin("ragen_cli.envs.sokoban:SokobanEnv",
                        "Sokoban 6x6 with 1 box; push the box onto the target (10 actions)."),
    "sokoban-large": _Builtin("ragen_cli.envs.sokoban:SokobanEnv", "Sokoban 8x8 with 2 boxes.",
                              {"dim_x": 8, "dim_y": 8, "num_boxes": 2}),
    "sokoban-vocab": _Builtin("ragen_cli.envs.sokoban:SokobanEnv",
                              "Sokoban 6x6, 1 box, drawn with another symbol vocabulary (W . G C B A @).",
                              {"symbols": _VOCAB}),
    "frozenlake": _Builtin("ragen_cli.envs.frozenlake:FrozenLakeEnv",
                           "FrozenLake 4x4, slippery, random solvable map with random start and goal."),
    "countdown": _Builtin("ragen_cli.envs.countdown:CountdownEnv",
                          "Countdown: reach the target with the given numbers and + - * / (one equation)."),
    "runmax": _Builtin("ragen_cli.envs.runmax:RunMaxEnv",
                       "Running maximum over 3 turns: one new card a turn, name the largest card so far."),
    "webshop": _Builtin("ragen_cli.envs.webshop.env:WebShopEnv",
                        "WebShop-style shopping: search[...] / click[...] to buy the product matching an instruction."),
}

ADAPTERS: dict[str, _Builtin] = {
    # outside environments and data (envs/adapters/; docs/envs.md, "Bring your own"): each needs
    # its config (what to adapt), so unlike BUILTINS none builds without one
    "gymnasium": _Builtin("ragen_cli.envs.adapters.gym_env:GymnasiumEnv",
                          "Any Gymnasium env (config: id or entry, kwargs, observation and action mapping)."),
    "textarena": _Builtin("ragen_cli.envs.adapters.textarena_env:TextArenaEnv",
                          "A TextArena game by id (single-player; two-player against a fixed opponent)."),
    "openenv": _Builtin("ragen_cli.envs.adapters.openenv_env:OpenEnvEnv",
                        "An OpenEnv server: a base_url, or a command ragen starts on 127.0.0.1 and stops."),
    "dataset": _Builtin("ragen_cli.envs.adapters.dataset_env:DatasetEnv",
                        "Prompts from a jsonl / parquet / csv file or a saved datasets folder, scored by reward functions."),
    "tools": _Builtin("ragen_cli.envs.adapters.tools_env:ToolsEnv",
                      "Tool calling: prompts from a data file, Python-function and MCP tools in the model's own "
                      "format, rewards at the final answer."),
    "agent": _Builtin("ragen_cli.envs.adapters.agent_env:AgentEnv",
                      "Your own agent program: it calls the policy through an OpenAI client on ragen's endpoint, "
                      "one episode a task row."),
}


class UnknownEnvError(ValueError):
    """The env name is neither a built-in, a `module:Class` path nor an entry point."""


def _load_target(target: str) -> type:
    """The env class `module:Class` (`base.import_ref`: the working directory is searched, so a
    project made by `ragen init` finds my_env.py beside its spec)."""
    try:
        cls = import_ref(target, "env")
    except ValueError as err:
        raise UnknownEnvError(str(err)) from None
    if not (isinstance(cls, type) and issubclass(cls, TextEnv)):
        raise UnknownEnvError(f"'{target}' is not a subclass of ragen_cli.envs.base.TextEnv")
    return cls


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def resolve(name: str) -> tuple[type, dict, str]:
    """-> (env class, variant default config, description); raises `UnknownEnvError`."""
    if name in BUILTINS or name in ADAPTERS:
        entry = BUILTINS.get(name) or ADAPTERS[name]
        return _load_target(entry.target), dict(entry.defaults), entry.description
    if ":" in name:
        cls = _load_target(name)
        return cls, {}, cls.description
    eps = _entry_points()
    if name in eps:
        cls = _load_target(eps[name].value)
        return cls, {}, cls.description
    known = sorted(BUILTINS) + sorted(ADAPTERS) + sorted(eps)
    raise UnknownEnvError(f"unknown env '{name}'; built-in envs: {', '.join(known)} "
                          "(or give module.path:ClassName)")


def _config(cls: type, defaults: dict, config: dict | None):
    return config_from_dict(cls.config_class, {**defaults, **(config or {})})


def make_env(name: str, config: dict | None = None) -> TextEnv:
    """Build the env `name` with `config` (a dict of its config fields; unknown keys are
    errors). Raises `UnknownEnvError` or `EnvConfigError` (both `ValueError`)."""
    cls, defaults, description = resolve(name)
    env = cls(_config(cls, defaults, config))
    env.name = name
    env.description = description
    return env


def check_env(name: str, config: dict | None = None) -> list[str]:
    """Every problem with (name, config) as a message; empty when `make_env` would work."""
    try:
        cls, defaults, _ = resolve(name)
        _config(cls, defaults, config)
    except EnvConfigError as err:
        return [f"env '{name}': {p}" for p in err.problems]
    except UnknownEnvError as err:
        return [str(err)]
    return []


def list_envs() -> list[tuple[str, str]]:
    """(name, one-line description) of every built-in and entry-point env."""
    out = [(name, entry.description) for name, entry in {**BUILTINS, **ADAPTERS}.items()]
    for ep_name, ep in sorted(_entry_points().items()):
        if ep_name in BUILTINS or ep_name in ADAPTERS:
            continue
        try:
            out.append((ep_name, _load_target(ep.value).description))
        except UnknownEnvError as err:
            out.append((ep_name, f"(broken entry point: {err})"))
    return out
