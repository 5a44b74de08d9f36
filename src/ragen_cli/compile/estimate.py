"""How long a Plan's run takes, estimated before it starts (`ragen train --dry-run`'s summary).

Not a calibration: a stored profile, fitted from the timers of three whole runs of SmolLM2-135M on
a 2-core CPU with native bf16 (AMD EPYC, avx512_bf16), one at a time on the idle machine, on
2026-12-05 (`bench/estimate_check.py`; the runs' numbers in data/estimate/, the check in
docs/experiments/performance.md, "The dry run's estimate"). A step of T turns (the most an episode
may take), R trajectories and K kept trajectories costs

    step_s = STEP_S + T x ROLLOUT_TURN_S + ROLLOUT_ROW_S x R x T(T+1)/2
             + (TRAIN_ROW_S x (1 + critic) + PASS_ROW_S x passes) x K x T(T+1)/2

T(T+1)/2 because turn t of a trajectory carries the t turns before it in its context, so tokens,
and time, grow with it; `passes` counts the forwards before the update (old log-probs, unless the
update is one optimizer step; the reference model, when there is a KL term). Fitted from the
single-turn runs' timers:

    sync + parity probe + collapse metrics, a step: 3.65 s (dataset template), 3.31 s (specs/bandit.yaml):
        STEP_S = 3.48 s
    rollout: 1.68 s for 32 trajectories (dataset), 7.61 s for 256 (bandit): 0.0265 s a trajectory, 0.83 s a turn
    update: 3.50 s for 30.9 kept trajectories, one pass (bandit): 0.113 s a kept trajectory
    reference forward: 1.32 s for 32 kept (dataset): 0.041 s; with its update (4.29 s) the dataset's
        0.175 s a kept trajectory = 0.113 + 0.062 (PASS_ROW_S, one pass)
    validation (the guess template's too, the one use of it in the fit): 5.0 s (40 episodes), 3.1 s
        (64), 8.8 s (32 of 3 turns: 192 units), least squares: VAL_S = 2.53 s + VAL_ROW_S = 0.0315 s a unit
    start (model load, engine start, checkpoints): 16.4 s and 16.6 s left over in the two runs' wall time

The multi-turn guess template's steps (3 turns, 32 trajectories, 8 kept, 4 optimizer steps) are held
out of the fit: the formula gives 19.5 s a step against 21.2 s measured. A critic's update is counted as
a second update (not measured). fp32 from the measured ratios of specs/bandit.yaml
(docs/experiments/performance.md, 2026-11-26/27): x 1.40 on a CPU with native bf16 (10.9 s against
7.77 s), x 2.75 on one without (AVX2 only: 21.38 s). A model, device or precision the profile has
not measured gets no estimate, and the summary says so, rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

PROFILED_MODEL = "smollm2-135m-instruct"
PROFILED_CPUS = 2
STEP_S = 3.48  # a step's weight sync, parity probe and collapse metrics
ROLLOUT_TURN_S = 0.83  # an engine call a turn, any batch
ROLLOUT_ROW_S = 0.0265  # a trajectory's generation, per turn of context
TRAIN_ROW_S = 0.113  # a kept trajectory's update (forward and backward), per turn of context
PASS_ROW_S = 0.062  # a kept trajectory's forward before the update (old log-probs or the reference)
VAL_S = 2.53  # a validation, whatever its size
VAL_ROW_S = 0.0315  # a validation episode, per turn of context
START_S = 16.5  # model load, engine start and checkpoints
FP32_NATIVE_BF16_CPU = 10.9 / 7.77  # fp32 / bf16 step, specs/bandit.yaml, the same CPU
FP32_NO_BF16_CPU = 21.38 / 7.77  # fp32 on a CPU without native bf16 (AVX2) / bf16 on one with it


@dataclass(frozen=True)
class Estimate:
    """Seconds per training step and for the whole run (validations and start included), or
    `step_s` None with `why` naming what the profile lacks."""

    step_s: float | None
    run_s: float | None
    basis: str


def context_turns(max_turns: int) -> int:
    """Turns of context summed over a trajectory's turns: 1 + 2 + ... + T."""
    return max_turns * (max_turns + 1) // 2


def step_s(trajectories: int, kept: int, max_turns: int, passes: int, critic: bool) -> float:
    """A training step's seconds in bf16 on the profiled CPU (the module's formula)."""
    units = context_turns(max_turns)
    train = (TRAIN_ROW_S * (2 if critic else 1) + PASS_ROW_S * passes) * kept * units
    return STEP_S + ROLLOUT_TURN_S * max_turns + ROLLOUT_ROW_S * trajectories * units + train


def val_s(episodes: int, max_turns: int) -> float:
    """A validation's seconds in bf16: generation only."""
    return VAL_S + VAL_ROW_S * episodes * context_turns(max_turns)


def estimate(model: str, device: str, precision: str, native_bf16: bool, cpus: int, trajectories: int, kept: int,
             max_turns: int, passes: int, critic: bool, steps: int, val_rows: int, val_every: int) -> Estimate:
    """The estimate for a run of `steps` steps of `trajectories` trajectories (`kept` of them
    trained, after `passes` forwards each) of at most `max_turns` turns, validating `val_rows`
    episodes every `val_every` steps (0: never)."""
    if device != "cpu":
        return Estimate(None, None, "no stored profile for GPUs yet (bench/step_profile.py measures one)")
    if model != PROFILED_MODEL:
        return Estimate(None, None, f"the stored profile is of {PROFILED_MODEL}, not {model}")
    if precision == "bf16" and not native_bf16:
        return Estimate(None, None, "bf16 emulated on this CPU (no native bf16): unprofiled, and ~100x slower")
    if precision not in ("fp32", "bf16"):
        return Estimate(None, None, f"no stored profile for {precision} on a CPU")
    factor = 1.0 if precision == "bf16" else FP32_NATIVE_BF16_CPU if native_bf16 else FP32_NO_BF16_CPU
    step = step_s(trajectories, kept, max_turns, passes, critic) * factor
    validations = (1 + steps // val_every + (1 if steps % val_every else 0)) if val_every else 0  # before, every, after
    run = START_S + steps * step + validations * val_s(val_rows, max_turns) * factor
    cores = "" if cpus == PROFILED_CPUS else f"; this machine has {cpus} cores, not scaled"
    basis = (f"stored profile: {PROFILED_MODEL} on {PROFILED_CPUS} CPU cores in {precision}, fitted from "
             f"specs/bandit.yaml and the dataset template (compile/estimate.py){cores}")
    return Estimate(step, run, basis)


def duration(seconds: float) -> str:
    """8.2 -> '8 s', 95 -> '1.6 min', 4000 -> '1.1 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
