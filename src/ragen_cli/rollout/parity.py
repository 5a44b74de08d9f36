"""The weight-sync check: does the rollout engine serve the weights the trainer just made?

Two scorers of the same tokens never agree exactly: in fp32 the trainer's and the engine's
kernels differ by ~1e-6 nats per token, in bf16 by 0.01-0.3 (and one row's largest gap is itself
a noisy number: a rule built on it stopped healthy bf16 runs at random). The check therefore
works on many tokens at once and on root-mean-square gaps, over the probe's `k` sampled tokens:

    noise = rms(engine_before - trainer_old)   same weights on both sides (before the update)
    gap   = rms(engine_after  - trainer_new)   after the sync: the engine against the new weights
    old   = rms(engine_after  - trainer_old)   the engine against the weights before the update
    moved = rms(trainer_new   - trainer_old)   how far the update moved these log-probs (exact:
                                               both come from the trainer's own kernel)

Two ways a sync fails:

1. **Off** (half-synced, wrong or corrupted weights): `gap > max(threshold, factor x noise)`.
   If each token's kernel disagreement were independent with one variance, gap^2 / noise^2 would
   follow an F(k, k) distribution, whose log has standard deviation about sqrt(4 / k); with
   k >= 64 and factor 3 a healthy sync exceeds the bound with probability ~1e-18 (9x in
   variance is 8.8 standard deviations). Real gaps are heavier-tailed and not independent, so
   the factor is a margin, not a fit; `bench/parity_gaps.py` measures it.
   The noise is measured on tokens the old weights scored, and a kernel's error on a token's
   log-prob depends on how sure the model is of it: a logit error `eps` moves `log p_t` by
   `(1 - p_t) eps_t - sum_{j != t} p_j eps_j`, at most `2 (1 - p_t) max|eps|`
   (`bench/parity_noise_peak.py`: SmolLM2's bf16-vs-fp32 gap is 0.072-0.084 x rms(1 - p) in every
   bin from 1 - p ~ 6e-4 to 0.92, 15-83 tokens a bin). An
   update that makes the probe's tokens less likely thus raises the kernels' disagreement after
   it; the check scales the noise by `s_new / s_old`, `s = rms(1 - p)` over the probe under the
   trainer's new and old weights (`noise_after`; never below the measured noise, and `s_old` at
   least PEAK_FLOOR so that a probe of near-certain tokens cannot make it unbounded). Without
   this a bf16 run at 16x lr, its policy flipping between templates, stopped with a gap of 0.29
   against 3 x 0.030 measured on tokens it had been sure of (docs/health.md).
   One step's noise is itself a noisy scale: in bf16 it moves by 2-5x from step to step with the
   probe's tokens (0.002-0.24 in that run). So `noise_after` is also never below `recent`, the
   largest noise the run measured in its last RECENT steps: healthy bf16 runs at 16x lr stopped
   on the one-step scale at 1.0-3.2 times the tolerance with lags near 0, and pass with `recent`
   (docs/experiments/parity-bf16.md). Over the
   1310 recorded bf16 syncs of the health corpora's 139 runs (`bench/parity_corpus.py`) the gap
   reaches 0.81 of the tolerance set with `recent` (99th percentile 0.53).
   Every noise is measured after the previous sync, so it holds whatever that sync left wrong: an
   engine that misses a little more at every sync (a weight it never receives while the trainer
   moves it) shows the same standing error in the next step's noise as in this step's gap, and a
   bound read from the last steps' noise rises with the drift it should catch (the max, a median
   or a minimum of them alike, only later). So `noise_after` is also never above `reference`
   times REFERENCE_CEILING, `reference` the noise of the run's first sync: measured before any
   sync, on the weights the engine loaded itself (or the warm start's push), the one noise no
   earlier sync can have raised. It is carried in every sync's record (`sync/parity_noise_ref`)
   and so survives a resume and a rollback (the metric history is checkpointed); the first sync
   sets it and is judged on its own noise, so a sync that never reaches the engine is stopped at
   step 1 as before. Healthy bf16 noise rises with training (the weights move away from the
   ones the kernels agreed on): in the health corpora's 5036 recorded syncs (177 runs) it reaches
   12.7 times the first sync's and the gap 13.5 times (a 16x-lr run), and a healthy 16x run's
   stopped sync (resumed, it ran to the end) had a gap 16.8 times its first noise. With the
   ceiling at 8 that stop is 0.70 of the tolerance `factor x 8 x reference`, the recorded syncs'
   largest gap stays at 0.81 of its tolerance and none is stopped (at 6 the stop is 0.94 of it, at
   4 a recorded sync is stopped: `bench/parity_corpus.py`). A drifting engine is thus stopped
   once its gap passes `factor x REFERENCE_CEILING x reference` (24 times the first noise with the
   default factor), whatever the steps before it measured; a smaller standing error is within what
   healthy bf16 runs reach and is not decided here.
2. **Stale or partly synced** (the engine still serves the old weights, or some of them): an
   engine whose log-probs lie a fraction `f` of the way back from the new weights to the old
   ones has `gap = f x moved` and `old = (1 - f) x moved`, so `gap^2 - old^2 = (2f - 1) moved^2`
   and `lag = (gap^2 - old^2) / (2 moved^2) + 1/2` estimates `f`: 0 for a fresh engine, 1 for a
   stale one, about 1/2 for one that took half its layers. With kernel noise `eps` (rms `noise`)
   the estimate errs by `mean(delta eps) / moved^2` (`delta` = new - old per token), whose
   standard deviation is at most `noise / (moved x sqrt(k))` when `eps` is independent of the
   update. It is not: in bf16 part of each update is rounded away (a LoRA delta merged into
   bf16 weights, kernels rounding the new and the old logits alike), which shows as a lag of
   about `noise / moved` in a healthy sync (seen in a real merged-LoRA run on SmolLM2 in bf16,
   specs/larger.yaml: lag 0.63, 0.56, 0.36 at noise / moved 0.84, 0.64, 0.37). So a sync fails
   when the update is decidable (`moved >= 2 x unit`), `lag > 1/4`, and the part of the update
   the engine misses, `lag x moved`, is at least `2 x unit`, with
   `unit = max(2 x noise_after, STALE_Z x noise_after / sqrt(k))`: a stale engine is decided
   from `moved >= 2 x unit`, a half-synced one from `4 x unit`. The rounding part stays
   below that: the 1310 bf16 syncs of the health corpora's runs (`bench/parity_corpus.py`) miss at
   most 1.07 units (median 0.30 of those with lag > 1/4), and the random part is past STALE_Z =
   4 standard deviations (one-sided normal tail 3e-5 per sync). A plain `lag > 1/2` once
   `moved >= 2 x unit` would stop healthy bf16 syncs whose rounding lags 0.55 at a miss of
   1.27 units (docs/experiments/parity-bf16.md). As
   the gap of a lagging engine is about `lag x moved`, in bf16 the size check above (3 x
   noise_after < 2 units) stops a stale or half-synced engine first; the lag decides where the
   tolerance is `threshold`, as in fp32.
   In fp32 the merge rounds too, at fp32's resolution: the kernels differ by ~1e-6 nats per token
   on an unpeaked policy, but on a peaked one the probe's noise falls far below that. An fp32
   Bandit run (lr 2e-3, no filter) collapsed onto one reply (entropy 0) had updates halving every
   step, and its lag rose as they shrank (0.09, 0.19, 0.44 at moved 3.4e-6, 1.3e-6, 6.7e-7, noise
   ~4e-8): the share of each update a merged fp32 copy rounds away. A lag of 0.56 would then stop
   that healthy sync. So `unit` is at least FP32_RESOLUTION; in
   bf16 (noise >= 1e-3) the floor never binds. A real fp32 update (moved >= 2e-6) is decided; in
   bf16 one that moves the log-probs by 4 times the kernels' noise. A smaller update leaves a lagging
   engine within a few times the kernels' own noise of the fresh one: not decided (the size
   check above still applies; an engine that stays stale drifts past it within a few steps, and
   bf16 runs correct the sampler mismatch with
   `algorithm.rollout_is`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

STALE_Z = 4.0
"""Standard deviations of margin before a sync is called stale (one-sided tail 3.2e-5)."""

RECENT = 5
"""Steps of measured noise (`sync/parity_noise`) below whose largest the expected noise is never
taken (module doc)."""

REFERENCE_CEILING = 8.0
"""The expected noise is never above this many times the noise of the run's first sync, the one
measured before any sync could leave the engine wrong (module doc: a drift cannot raise it)."""

PEAK_FLOOR = 0.01
"""The least rms(1 - p) the noise is scaled from (module doc): tokens surer than 99% count as 99%."""

FP32_RESOLUTION = 1e-6
"""Nats per token: the log-prob change below which fp32 kernels and a merged fp32 copy of the
weights do not reliably resolve an update (the trainer's and the engine's fp32 kernels differ by
about this much on an unpeaked policy). No lag is decided on a smaller unit (module doc)."""


class ParityError(RuntimeError):
    """Trainer and rollout engine disagree after a weight sync (stale or half-applied sync)."""


def rms(a: list[float], b: list[float]) -> float:
    """Root-mean-square difference of two equally long, non-empty log-prob lists."""
    if len(a) != len(b) or not a:
        raise ValueError(f"parity probe needs two equal, non-empty sequences (got {len(a)} and {len(b)})")
    return math.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(a, b)) / len(a))


def unsure(logprobs: list[float]) -> float:
    """rms(1 - p) over a probe's log-probs: how far from certain the scorer is of its tokens."""
    return math.sqrt(sum((1.0 - math.exp(min(float(x), 0.0))) ** 2 for x in logprobs) / len(logprobs))


