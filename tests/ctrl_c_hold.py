"""A hold for tests of Ctrl-C mid-step: `ragen train` run as

    python -c "import ctrl_c_hold; ctrl_c_hold.install(); from ragen_cli.cli import main; main()" ...

with RAGEN_TEST_HOLD=PATH (and this directory on PYTHONPATH). While PATH exists, the next
Bandit step waits (in Python, so signal handlers run within 50 ms) and touches PATH.held when it
starts waiting: a test creates PATH, waits for PATH.held, and then knows the run is inside a
step (its rollout or its validation), however fast or slow this machine is. The env's rules are untouched."""

from __future__ import annotations

import os
import time
from pathlib import Path


def install() -> None:
    from ragen_cli.envs.bandit import BanditEnv

    hold = Path(os.environ["RAGEN_TEST_HOLD"])
    step = BanditEnv.step

    def held_step(self, action):
        if hold.exists():
            Path(f"{hold}.held").touch()
            while hold.exists():
                time.sleep(0.05)
        return step(self, action)

    BanditEnv.step = held_step
