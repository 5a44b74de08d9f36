"""An OpenEnv server for ragen to train against: say the word the prompt asks for.

ragen starts it (the spec's `env.train.config.command`) on 127.0.0.1 on a free port, talks to
it over OpenEnv's WebSocket protocol (one session per episode) and stops it at the end. Run it
by hand to poke at it:

    python my_server.py --port 8000
    curl localhost:8000/health
    python -c "from openenv.core import GenericEnvClient as C; e = C(base_url='http://localhost:8000').sync(); \\
        e.connect(); print(e.reset(seed=3)); print(e.step({'message': 'cloud'}))"

It is built with openenv-core's server API: an Action and an Observation (pydantic models), an
Environment with reset(seed) and step(action), and create_app(...) served by uvicorn. The seed
picks the word, so the same seed starts the same episode; a state-blind policy says the right
word 1 time in 8. Replace the game with yours; keep SUPPORTS_CONCURRENT_SESSIONS = True and
--sessions at least groups x group_size (every episode of a step is a session at once).
"""

from __future__ import annotations

import argparse

from openenv.core.env_server import Environment, create_app
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

WORDS = ("apple", "river", "stone", "cloud", "tiger", "piano", "lemon", "orbit")


class SayAction(Action):
    message: str = Field(..., min_length=1, description="The word to say")


class SayObservation(Observation):
    prompt: str = Field(default="", description="What the env says")


class SayWordEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True  # each WebSocket session gets its own instance

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
        said = action.message.strip().strip(".!").lower()
        if said == self._word:
            return SayObservation(prompt="Right.", done=True, reward=1.0)
        return SayObservation(prompt=f"You said {said!r}. Say the word {self._word}.", done=False, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--sessions", type=int, default=64, help="concurrent episodes (>= groups x group_size)")
    args = parser.parse_args()
    app = create_app(SayWordEnvironment, SayAction, SayObservation, env_name="say_word",
                     max_concurrent_envs=args.sessions)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