def lags(lag: float, moved: float, unit: float) -> bool:
    """The lag rule (module doc): an update of at least 2 units (decidable), `lag > 1/4`, and the
    part of it the engine misses, `lag x moved`, at least 2 units. False for a nan lag."""
    return moved >= 2 * unit and lag > 0.25 and lag * moved >= 2 * unit


@dataclass(frozen=True)
class RecentNoise:
    """What the run's earlier syncs say about the kernels' noise (`recent_noise`)."""

    largest: float = 0.0  # the largest `sync/parity_noise` of the last RECENT syncs (0 for none)
    reference: float | None = None  # the run's first sync's noise (`sync/parity_noise_ref`); None: none yet


@dataclass(frozen=True)
class SyncCheck:
    """The probe's numbers after one sync (module doc) and its verdict: ok, lagging or off."""

    tokens: int
    noise: float
    noise_after: float  # expected after the update (module doc): max(scaled noise, recent), at most the ceiling
    gap: float
    old: float
    moved: float
    lag: float  # nan when moved is 0
    decidable: bool  # moved far enough above the noise to tell a stale engine from a fresh one
    tolerance: float  # the largest gap an "ok" sync may have
    verdict: str
    reference: float = 0.0  # the run's first sync's noise (this one's, at the first sync)

    def metrics(self) -> dict[str, float]:
        out = {"sync/parity_gap": self.gap, "sync/parity_noise": self.noise,
               "sync/parity_noise_after": self.noise_after, "sync/parity_moved": self.moved,
               "sync/parity_noise_ref": self.reference}
        if not math.isnan(self.lag):
            out["sync/parity_lag"] = self.lag
        return out


