"""Your own agent program as the env (`env.train.name: agent`; docs/envs.md, "Bring your own agent").

    env:
      train:
        name: agent
        config:
          entry: my_agent:run              # fn(client, row) -> float | None
          path: data/train.jsonl           # the task rows, read as the dataset adapter reads them
          rewards: [my_rewards:correct]    # optional: scores the last reply when run returns None
          timeout_s: 120                   # an episode running longer is a failed episode
          max_concurrency: 16              # episodes running at once

`run(client, row)` is one episode: `client` is an `openai.OpenAI` client whose base URL is this
episode's on ragen's endpoint (rollout/endpoint.py; `client.base_url`, and any key, for an agent
framework that takes those instead), `row` the task row (a dict: the prompt column and every
other column). It calls the model as often as it likes and returns the episode's reward, or
None to have the reward functions (TRL's signature, as the dataset adapter calls them) score the
text of the last reply. Rows are picked by episode seed as the dataset adapter picks them.

The rollout for this env is rollout/agent_driver.py: ragen serves the policy, runs the agents
(bounded, concurrently), and turns each episode's recorded requests into a trajectory. An agent
that raises, runs past `timeout_s`, never calls the model, or returns something that is not a
number or None is one failed episode (reward 0, nothing of it trained; `agent/failed_ratio`);
a step whose every episode failed stops the run, naming the agent's own last frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragen_cli.envs.adapters.dataset_env import DatasetConfig, DatasetEnv


@dataclass
class AgentConfig(DatasetConfig):
    entry: str = ""
    """Your agent, `module:function`: fn(client, row) -> float | None, one episode (an `openai.OpenAI` client on ragen's endpoint, the task row); imported from the spec's folder first."""
    timeout_s: float = 120.0
    """Longest time one episode may run; past it the episode fails (its requests are not trained)."""
    max_concurrency: int = 16
    """Episodes running at once (each in its own thread; their requests share engine calls)."""
    system_prompt: str = ""
    """Unused by the agent env (the agent writes its own messages); kept for the dataset adapter's fields."""

    needs_rewards = False  # (not a field) `run` may return the reward itself

    def __post_init__(self) -> None:
        from ragen_cli.envs.base import import_ref

        if not self.entry:
            raise ValueError("entry is required: your agent, module:function with fn(client, row) -> float | None")
        if not self.timeout_s > 0 or self.max_concurrency < 1:
            raise ValueError("timeout_s and max_concurrency must be positive")
        if self.feedback:
            raise ValueError("feedback is the dataset adapter's; an agent makes its own turns")
        super().__post_init__()
        if not callable(import_ref(self.entry, "agent entry")):
            raise ValueError(f"entry {self.entry!r} is not a function")


class AgentEnv(DatasetEnv):
    """A task row per episode seed and the scoring of a final reply; the episode itself is the
    user's program (module docstring)."""

    name = "agent"
    description = "Your own agent program (OpenAI client) on ragen's endpoint; rows from a data file."
    config_class = AgentConfig
    drives_itself = True  # rollout/driver.py hands these envs to rollout/agent_driver.py

    def __init__(self, config: Any = None):
        from ragen_cli.envs.base import import_ref

        super().__init__(config)
        self.entry = import_ref(self.config.entry, "agent entry")

    def score(self, completion: str) -> tuple[float, dict]:
        """The reward functions' weighted sum for the last reply (as the dataset adapter scores an
        answer) and their values; ValueError when there is none to call."""
        if not self.fns:
            raise ValueError(f"{self.config.entry} returned None and the agent env has no rewards to score the "
                             "episode (return a number, or set rewards:)")
        reward, _, info = self._step(completion)
        return reward, info
