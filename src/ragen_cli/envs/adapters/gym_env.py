"""Any Gymnasium env behind ragen's text-env protocol (`env.train.name: gymnasium`;
docs/envs.md, "Bring your own: Gymnasium").

- The env: a registered id (`gymnasium.make(id, **kwargs)`, TimeLimit and all) or a class
  `module:Class` built as `Class(**kwargs)`.
- Observation -> text (config `observation`): the env's `ansi` render (the default where the
  env has one; colour codes become `[...]` marks), the observation itself for a `Text`
  observation space, or a user function `module:function` (obs -> str).
- Text -> action: a `Discrete` space through `action_names` (index i names action start + i,
  matched by `named_action`); a `Text` space takes the reply itself when the space contains it.
  Anything else is an invalid action (no step, reward 0), as in every ragen env.
- Seeds: the episode seed goes unchanged to the env's `reset(seed=...)`, so ragen's seed s shows
  the state `gymnasium.make(id).reset(seed=s)` shows.
- The episode ends on termination, on the env's own truncation (a TimeLimit) or after
  `max_actions` actions (the base class's budget).

The config is checked when it is built (`ragen validate` runs the same check): the id or class
must build, and its spaces must fit the observation and action mapping. That check builds the
env once per distinct config per process (`_probe`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from ragen_cli.envs.base import TextEnv, check_action_match, import_ref, named_action

OBSERVATIONS = ("auto", "ansi", "text")  # or module:function
ANSI_COLORS = ("brackets", "strip", "keep")
SUCCESS = ("reward", "return", "terminated")
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_COLOURED = re.compile(r"\x1b\[[0-9;]*[1-9][0-9;]*m([^\x1b]*)\x1b\[0?m")


@dataclass(frozen=True)
class GymnasiumConfig:
    id: str | None = None
    """A registered Gymnasium id (`FrozenLake-v1`; `module:Name-v0` imports the module that
    registers it). Give `id` or `entry`."""
    entry: str | None = None
    """An env class as `module:Class` (a `gymnasium.Env`), built as `Class(**kwargs)`; the module
    is also looked up from the working directory."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of `gymnasium.make` or the class (`{is_slippery: false}`); not
    `render_mode`, which `observation` sets."""
    observation: str = "auto"
    """How an observation becomes text: `ansi` (the env's `render_mode="ansi"` render), `text`
    (the observation itself; a `Text` observation space), a function `module:function` (obs ->
    str), or `auto`: `ansi` where the env renders it, else `text`."""
    ansi_colors: str = "brackets"
    """ANSI colour codes in an `ansi` render: `brackets` marks coloured text with [ ] (FrozenLake
    highlights the agent's cell: `[S]FFF`), `strip` drops the codes, `keep` leaves them."""
    action_names: tuple[str, ...] = ()
    """For a `Discrete` action space: one name per action, index i = action start + i
    (FrozenLake: `[Left, Down, Right, Up]`). Leave empty for a `Text` action space."""
    action_match: str = "exact"
    """How an answer names an action: `exact` (the name alone, any case) or `word` (also a text
    naming exactly one action as a whole word)."""
    instruction: str = ""
    """The rules shown in the first user turn; empty: a generic text naming the env and the
    actions."""
    success: str = "reward"
    """When an episode is a success: `reward` (it terminated with a last reward above
    `success_threshold`: FrozenLake's goal pays 1), `return` (its summed reward is above
    `success_threshold`) or `terminated` (it reached any terminal state: CliffWalking ends only at
    the goal)."""
    success_threshold: float = 0.0
    """The threshold of the `reward` and `return` success rules."""
    max_actions: int = 20
    """Actions per episode; the episode is truncated after that many (the env's own time limit
    can end it sooner)."""

    def __post_init__(self):
        check_action_match(self.action_match)
        if (self.id is None) == (self.entry is None):
            raise ValueError("give exactly one of 'id' (a registered Gymnasium id) and 'entry' (module:Class)")
        for key, value, allowed in (("ansi_colors", self.ansi_colors, ANSI_COLORS), ("success", self.success, SUCCESS)):
            if value not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
        if self.observation not in OBSERVATIONS and ":" not in self.observation:
            raise ValueError(f"observation must be one of {', '.join(OBSERVATIONS)} or a function "
                             f"module:function, got {self.observation!r}")
        if "render_mode" in self.kwargs:
            raise ValueError("kwargs must not set render_mode: `observation` chooses it (ansi, text or a function)")
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")
        if ":" in self.observation:
            fn = import_ref(self.observation, "observation function")
            if not callable(fn):
                raise ValueError(f"observation function '{self.observation}' is not callable")
        observation_mode(self, _probe(self))
        check_actions(self, _probe(self).action_space)


def label(cfg: GymnasiumConfig) -> str:
    return cfg.id if cfg.id is not None else str(cfg.entry)


def build(cfg: GymnasiumConfig, render_mode: str | None = None) -> gymnasium.Env:
    """The Gymnasium env of `cfg`; a ValueError with the reason when it cannot be built."""
    kwargs = dict(cfg.kwargs, **({"render_mode": render_mode} if render_mode else {}))
    if cfg.id is not None:
        try:
            return gymnasium.make(cfg.id, **kwargs)
        except (gymnasium.error.Error, ModuleNotFoundError) as err:
            raise ValueError(f"unknown Gymnasium id '{cfg.id}': {err}") from None
        except Exception as err:
            raise ValueError(f"gymnasium.make('{cfg.id}', **kwargs) failed: {type(err).__name__}: {err}") from None
    cls = import_ref(str(cfg.entry), "entry")
    if not (isinstance(cls, type) and issubclass(cls, gymnasium.Env)):
        raise ValueError(f"entry '{cfg.entry}' is not a gymnasium.Env subclass")
    try:
        return cls(**kwargs)
    except Exception as err:
        raise ValueError(f"entry '{cfg.entry}'(**kwargs) failed: {type(err).__name__}: {err}") from None


@dataclass(frozen=True)
class Probe:
    """What the config check needs to know of an env: its spaces and render modes."""

    action_space: gymnasium.Space
    observation_space: gymnasium.Space
    render_modes: tuple[str, ...]


_PROBES: dict[str, Probe] = {}


def _probe(cfg: GymnasiumConfig) -> Probe:
    key = repr((cfg.id, cfg.entry, sorted(cfg.kwargs.items(), key=lambda kv: kv[0])))
    if key not in _PROBES:
        env = build(cfg)
        _PROBES[key] = Probe(env.action_space, env.observation_space,
                             tuple((env.metadata or {}).get("render_modes", ())))
        env.close()
    return _PROBES[key]


def observation_mode(cfg: GymnasiumConfig, probe: Probe) -> str:
    """'ansi', 'text' or 'function', or a ValueError saying why the env has no text observation."""
    if ":" in cfg.observation:
        return "function"
    has_ansi, is_text = "ansi" in probe.render_modes, isinstance(probe.observation_space, gymnasium.spaces.Text)
    mode = cfg.observation if cfg.observation != "auto" else "ansi" if has_ansi else "text" if is_text else None
    if (mode == "ansi" and has_ansi) or (mode == "text" and is_text):
        return mode
    raise ValueError(
        f"Gymnasium env '{label(cfg)}' has no text observation"
        + (f" of kind '{cfg.observation}'" if cfg.observation != "auto" else "")
        + f": its observation space is {probe.observation_space} (not Text) and it does not render 'ansi' "
        f"(render modes: {', '.join(probe.render_modes) or 'none'}); set observation to a function "
        "module:function that turns an observation into text")


def check_actions(cfg: GymnasiumConfig, space: gymnasium.Space) -> None:
    if isinstance(space, gymnasium.spaces.Discrete):
        if not cfg.action_names:
            raise ValueError(f"Gymnasium env '{label(cfg)}' has a Discrete({space.n}) action space: give "
                             f"action_names, one name per action ({space.n} names)")
        if len(cfg.action_names) != space.n:
            raise ValueError(f"action_names has {len(cfg.action_names)} names but the action space of "
                             f"'{label(cfg)}' is Discrete({space.n}): give {space.n} names")
        if len({" ".join(n.split()).lower() for n in cfg.action_names}) != len(cfg.action_names):
            raise ValueError(f"action_names must differ (case and spacing aside), got {list(cfg.action_names)}")
    elif isinstance(space, gymnasium.spaces.Text):
        if cfg.action_names:
            raise ValueError(f"'{label(cfg)}' has a Text action space (the reply is the action): "
                             "leave action_names empty")
    else:
        raise ValueError(f"the action space of '{label(cfg)}' is {space}: only Discrete (with action_names) "
                         "and Text action spaces can be answered in text")


def ansi_text(text: str, colors: str) -> str:
    """An ansi render as plain text: colour codes marked with [ ], stripped or kept; blank lines
    at both ends dropped."""
    if colors == "brackets":
        text = _COLOURED.sub(r"[\1]", text)
    if colors != "keep":
        text = _SGR.sub("", text)
    return text.strip("\n").rstrip()


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(a, b)) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else bool(a == b)
    except Exception:  # observations that do not compare (dicts of arrays): count as changed
        return False


class GymnasiumEnv(TextEnv):
    name = "gymnasium"
    description = "A Gymnasium env (config: id or entry, kwargs, observation and action mapping)."
    config_class = GymnasiumConfig

    def __init__(self, config: Any = None):
        super().__init__(config)
        cfg = self.config
        probe = _probe(cfg)
        self._mode = observation_mode(cfg, probe)
        self._to_text = import_ref(cfg.observation, "observation function") if self._mode == "function" else None
        self._space = probe.action_space
        self.gym = build(cfg, "ansi" if self._mode == "ansi" else None)
        self._text, self._raw = "", None
        self._terminated = self._gym_truncated = False
        self._last_reward = self._return = 0.0

    # ----------------------------------------------------------------- hooks
    def _reset(self, rng: np.random.Generator) -> dict:
        self._raw, _ = self.gym.reset(seed=self.episode_seed)
        self._terminated = self._gym_truncated = False
        self._last_reward = self._return = 0.0
        self._text = self._observe(self._raw)
        return {}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        a = self._gym_action(action)
        if a is None:
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False}
        raw, reward, terminated, truncated, _ = self.gym.step(a)
        effective = not _same(raw, self._raw)
        self._raw, self._terminated, self._gym_truncated = raw, bool(terminated), bool(truncated)
        self._last_reward = float(reward)
        self._return += self._last_reward
        self._text = self._observe(raw)
        return self._last_reward, self._terminated, {"action_is_valid": True, "action_is_effective": effective}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """The base class's step; the env's own truncation (a TimeLimit) also ends the episode."""
        was_over = self._finished
        obs, reward, terminated, truncated, info = super().step(action)
        if not was_over and self._gym_truncated and not terminated:
            truncated = self._finished = True
        return obs, reward, terminated, truncated, info

    def _gym_action(self, action: str) -> Any:
        if isinstance(self._space, gymnasium.spaces.Text):
            return action if self._space.contains(action) else None
        name = named_action(action, self.config.action_names, self.config.action_match)
        return None if name is None else int(self._space.start) + self.config.action_names.index(name)

    def _observe(self, raw: Any) -> str:
        if self._mode == "ansi":
            return ansi_text(str(self.gym.render()), self.config.ansi_colors)
        if self._mode == "text":
            return str(raw)
        text = self._to_text(raw)
        if not isinstance(text, str):
            raise TypeError(f"observation function '{self.config.observation}' returned {type(text).__name__}, not str")
        return text

    def _render(self) -> str:
        return self._text

    def _success(self) -> bool:
        rule, threshold = self.config.success, self.config.success_threshold
        if rule == "terminated":
            return self._terminated
        if rule == "return":
            return self._return > threshold
        return self._terminated and self._last_reward > threshold

    def instruction(self) -> str:
        if self.config.instruction:
            return self.config.instruction
        text = (f"You are acting in the Gymnasium environment {label(self.config)}. Each turn you see its "
                "state as text and answer with actions.")
        if self._mode == "ansi" and self.config.ansi_colors == "brackets":
            text += "\nText in [ ] is highlighted in the state (for example your position)."
        if self.config.action_names:
            return text + "\nYour available actions are:\n" + ", ".join(self.config.action_names)
        return text + "\nAnswer with the action as text."

    def valid_actions(self) -> list[str]:
        return list(self.config.action_names)

    def close(self) -> None:
        self.gym.close()
