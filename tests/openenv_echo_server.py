"""A real OpenEnv server for the adapter's tests, built with openenv-core's server API.

    python tests/openenv_echo_server.py --port 8123 [--host 127.0.0.1] [--sessions 16]

The game: the seed picks a word (`WORDS[seed % 8]`); the observation asks for it. Saying the
word pays 1 and ends the episode; anything else pays 0 and echoes it back. Special messages
drive the failure tests: `sleep:S` answers after S seconds, `exit` kills the server process.
"""

from __future__ import annotations

import argparse
import os
import time

from openenv.core.env_server import Environment, create_app
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

WORDS = ("apple", "river", "stone", "cloud", "tiger", "piano", "lemon", "orbit")


class SayAction(Action):
    message: str = Field(..., min_length=1, description="The word to say")


class SayObservation(Observation):
    prompt: str = Field(default="", description="What the env says")
    steps: int = Field(default=0, description="Steps taken in this episode")


class SayWordEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)
        self._word = WORDS[0]

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs) -> SayObservation:
        self._word = WORDS[(seed or 0) % len(WORDS)]
        self._state = State(episode_id=episode_id, step_count=0)
        return SayObservation(prompt=f"Say the word {self._word}.", done=False, reward=None)

    def step(self, action: SayAction, timeout_s: float | None = None, **kwargs) -> SayObservation:
        self._state.step_count += 1
        text = action.message.strip()
        if text.startswith("sleep:"):
            time.sleep(float(text.split(":", 1)[1]))
        if text == "exit":
            os._exit(3)
        right = text.lower() == self._word
        prompt = "Right." if right else f"You said {text!r}. Say the word {self._word}."
        return SayObservation(prompt=prompt, steps=self._state.step_count, done=right, reward=1.0 if right else 0.0)

    @property
    def state(self) -> State:
        return self._state


def build_app(sessions: int):
    return create_app(SayWordEnvironment, SayAction, SayObservation, env_name="say_word",
                      max_concurrent_envs=sessions)


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sessions", type=int, default=16)
    args = parser.parse_args()
    uvicorn.run(build_app(args.sessions), host=args.host, port=args.port, log_level="warning")