def judge_sync(trainer_old: list[float], engine_before: list[float], trainer_new: list[float],
               engine_after: list[float], threshold: float, factor: float,
               recent: RecentNoise | None = None) -> SyncCheck:
    """The sync check on one probe (module doc): pure, on the probe tokens' four log-prob lists.
    `recent`: the run's earlier syncs (`recent_noise`); None for the first sync."""
    recent = recent or RecentNoise()
    k = len(trainer_old)
    noise, gap = rms(engine_before, trainer_old), rms(engine_after, trainer_new)
    old, moved = rms(engine_after, trainer_old), rms(trainer_new, trainer_old)
    lag = (gap ** 2 - old ** 2) / (2 * moved ** 2) + 0.5 if moved > 0 else math.nan
    noise_after = max(noise * max(1.0, unsure(trainer_new) / max(unsure(trainer_old), PEAK_FLOOR)), recent.largest)
    reference = noise if recent.reference is None else recent.reference
    if recent.reference is not None:  # the first sync sets the reference and is judged on its own noise
        noise_after = min(noise_after, REFERENCE_CEILING * reference)
    unit, tolerance, verdict = sync_verdict(gap, lag, moved, noise_after, k, threshold, factor)
    decidable = moved > 0 and moved >= 2 * unit
    return SyncCheck(k, noise, noise_after, gap, old, moved, lag, decidable, tolerance, verdict, reference)


