"""Two-armed bandit with semantically named arms (the paper's Bandit; reference
`ragen/env/bandit`). A safe arm always pays `low_arm_score`; a risky arm pays `high_arm_score`
with probability `high_arm_prob`, else 0. The arm order shown is drawn from the seed; the payout
draw of the risky arm uses the same seeded generator, so an episode is reproducible."""

from __future__ import annotations


from dataclasses import dataclass

import numpy as np

from ragen_cli.envs.base import TextEnv, check_action_match, named_action, normalise_action

INSTRUCTION = """You are playing a bandit game. Goal: Maximize your total reward by choosing which arm to pull.
Game Rules:
1. There are 2 arms; their names are shown in the state.
2. Each arm has its own reward distribution, related to their names.
3. Analyze the symbolic meaning of each arm's name to guess how their reward distribution might behave.
4. Based on the symbolic meaning of their names, choose the arm you think is more likely to give higher rewards on average.
Your available action is the name of one arm (you pull once)."""

STATE = "There are 2 arms, named {name_a} and {name_b}. Choose between {name_a} and {name_b}."


@dataclass(frozen=True)
class BanditConfig:
    low_arm_score: float = 0.1
    """Payout of the safe arm (every pull)."""
    high_arm_score: float = 1.0
    """Payout of the risky arm when it pays."""
    high_arm_prob: float = 0.25
    """Probability that the risky arm pays (else it pays 0)."""
    arm_names: tuple[str, str] = ("Phoenix", "Dragon")
    """(safe arm name, risky arm name)."""
    max_actions: int = 1
    """Actions per episode (one pull)."""
    action_match: str = "word"
    """How an answer names an arm: `word` (the name alone, or a text naming exactly one arm as a
    whole word, "I pull Dragon.") or `exact` (the name alone, any case)."""

    def __post_init__(self):
        check_action_match(self.action_match)
        if not 0.0 <= self.high_arm_prob <= 1.0:
            raise ValueError(f"high_arm_prob must be in [0, 1], got {self.high_arm_prob}")
        names = tuple(self.arm_names)
        if len(names) != 2 or not all(isinstance(n, str) and n.strip() for n in names):
            raise ValueError(f"arm_names must be two non-empty names, got {self.arm_names!r}")
        if normalise_action(names[0]) == normalise_action(names[1]):
            raise ValueError(f"arm_names must differ, got {self.arm_names!r}")
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")


def expected_values(config: BanditConfig) -> tuple[float, float]:
    """(safe arm EV, risky arm EV); defaults 0.1 and 1.0 * 0.25 = 0.25."""
    return config.low_arm_score, config.high_arm_score * config.high_arm_prob



class BanditEnv(TextEnv):
    name = "bandit"
    description = "Two-armed bandit: a safe arm (0.1) vs a risky arm (1.0 w.p. 0.25); one pull."
    config_class = BanditConfig

    def _reset(self, rng: np.random.Generator) -> dict:
        self._rng = rng
        safe, risky = self.config.arm_names
        self._order = (safe, risky) if rng.random() < 0.5 else (risky, safe)
        self._chosen: str | None = None
        self._last_reward = 0.0
        return {"arms": list(self._order)}

    def _step(self, action: str) -> tuple[float, bool, dict]:
        safe, risky = self.config.arm_names
        arm = named_action(action, (safe, risky), self.config.action_match)
        if arm is None:
            return 0.0, False, {"action_is_valid": False, "action_is_effective": False}
        if arm == safe:
            reward = self.config.low_arm_score
        else:
            reward = self.config.high_arm_score if self._rng.random() < self.config.high_arm_prob else 0.0
        self._chosen, self._last_reward = arm, reward
        info = {"action_is_valid": True, "action_is_effective": True, "arm": arm,
                "chose_high_ev": self._chose_high_ev()}
        return reward, True, info

    def _chose_high_ev(self) -> bool:
        safe_ev, risky_ev = expected_values(self.config)
        best = self.config.arm_names[1] if risky_ev >= safe_ev else self.config.arm_names[0]
        return self._chosen == best

    def _success(self) -> bool:
        return self._chosen is not None and self._chose_high_ev()

    def _render(self) -> str:
        if self._chosen is None:
            return STATE.format(name_a=self._order[0], name_b=self._order[1])
        return f"{self._chosen}: {self._last_reward:g} points"

    def instruction(self) -> str:
        return INSTRUCTION

    def valid_actions(self) -> list[str]:
        return [] if self._chosen is not None else list(self._order)
