"""Countdown as a text env: one equation per episode (reference `ragen/env/countdown`, whose
puzzles come from Countdown-Tasks-3to4; ours are generated from the seed and always solvable)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragen_cli.envs.base import TextEnv
from ragen_cli.envs.countdown_math import generate_puzzle, score


@dataclass(frozen=True)
class CountdownConfig:
    min_numbers: int = 3
    """Fewest numbers in a puzzle."""
    max_numbers: int = 4
    """Most numbers in a puzzle."""
    max_number: int = 99
    """Numbers are drawn from 1..max_number."""
    min_target: int = 1
    """Smallest target."""
    max_target: int = 100
    """Largest target."""
    format_score: float = 0.1
    """Reward for a well-formed but wrong equation."""
    max_actions: int = 1
    """Equations per episode."""

    def __post_init__(self):
        if not 2 <= self.min_numbers <= self.max_numbers <= 6:
            raise ValueError(f"need 2 <= min_numbers <= max_numbers <= 6, got {self.min_numbers}, {self.max_numbers}")
        if self.max_number < 2 or not 1 <= self.min_target <= self.max_target:
            raise ValueError("need max_number >= 2 and 1 <= min_target <= max_target")
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")


class CountdownEnv(TextEnv):
    name = "countdown"
    description = "Countdown: reach the target with the given numbers and + - * /."
    config_class = CountdownConfig

    def _reset(self, rng: np.random.Generator) -> dict:
        cfg = self.config
        count = int(rng.integers(cfg.min_numbers, cfg.max_numbers + 1))
        self.numbers, self.target, solution = generate_puzzle(rng, count, cfg.max_number,
                                                              cfg.min_target, cfg.max_target)
        self._answer: str | None = None
        self._reward = 0.0
        return {"numbers": list(self.numbers), "target": self.target, "solution": solution}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        reward, well_formed = score(action, self.numbers, self.target, self.config.format_score)
        if not well_formed:
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False}
        self._answer, self._reward = action.strip(), reward
        return reward, True, {"action_is_valid": True, "action_is_effective": True}

    def _success(self) -> bool:
        return self._reward == 1.0

    def _render(self) -> str:
        state = f"Target: {self.target}, nums: {self.numbers}"
        if self._answer is None:
            return state
        verdict = "correct" if self._reward == 1.0 else "wrong"
        return f"{state}\nYour equation: {self._answer} ({verdict})"

    def instruction(self) -> str:
        return (
            "You are solving a Countdown puzzle. Using each given number exactly once and the "
            "operations +, -, *, / with parentheses, write an equation whose value is the target. "
            "Answer with the equation only, for example: (3 + 5) * 2\n"
            "A correct equation scores 1; a well-formed but wrong one scores "
            f"{self.config.format_score:g}."
        )

    def valid_actions(self) -> list[str]:
        return []  # free-form: any equation (see the instruction)
