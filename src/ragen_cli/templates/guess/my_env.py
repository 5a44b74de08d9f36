"""A custom ragen environment: guess a secret number from "higher" / "lower" hints.

ragen finds it through the spec's `env.train.name: my_env:GuessNumberEnv` (module:Class, imported
from the directory ragen runs in). Check it by hand:

    python -c "from my_env import GuessNumberEnv as E; e = E(); print(e.reset(seed=1)); print(e.step('4'))"

A ragen env subclasses `ragen_cli.envs.base.TextEnv` (a Gymnasium env with text observations and
text actions), names a config dataclass (its fields are what `env.train.config` in the spec may
set; `max_actions` is required), and fills in the hooks below. The base class handles seeding,
the action budget (truncation after `max_actions`) and the `info` keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragen_cli.envs.base import TextEnv


@dataclass(frozen=True)
class GuessNumberConfig:
    high: int = 8
    """The secret is drawn from 1..high."""
    max_actions: int = 4
    """Guesses per episode."""


class GuessNumberEnv(TextEnv):
    name = "guess-number"
    description = "Guess a secret number in 1..high; each wrong guess tells higher or lower."
    config_class = GuessNumberConfig

    def _reset(self, rng: np.random.Generator) -> dict:
        self._secret = int(rng.integers(1, self.config.high + 1))
        self._hint = f"I picked a number from 1 to {self.config.high}. Guess it."
        self._found = False
        return {}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        """-> (reward, terminated, info). Anything that is not a number in range is invalid."""
        text = action.strip()
        if not text.isdigit() or not 1 <= int(text) <= self.config.high:
            self._hint = f"'{text}' is not a number from 1 to {self.config.high}."
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False}
        guess = int(text)
        self._found = guess == self._secret
        self._hint = "Correct!" if self._found else ("Higher." if guess < self._secret else "Lower.")
        return (1.0 if self._found else 0.0), self._found, {"action_is_valid": True, "action_is_effective": True}

    def _success(self) -> bool:
        return self._found

    def _render(self) -> str:
        return f"{self._hint} You have {self.actions_left} guesses left."

    def instruction(self) -> str:
        return (
            f"You are playing a guessing game. I picked a whole number from 1 to {self.config.high}. "
            "Answer with one number; after each wrong guess I say Higher or Lower. "
            "Find the number in as few guesses as possible."
        )

    def valid_actions(self) -> list[str]:
        return [str(n) for n in range(1, self.config.high + 1)]
