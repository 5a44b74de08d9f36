"""What the outcome says (monitor/health.py's module doc): *progress* (success solved, rising,
or a held gain; I(X;Z) rising) and *failure* (no episode succeeded where that is improbable,
success fell after a gain, no reward spread while most groups fail, no gain over the start), read from
train/success (else the task reward).
Pure functions of the metric history; thresholds from `HealthSpec`."""

from __future__ import annotations

import math
from statistics import median
from typing import TYPE_CHECKING

from ragen_cli.monitor.verdict import MAD_SCALE, Reason, finite, series, smoothed

if TYPE_CHECKING:
    from ragen_cli.spec.health_spec import HealthSpec

# With every group's reward constant, train/success is the share of groups that always succeed:
# from MOSTLY up most of them are successes (a policy converged short of `solved`), so
# `no_variance` is no failure there. The midpoint, a constant of the rule, not a threshold.
MOSTLY = 0.5


def score_name(history: list[dict]) -> str | None:
    """The outcome the rules watch: train/success, else the task reward, else the reward."""
    return next((m for m in ("train/success", "reward/task_mean", "reward/mean") if series(history, m, 1)), None)


def _new_high(xs: list[float], cfg: "HealthSpec", margin: float, within: int) -> bool:
    """Whether smoothed xs set a high, `margin` above every earlier value, in the last `within` steps."""
    s = smoothed(xs, cfg.smooth)
    if len(s) <= within:
        return len(s) > 1 and max(s[1:]) > s[0] + margin
    return max(s[-within:]) > max(s[:-within]) + margin


