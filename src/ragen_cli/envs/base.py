"""`TextEnv`: the Gymnasium env with text observations and text actions that every ragen env
extends (contract in docs/internals.md, "envs/").

A subclass sets `name`, `description`, `config_class` (a dataclass with a `max_actions` field)
and implements four hooks: `_reset(rng)`, `_step(action)`, `_render()`, `instruction()` and
`valid_actions()`. The base class owns what every env shares: seeding, the per-episode action
budget (truncation), the `info` keys and the rule that a step never raises.
"""

from __future__ import annotations

import os
import re
import sys
import typing
from typing import Any, ClassVar

import gymnasium
import numpy as np

from ragen_cli.envs.config import config_from_dict
from ragen_cli.user_code import module_dirs


def _looked_in(dirs: list[str]) -> str:
    return "looked in " + ", ".join(dirs) + " and the installed packages"


def _folder_not_module(module: Any) -> str:
    """For a namespace package (a folder without __init__.py): where it is, else ''."""
    if getattr(module, "__file__", None) is not None or not hasattr(module, "__path__"):
        return ""
    return ", ".join(dict.fromkeys(os.path.abspath(p) for p in module.__path__))


def import_ref(ref: str, what: str) -> Any:
    """`module:name` -> the object, the module imported from the spec's folder first, then the
    directory ragen runs in (`module_dirs`: a user's env, reward or mapping module sits beside the
    spec). A ValueError names `what` and `ref` when the reference is malformed or does not
    resolve, and says where it looked; a module that fails while importing is reported with its
    error; a folder without __init__.py that shadows the module is named as such."""
    import importlib

    module_name, sep, attr = str(ref).partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} must be written module:name, got {ref!r}")
    dirs = module_dirs()
    for d in reversed(dirs):
        if d in sys.path:
            sys.path.remove(d)
        sys.path.insert(0, d)
    top = module_name.split(".")[0]
    cached = sys.modules.get(top)
    if cached is not None and _folder_not_module(cached) and any(os.path.isfile(os.path.join(d, top + ".py")) for d in dirs):
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            del sys.modules[name]  # a folder imported earlier; the spec's folder holds the module itself
        importlib.invalidate_caches()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
            raise ValueError(f"{what} '{ref}': cannot import module '{err.name}': no such module ({_looked_in(dirs)})") from None
        raise ValueError(f"{what} '{ref}': cannot import module '{module_name}': {type(err).__name__}: {err}") from None
    except Exception as err:  # a user's module may fail in any way while importing
        raise ValueError(f"{what} '{ref}': cannot import module '{module_name}': {type(err).__name__}: {err}") from None
    if not hasattr(module, attr):
        folder = _folder_not_module(module)
        if folder:
            raise ValueError(f"{what} '{ref}': module '{module_name}' is the folder {folder} (no __init__.py), not "
                             f"{module_name.replace('.', '/')}.py; {_looked_in(dirs)}")
        import difflib

        names = [n for n in vars(module) if not n.startswith("_")]
        close = difflib.get_close_matches(attr, names, n=1, cutoff=0.6)
        where = getattr(module, "__file__", None)
        raise ValueError(f"{what} '{ref}': module '{module_name}' has no attribute '{attr}'"
                         + (f" ({where})" if where else "") + (f"; did you mean '{close[0]}'?" if close else ""))
    return getattr(module, attr)


class EnvFailure(RuntimeError):
    """An outside environment or a user's function failed mid-run (a dead env server, a reward
    function that raised). Not a bad action: those never raise. The training loop saves a
    checkpoint of the last finished step and stops with this message (train/loop.py)."""


