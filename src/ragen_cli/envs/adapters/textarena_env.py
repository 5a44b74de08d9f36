"""A TextArena game behind ragen's text-env protocol (`env.train.name: textarena`; docs/envs.md,
"Bring your own: TextArena"). Written against textarena 0.7.4.

- The game: `textarena.make(game)` with the wrappers TextArena registers for that id; the
  model's reply goes to the game's `step` as it is (TextArena's own action format, `[5]`,
  `[e2e4]`; the id's ActionFormattingWrapper adds missing brackets).
- Players: single-player games, and two-player games against a random opponent that plays a
  move the game lists in its observation ("Available Moves: '[0]', '[4]'"), else one of
  `opponent_moves`. The opponent moves inside the model's step, so the model always sees its own
  turn. No model opponent (TextArena's agents call hosted LLM APIs).
- Observation: the game's prompt to the player is the instruction; each turn shows the messages
  the player received since its last move (`observation: new`), or the text the id's own
  observation wrapper builds, the whole history (`observation: full`).
- Reward: TextArena's reward for the player when the game ends (win 1, loss -1, draw 0; a
  single-player game that runs out of turns pays its completion fraction); 0 before. Invalid
  moves follow the game's own rule (one retry, then the game ends), and the base class's
  `max_actions` budget truncates a game that runs longer.
- Seeds: TextArena draws from Python's global `random` (and a few games from numpy's). Each
  episode gets its own `random` and numpy state, seeded from the episode seed, swapped in around
  every call into the game: the same seed gives the same game whatever else runs in the process,
  and TextArena's `random.seed` calls never touch the rest of ragen.
"""

from __future__ import annotations

import contextlib
import random
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import textarena as ta

from ragen_cli.envs.base import TextEnv

OBSERVATIONS = ("new", "full")
_LISTING = re.compile(r"(?:available|valid|legal)\s+(?:moves|actions)(?:\s+are)?\s*:[ \t]*([^\n]*)", re.IGNORECASE)
_BRACKETED = re.compile(r"\[[^\[\]\n]*\]")
_PROBE_SEED = 0


@dataclass(frozen=True)
class TextArenaConfig:
    game: str = ""
    """A TextArena env id (`GuessTheNumber-v0`, `TicTacToe-v0`; its `-train` and `-raw` variants
    too); `textarena.envs.registration.ENV_REGISTRY` lists them."""
    players: int = 0
    """Players in the game: 1 or 2; 0 finds out (the fewest the game accepts)."""
    player: int = 0
    """The model's player id in a two-player game (0 moves first in most games)."""
    opponent: str = "random"
    """The other player of a two-player game: `random`, a move drawn from the ones the game lists
    in the opponent's observation, else from `opponent_moves`."""
    opponent_moves: tuple[str, ...] = ()
    """Moves the random opponent draws from on turns where the game lists none (ConnectFour:
    `['[col 0]', ..., '[col 6]']`). Needed for a two-player game that lists no moves at the start;
    on a later turn with neither, the opponent sends `[]`, which most games reject."""
    observation: str = "new"
    """`new`: the messages the player received since its last move, as `[GAME] ...` lines; `full`:
    the text the id's observation wrapper builds (prompt and whole history, every turn)."""
    success_reward: float = 1.0
    """A final reward at or above this is a success (TextArena pays 1 for a win or a solve)."""
    max_actions: int = 30
    """Moves per episode (invalid ones included); the game is truncated after that many."""

    def __post_init__(self):
        if not self.game:
            raise ValueError("game must name a TextArena env id, e.g. GuessTheNumber-v0")
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {', '.join(OBSERVATIONS)}, got {self.observation!r}")
        if self.opponent != "random":
            raise ValueError(f"opponent must be 'random' (no other opponent is supported), got {self.opponent!r}")
        if self.players not in (0, 1, 2):
            raise ValueError(f"players must be 0 (find out), 1 or 2, got {self.players}")
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")
        players, lists_moves = _probe(self.game, self.players)
        if self.player not in range(players):
            raise ValueError(f"player must be {' or '.join(map(str, range(players)))} in the {players}-player "
                             f"game '{self.game}', got {self.player}")
        if players == 2 and not lists_moves and not self.opponent_moves:
            raise ValueError(f"TextArena game '{self.game}' lists no moves in its observation, so the random "
                             "opponent has none to draw from: give opponent_moves")


@contextlib.contextmanager
def own_random(states: dict):
    """Run the block with `random`'s and numpy's global generators in `states` (updated in
    place), then put the outer states back."""
    outer = random.getstate(), np.random.get_state()
    random.setstate(states["random"])
    np.random.set_state(states["numpy"])
    try:
        yield
    finally:
        states["random"], states["numpy"] = random.getstate(), np.random.get_state()
        random.setstate(outer[0])
        np.random.set_state(outer[1])


def seeded_states(seed: int) -> dict:
    return {"random": random.Random(seed).getstate(), "numpy": np.random.RandomState(seed).get_state()}


def listed_moves(text: str) -> list[str]:
    """The moves of the last "Available Moves: ..." (or valid / legal, moves / actions) line:
    its bracketed items ('[0]', '[2, 3]'), else its comma-separated items."""
    found = _LISTING.findall(text)
    if not found:
        return []
    line = found[-1]
    items = _BRACKETED.findall(line)
    return items or [item.strip(" '\"") for item in line.split(",") if item.strip(" '\"")]


def _inner(env: Any) -> Any:
    while isinstance(env, ta.Wrapper):
        env = env.env
    return env


def _observation_wrapper(env: Any) -> Any | None:
    while isinstance(env, ta.Wrapper):
        if isinstance(env, ta.ObservationWrapper):
            return env
        env = env.env
    return None