def progress(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Why the run counts as progressing (solved, success rising, a held gain, I(X;Z) rising), or None."""
    name = score_name(history)
    if name is not None:
        xs = series(history, name)
        if solved(history, cfg):
            return Reason("solved", smoothed(xs, cfg.smooth)[-1], cfg.solved, "success is at the solved level")
        if _new_high(xs, cfg, cfg.progress_min, cfg.progress_window):
            return Reason("success_rising", xs[-1], cfg.progress_min,
                          f"{name} set a new high within {cfg.progress_window} steps")
        if (held := holding(history, cfg)) is not None:
            return held
    mi = series(history, "collapse/mi_norm")
    if mi and _new_high(mi, cfg, cfg.mi_progress_min, cfg.progress_window):
        return Reason("state_dependence_rising", mi[-1], cfg.mi_progress_min,
                      f"I(X;Z)/H(X) set a new high within {cfg.progress_window} steps")
    return None


def sampling_margin(history: list[dict], name: str, level: float, cfg: "HealthSpec") -> float:
    """`fall_z` standard errors of a smoothed success at `level`: sqrt(p (1 - p) / n) with n the
    episodes behind `smooth` steps (`smooth` x the mean train/episodes of the last `smooth`
    steps). 0 for other scores or when the count is unknown."""
    episodes = series(history, "train/episodes", cfg.smooth)
    if name != "train/success" or not episodes or cfg.fall_z == 0:
        return 0.0
    n = cfg.smooth * sum(episodes) / len(episodes)
    return cfg.fall_z * math.sqrt(max(level * (1 - level), 0.0) / n)


def own_noise(xs: list[float], cfg: "HealthSpec") -> float:
    """`fall_z` standard errors of a smoothed value, from the run's own step-to-step changes over the
    last `window` steps: sd(x) = 1.4826 MAD(x_t - x_t-1) / sqrt 2, over `smooth` steps / sqrt(smooth)."""
    tail = xs[-cfg.window - 1 :]
    d = [b - a for a, b in zip(tail, tail[1:])]
    if len(d) < 2:
        return 0.0
    med = median(d)
    return cfg.fall_z * MAD_SCALE * median(abs(x - med) for x in d) / math.sqrt(2 * cfg.smooth)


def holding(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """A gain held: smoothed train/success at least MOSTLY, above its start by more than the noise
    and within the noise of its peak (the noise: the binomial margin or the run's own, the larger)."""
    if score_name(history) != "train/success":
        return None
    xs = series(history, "train/success")
    s = smoothed(xs, cfg.smooth)
    peak = max(s)
    noise = max(sampling_margin(history, "train/success", peak, cfg), own_noise(xs, cfg))
    if s[-1] < MOSTLY or peak - s[0] < max(cfg.progress_min, noise) or peak - s[-1] > noise:
        return None
    return Reason("holding", s[-1], peak - noise,
                  f"train/success holds its gain ({s[-1]:.3g}, within {noise:.3g} of its peak {peak:.3g})")


def solved(history: list[dict], cfg: "HealthSpec") -> bool:
    """The smoothed train/success is at `solved`, or below it by less than its sampling margin
    (`fall_z` standard errors at its own level: 0.99 over 3 x 128 episodes is within 0.0102 of 1)."""
    if score_name(history) != "train/success":
        return False
    s = smoothed(series(history, "train/success"), cfg.smooth)[-1]
    return s >= cfg.solved - sampling_margin(history, "train/success", s, cfg)


def wiped_out(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """No episode succeeded in this step, nor in the steps of the streak of zeros it ends, although
    the smoothed success p before the streak made its first step improbable: (1 - p)^G at most the
    one-sided normal tail of `fall_z` (2.3% at 2), G that step's groups (`train/groups`).
    Rollouts of one group share their initial state; if each group's were all-or-nothing, a step
    would hold only its groups as independent draws, the fewest it can, so (1 - p)^G bounds the
    chance of a step of zeros from a policy still at p. A run that breaks into garbage replies does
    this while it narrows nothing but its reward spread (docs/health.md): a collapse beside one
    narrowing signal (health._judge). The first step alone must be improbable: a long streak after
    a small p (a Bandit policy passing through the safe arm) is not a break."""
    if not history or history[-1].get("train/success") != 0:
        return None  # the common case, before any scan of the history
    steps = [r for r in history if finite(r.get("train/success"))]
    k = next((i for i, r in enumerate(reversed(steps)) if r["train/success"] != 0), len(steps))
    before = smoothed([r["train/success"] for r in steps[:len(steps) - k]], cfg.smooth)
    groups = steps[len(steps) - k].get("train/groups")
    if not before or not finite(groups) or groups < 1:
        return None
    p, limit = before[-1], 0.5 * math.erfc(cfg.fall_z / math.sqrt(2))
    chance = (1 - p) ** groups
    if chance > limit:
        return None
    return Reason("wiped_out", chance, limit, f"no episode succeeded in the last {k} step(s), after a smoothed "
                  f"train/success of {p:.2f}: even with every group's rollouts all-or-nothing, {groups:g} groups all "
                  f"fail in one step with chance {chance:.2g} (limit {limit:.2g})", "collapse")


def failure(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Evidence that narrowing has become a collapse: no episode of the step succeeded where that
    is improbable (`wiped_out`), success fell after a gain, no group has any reward variance left
    while most fail, or success never rose `progress_min` above its start (smoothed)."""
    if (gone := wiped_out(history, cfg)) is not None:
        return gone
    name = score_name(history)
    s = smoothed(series(history, name), cfg.smooth) if name is not None else []
    if s:
        peak, start = max(s), s[0]
        noise = sampling_margin(history, name, peak, cfg)  # a gain and a fall beyond sampling noise
        if peak - start >= max(cfg.progress_min, noise) and peak - s[-1] >= noise \
                and s[-1] - start <= cfg.fall_ratio * (peak - start):
            return Reason("success_fell", s[-1], start + cfg.fall_ratio * (peak - start),
                          f"{name} fell to {s[-1]:.3g} from its peak {peak:.3g} (limit: {cfg.fall_ratio:.0%} of the gain kept)",
                          "collapse")
    zero = series(history, "filter/zero_std_frac", cfg.smooth)
    if len(zero) == cfg.smooth and min(zero) >= cfg.dead_frac and not (name == "train/success" and s[-1] >= MOSTLY):
        return Reason("no_variance", min(zero), cfg.dead_frac,
                      f"{min(zero):.0%} of groups have one reward for all their rollouts: no learning signal left", "collapse")
    if len(s) > 1 and max(s) - s[0] < cfg.progress_min:
        return Reason("no_gain", max(s) - s[0], cfg.progress_min,
                      f"{name} has gained nothing over its start ({max(s) - s[0]:+.3g})", "collapse")
    return None