def sync_verdict(gap: float, lag: float, moved: float, noise_after: float, k: int, threshold: float,
                 factor: float) -> tuple[float, float, str]:
    """(unit, tolerance, verdict) from a probe's numbers (module doc): "off" past the size bound,
    "lagging" by `lags`, else "ok". The lag estimate errs by up to noise / moved (rounding) plus a
    random part of standard deviation noise / (moved sqrt(k)): the unit is STALE_Z of those, and
    never below fp32's resolution."""
    unit = max(2 * noise_after, STALE_Z * noise_after / math.sqrt(k), FP32_RESOLUTION)
    tolerance = max(threshold, factor * noise_after)
    if not (math.isfinite(gap) and gap <= tolerance):
        return unit, tolerance, "off"
    return unit, tolerance, "lagging" if lags(lag, moved, unit) else "ok"


def recent_noise(history: list[dict]) -> RecentNoise:
    """From the run's metric records: the largest `sync/parity_noise` in the last RECENT that have
    one (0 for none) and the reference, the latest record's `sync/parity_noise_ref` (None for none:
    the coming sync is the run's first). Scans from the end, so a long run's history costs about
    O(RECENT)."""
    noises = (float(r["sync/parity_noise"]) for r in reversed(history) if r.get("sync/parity_noise") is not None)
    refs = (float(r["sync/parity_noise_ref"]) for r in reversed(history) if r.get("sync/parity_noise_ref") is not None)
    return RecentNoise(max(itertools.islice(noises, RECENT), default=0.0), next(refs, None))


def ruling(checks: list[SyncCheck], rank: int) -> int:
    """The rank whose check a multi-process run acts on, when each process judged its own engine's
    sync: the first that is not "ok", else `rank`'s own. Every rank then stops alike (a rank that
    stopped alone would leave the others waiting in the step's next collective)."""
    return next((r for r, c in enumerate(checks) if c.verdict != "ok"), rank)


def check_sync(check: SyncCheck, threshold: float, factor: float, rank: int | None = None) -> SyncCheck:
    """`check`, or ParityError saying what is wrong and which spec fields set the bounds (and, in a
    multi-process run, whose engine: `rank`)."""
    where = "" if rank is None else f"rank {rank}'s engine: "
    if check.verdict == "off":
        raise ParityError(
            f"{where}rollout engine and trainer disagree after the weight sync: rms log-prob gap {check.gap:.4g} over "
            f"{check.tokens} tokens > {check.tolerance:.4g} (rollout.parity_threshold {threshold:g}, or "
            f"rollout.parity_noise_factor {factor:g} x {check.noise_after:.4g}, the gap {check.noise:.4g} the same weights "
            "gave before the update, scaled to how sure the new weights are of the probe's tokens, or the largest of "
            f"the last {RECENT} steps' if larger, and at most {REFERENCE_CEILING:g} x {check.reference:.4g}, the run's "
            "first sync's); the engine serves weights that are neither the new ones nor the kernels' noise away from "
            "them: a half-applied or broken sync")
    if check.verdict == "lagging":
        raise ParityError(
            f"{where}the rollout engine does not serve the weights the update made: after the sync its log-probs lie "
            f"{check.lag:.0%} of the way back to the weights from before the update (rms gap {check.gap:.4g} to the "
            f"new weights, {check.old:.4g} to the old ones, over {check.tokens} tokens the update moved by rms "
            f"{check.moved:.4g}; the kernels' noise {check.noise:.4g}, {check.noise_after:.4g} expected after the "
            "update): the weight sync did not reach the engine, or only partly")
    return check