def _make(game: str) -> Any:
    try:
        return ta.make(game)
    except Exception as err:  # unknown id (ValueError) or a game module that does not import
        if game not in ta.envs.registration.ENV_REGISTRY:
            raise ValueError(f"unknown TextArena game '{game}' (textarena {ta.__version__}): {err}") from None
        detail = " ".join(str(err).replace("*", " ").split())  # NLTK's LookupError is a framed banner
        raise ValueError(f"TextArena game '{game}' cannot be built: {type(err).__name__}: {detail[:300]}") from None


_PROBES: dict[tuple[str, int], tuple[int, bool]] = {}


def _probe(game: str, players: int) -> tuple[int, bool]:
    """(players, whether a player's first observation lists moves), from one reset per game."""
    if (game, players) in _PROBES:
        return _PROBES[(game, players)]
    problems = []
    for n in (players,) if players else (1, 2):
        env = _make(game)
        try:
            with own_random(seeded_states(_PROBE_SEED)):
                env.reset(num_players=n, seed=_PROBE_SEED)
        except Exception as err:  # TextArena asserts the player count
            problems.append(f"{n} player(s): {type(err).__name__}: {err}")
            continue
        queued = _inner(env).state.observations
        lists = any(listed_moves("\n".join(m[1] for m in queued[pid])) for pid in range(n))
        _PROBES[(game, players)] = (n, lists)
        return n, lists
    raise ValueError(f"TextArena game '{game}' does not start with "
                     f"{players or '1 or 2'} player(s) ({'; '.join(problems)}); ragen plays 1- and 2-player games")


class TextArenaEnv(TextEnv):
    name = "textarena"
    description = "A TextArena game (single-player; two-player against a random opponent)."
    config_class = TextArenaConfig

    def __init__(self, config: Any = None):
        super().__init__(config)
        self.players, _ = _probe(self.config.game, self.config.players)
        self.me = self.config.player
        self._rng = np.random.default_rng()
        self._view, self._listed, self._prompt = "", [], ""
        self._done, self._final_reward, self._reason = False, 0.0, ""

    # ----------------------------------------------------------------- hooks
    def _reset(self, rng: np.random.Generator) -> dict:
        seed = int(rng.integers(2**31))
        self._rng, self._states = rng, seeded_states(seed)
        self.ta = _make(self.config.game)  # a fresh game: observation wrappers keep history across resets
        self._done, self._final_reward, self._reason = False, 0.0, ""
        with own_random(self._states):
            self.ta.reset(num_players=self.players, seed=seed)
        self.state = _inner(self.ta).state
        queued = self.state.observations[self.me]
        self._prompt = "\n".join(m for _, m, kind in queued if kind == ta.ObservationType.PROMPT)
        self._play_opponent()
        self._view = self._observe()
        return {"textarena_seed": seed}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        errors = getattr(self.state, "error_count", 0)
        with own_random(self._states):
            self.ta.step(action)
        invalid = (bool(self.state.game_info[self.me].get("invalid_move"))
                   or getattr(self.state, "error_count", 0) > errors)
        self._play_opponent()
        reward = self._finish() if self.state.done else 0.0
        self._view = self._observe()
        info = {"action_is_valid": not invalid, "action_is_effective": not invalid}
        return reward, self._done, {**info, "reason": self._reason} if self._done else info

    def _play_opponent(self) -> None:
        """The random opponent moves until it is the model's turn or the game is over."""
        for _ in range(1000):  # bounded; TextArena ends a game after two invalid moves in a row
            if self.state.done or self.state.current_player_id == self.me:
                return
            pid = self.state.current_player_id
            seen = "\n".join(m for _, m, _ in self.state.observations[pid])
            self.state.observations[pid] = []
            moves = listed_moves(seen) or list(self.config.opponent_moves)
            move = str(self._rng.choice(moves)) if moves else "[]"
            with own_random(self._states):
                self.ta.step(move)

    def _finish(self) -> float:
        with own_random(self._states):
            rewards, game_info = self.ta.close()
        self._done = True
        self._final_reward = float((rewards or {}).get(self.me, 0.0))
        self._reason = str((game_info or {}).get(self.me, {}).get("reason", ""))
        return self._final_reward

    def _observe(self) -> str:
        """The messages the player received since its last move, in `observation`'s form."""
        messages = self.state.observations[self.me]
        self.state.observations[self.me] = []
        if self.config.observation == "full":
            wrapper = _observation_wrapper(self.ta)
            text = str(wrapper.observation(self.me, messages)) if wrapper else self._view + self._lines(messages)
        else:
            shown = [m for m in messages if m[2] != ta.ObservationType.PROMPT
                     and not (m[0] == self.me and m[2] == ta.ObservationType.PLAYER_ACTION)]
            text = self._lines(shown).strip("\n") or "Your move."
        self._listed = listed_moves("\n".join(m[1] for m in messages)) if not self._done else []
        if self._done:
            text += f"\n[GAME] Game over. {self._reason} Your reward: {self._final_reward:g}".rstrip()
        return text

    def _lines(self, messages: list) -> str:
        roles = self.state.role_mapping
        return "".join(f"\n[{'GAME' if sender == ta.GAME_ID else roles.get(sender, f'Player {sender}')}] {text}"
                       for sender, text, _ in messages)

    def _render(self) -> str:
        return self._view

    def _success(self) -> bool:
        return self._done and self._final_reward >= self.config.success_reward

    def instruction(self) -> str:
        if self.config.observation == "full" or not self._prompt:
            return (f"You are playing the TextArena game {self.config.game}. Each turn you see the game's "
                    "messages; answer with your move in the game's format.")
        return self._prompt

    def valid_actions(self) -> list[str]:
        """The moves the game listed in the player's latest messages (empty where it lists none)."""
        return list(self._listed)
