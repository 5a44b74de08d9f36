"""How long a Plan's run takes, estimated before it starts (`ragen train --dry-run`'s summary).

Not a calibration: a stored profile. Two runs of SmolLM2-135M on a 2-core CPU in fp32 (no native
bf16) give the cost of one turn of generation and update (`TURN_S`, whatever the batch) and of
one trajectory-turn (`ROW_TURN_S`); a step then costs

    step_s = (TURN_S + ROW_TURN_S x trajectories) x max_turns x precision factor,

max_turns the most turns an episode may take (episodes that end sooner make steps shorter). Solved
from the two measured steps (docs/experiments/performance.md, docs/experiments/scaffold.md):

    specs/bandit.yaml, fp32:   1 turn,  256 trajectories: 21.4 s = TURN_S + 256 ROW_TURN_S
    the guess template, fp32:  3 turns,  32 trajectories: 45 s  = 3 TURN_S + 96 ROW_TURN_S

gives TURN_S = 14.1 s, ROW_TURN_S = 0.0285 s. bf16 on a CPU with native bf16 (avx512_bf16, amx)
ran specs/bandit.yaml in 7.77 s a step against fp32's 21.4 s: factor 0.363. A validation costs its
episodes' trajectory-turns at ROW_TURN_S (`val_s`: no update, so no TURN_S; one before the first
step, one every `val.every` steps, one after the last), the start (model load, engine start)
`START_S`. Checked against the one whole run measured: the guess template in fp32 took 9:22
(scaffold.md); the formula gives 9.7 min. A model, device or precision the profile has not measured gets no estimate,
and the summary says so, rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

PROFILED_MODEL = "smollm2-135m-instruct"
PROFILED_CPUS = 2
TURN_S = 14.1  # seconds per turn of a step (engine call, update), any batch; fp32
ROW_TURN_S = 0.0285  # seconds per trajectory-turn; fp32
NATIVE_BF16 = 7.77 / 21.38  # specs/bandit.yaml a step: native bf16 / fp32 (performance.md)
START_S = 30.0  # model load and engine start (scaffold.md: 9:22 wall time, 8.8 min at step 12)


@dataclass(frozen=True)
class Estimate:
    """Seconds per training step and for the whole run (validations and start included), or
    `step_s` None with `why` naming what the profile lacks."""

    step_s: float | None
    run_s: float | None
    basis: str


def step_s(trajectories: int, max_turns: int, factor: float) -> float:
    return (TURN_S + ROW_TURN_S * trajectories) * max_turns * factor


def val_s(episodes: int, max_turns: int, factor: float) -> float:
    """A validation: its episodes' trajectory-turns, without a step's per-turn cost (mostly the update)."""
    return ROW_TURN_S * episodes * max_turns * factor


def estimate(model: str, device: str, precision: str, native_bf16: bool, cpus: int, trajectories: int,
             max_turns: int, steps: int, val_rows: int, val_every: int) -> Estimate:
    """The estimate for a run of `steps` steps of `trajectories` trajectories of at most `max_turns`
    turns, validating `val_rows` episodes every `val_every` steps (0: never)."""
    if device != "cpu":
        return Estimate(None, None, "no stored profile for GPUs yet (bench/step_profile.py measures one)")
    if model != PROFILED_MODEL:
        return Estimate(None, None, f"the stored profile is of {PROFILED_MODEL}, not {model}")
    if precision == "bf16" and not native_bf16:
        return Estimate(None, None, "bf16 emulated on this CPU (no native bf16): unprofiled, and ~100x slower")
    if precision not in ("fp32", "bf16"):
        return Estimate(None, None, f"no stored profile for {precision} on a CPU")
    factor = NATIVE_BF16 if precision == "bf16" else 1.0
    step = step_s(trajectories, max_turns, factor)
    validations = (1 + steps // val_every + (1 if steps % val_every else 0)) if val_every else 0  # before, every, after
    run = START_S + steps * step + validations * val_s(val_rows, max_turns, factor)
    cores = "" if cpus == PROFILED_CPUS else f"; this machine has {cpus} cores, not scaled"
    basis = (f"stored profile: {PROFILED_MODEL} on {PROFILED_CPUS} CPU cores in {precision}, from specs/bandit.yaml "
             f"and the guess template (compile/estimate.py){cores}")
    return Estimate(step, run, basis)


def duration(seconds: float) -> str:
    """8.2 -> '8 s', 95 -> '1.6 min', 4000 -> '1.1 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