class TextEnv(gymnasium.Env):
    """A Gymnasium env whose observations and actions are strings."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    config_class: ClassVar[type]
    metadata: ClassVar[dict] = {"render_modes": ["ansi"]}
    max_actions: int = 10

    def __init__(self, config: Any = None):
        if config is None or isinstance(config, dict):
            config = config_from_dict(self.config_class, config)
        self.config = config
        self.max_actions = int(config.max_actions)
        self.action_space = gymnasium.spaces.Text(max_length=4096)
        self.observation_space = gymnasium.spaces.Text(max_length=1 << 20)
        self._obs = ""
        self._actions_taken = 0
        self._finished = False

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode; the same seed gives the same initial state on every machine."""
        super().reset(seed=seed)
        self.episode_seed = seed
        self._actions_taken = 0
        self._finished = False
        info = self._reset(self.np_random) or {}
        self._obs = self._render()
        return self._obs, {"success": False, **info}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Apply one text action. Invalid actions leave the state unchanged (never raise);
        after `max_actions` actions the episode is truncated."""
        if self._finished:
            info = {"success": self._success(), "action_is_valid": False,
                    "action_is_effective": False, "episode_over": True}
            return self._obs, 0.0, True, False, info
        reward, terminated, info = self._step(action if isinstance(action, str) else "")
        self._actions_taken += 1
        truncated = not terminated and self._actions_taken >= self.max_actions
        self._finished = terminated or truncated
        self._obs = self._render()
        info = {"success": self._success(), "action_is_valid": False, "action_is_effective": False, **info}
        return self._obs, float(reward), bool(terminated), bool(truncated), info

    def render(self) -> str:
        """The current state as text (the same as the last observation)."""
        return self._obs

    @property
    def actions_left(self) -> int:
        """Actions left in this episode's budget."""
        return self.max_actions - self._actions_taken

    # ----------------------------------------------------------------- subclass hooks
    def _reset(self, rng: np.random.Generator) -> dict | None:
        raise NotImplementedError

    def _step(self, action: str) -> tuple[float, bool, dict]:
        """-> (reward, terminated, info with action_is_valid / action_is_effective)."""
        raise NotImplementedError

    def _render(self) -> str:
        raise NotImplementedError

    def _success(self) -> bool:
        raise NotImplementedError

    def instruction(self) -> str:
        """Rules, symbol legend and action names (goes into the first user turn)."""
        raise NotImplementedError

    def valid_actions(self) -> list[str]:
        """The actions that are valid now."""
        raise NotImplementedError


def normalise_action(action: str) -> str:
    """Case- and whitespace-insensitive form of an action name ('  Up ' -> 'up')."""
    return " ".join(action.split()).lower()


OBSERVATIONS = ("grid", "coord", "grid_coord")


def check_observation(value: str) -> None:
    """Reject an unknown `observation` env config value."""
    if value not in OBSERVATIONS:
        raise ValueError(f"observation must be one of {', '.join(OBSERVATIONS)}, got {value!r}")


def coordinate_text(rows: int, cols: int, entities: typing.Sequence[tuple[str, typing.Iterable[tuple[int, int]]]]) -> str:
    """The grid's entities as zero-indexed (row, column) coordinates, RAGEN-2's `coord` render
    (`ragen/env/*/utils.py:format_coordinate_render`): a size line, then one line per
    entity label that has cells, cells in row-major order ("Holes: (0, 2), (2, 3)")."""
    lines = [f"Board size: {rows} rows x {cols} cols (zero-indexed)."]
    for label, cells in entities:
        cells = sorted(cells)
        if cells:
            lines.append(f"{label}: {', '.join(f'({r}, {c})' for r, c in cells)}")
    return "\n".join(lines)


def observation_text(observation: str, grid: str, coords: str) -> str:
    """The observation in the config's `observation` form: the symbol grid, the coordinates, or
    both (RAGEN-2's `grid_coord`: coordinates first, then the grid)."""
    check_observation(observation)
    if observation == "grid":
        return grid
    if observation == "coord":
        return coords
    return f"Coordinates:\n{coords}\nGrid map:\n{grid}"


def coordinate_rule(rows: int, cols: int) -> str:
    """The instruction's sentence on coordinates (a rule of the game, the same for every state)."""
    return (f"Positions are zero-indexed (row, column) coordinates, from the top-left corner (0, 0) to the "
            f"bottom-right corner ({rows - 1}, {cols - 1}): Down adds 1 to the row, Right adds 1 to the column.")


def offset_words(d_row: int, d_col: int) -> str:
    """A grid offset in move names, for the envs' `move_hint` option: (2, -1) -> "2 Down and 1
    Left", (0, 1) -> "1 Right", (0, 0) -> "0 steps" (rows grow downwards)."""
    parts = [f"{abs(d)} {name}" for d, name in ((d_row, "Down" if d_row > 0 else "Up"),
                                                (d_col, "Right" if d_col > 0 else "Left")) if d]
    return " and ".join(parts) or "0 steps"


ACTION_MATCHES = ("exact", "word")


def check_action_match(value: str) -> None:
    """Reject an unknown `action_match` env config value."""
    if value not in ACTION_MATCHES:
        raise ValueError(f"action_match must be one of {', '.join(ACTION_MATCHES)}, got {value!r}")


def named_action(action: str, names: typing.Sequence[str], match: str = "word") -> str | None:
    """The action an answer names (env config `action_match`): with `exact`, the name itself in
    any case and spacing (the reference code's rule); with `word`, also text that names exactly
    one of `names` as a whole word ("I move Left." -> "Left"). Text naming two actions, or none,
    names none (invalid). `word` lets a small model wrap a name in words, but where names are
    common words it pays prose: "You have 9 actions left." is Left (docs/training.md)."""
    key = normalise_action(action)
    exact = {normalise_action(name): name for name in names}.get(key)
    if exact is not None or match == "exact":
        return exact
    text = str(action).lower()
    named = [name for name in names if re.search(rf"\b{re.escape(name.lower())}\b", text)]
    return named[0] if len(named) == 1 else None
