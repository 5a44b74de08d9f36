"""An env for tests/test_overlap_failure.py and tests/test_rollback_branch.py: the bandit, except
that on one rank (FLAKY_RANK, default 1; the launcher's RANK, 0 without one) its reset raises once
this process has started FLAKY_AFTER episodes (default 4), as an env whose server went away
would. Used as `env.train.name=flaky_bandit:FlakyBandit` with this folder on PYTHONPATH.

With 2 groups x 2 rollouts on 2 ranks, each rank starts 2 episodes per batch: on rank 1, step 1's
batch is episodes 1-2, the batch rolled out during step 1's update 3-4, and the one rolled out
during step 2's update fails at episode 5."""

from __future__ import annotations

import os

from ragen_cli.envs.bandit import BanditEnv

started = 0  # episodes this process started


class EnvServerGone(RuntimeError):
    """What the flaky env raises (not an EnvFailure: any error of the rollout thread stops the run)."""


class FlakyBandit(BanditEnv):
    def _reset(self, rng):
        global started
        started += 1
        rank = os.environ.get("RANK", "0")
        if rank == os.environ.get("FLAKY_RANK", "1") and started > int(os.environ.get("FLAKY_AFTER", "4")):
            raise EnvServerGone(f"flaky bandit on rank {rank}: the env server went away at episode {started}")
        return super()._reset(rng)
