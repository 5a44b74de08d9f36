"""Echo Trap and template-collapse detector: pure rules over the metric history (metrics.jsonl
records in step order).

RAGEN (arXiv 2504.20073, Sec. 4.1, Fig. 4): multi-turn RL collapses into the "Echo Trap": reward
variance within a group falls off a cliff, entropy drops, gradient norms spike, replies repeat a
template. RAGEN-2 (arXiv 2604.06268) adds *template collapse*: replies stop depending on the
state (I(X;Z) falls) while their entropy may stay high. But a policy that converges on the right
answer also narrows: its entropy and in-group std fall too. So the rules separate three kinds
of evidence:

- *narrowing* signals (the early warnings above; each a `Reason`): in-group std of the task
  reward, entropy, distinct bigrams, identical replies, I(X;Z) / H(X), a grad-norm spike;
- *progress* (`progress`): success has reached a new high within `progress_window` steps, or
  I(X;Z) has (the policy is learning to read the state), or success is at `solved`, or holds a
  gain within its noise (`holding`);
- *failure* (`failure`): success fell to `fall_ratio` of its peak after a gain, or every group's
  reward is constant (`dead_frac`: nothing left to learn from) while success is below 1/2 (most
  groups fail), or success has gained nothing over its start (`no_gain`). No rule counts
  elapsed steps.

Verdict: healthy while warming up (a collapse excepted), solved, or without narrowing signals;
narrowing without progress is a warning; narrowing with failure is a collapse, where `no_gain`
counts only beside a state-blind signal, `STATE_BLIND` (a slow learner stalls for a long time
too; a state-blind one that stalls has collapsed). A narrowing run that is progressing is
healthy: convergence. `no_signal` speaks separately of a run that has had no learning signal
for `no_signal_steps` steps in a row. Thresholds live in `HealthSpec` (spec/health_spec.py);
docs/health.md says how each was chosen on the run corpus.

Notation: x_t the metric at step t (records missing the metric or holding NaN are skipped);
s_t = mean of the last `smooth` values; the "recent peak" is max s over the `window` values
before the current one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import islice
from statistics import median
from typing import TYPE_CHECKING, Callable, Literal

if TYPE_CHECKING:  # monitor/ is stdlib-only at run time; the spec object is duck-typed.
    from ragen_cli.spec.health_spec import HealthSpec

Level = Literal["healthy", "warning", "collapse"]
LEVELS: tuple[Level, ...] = ("healthy", "warning", "collapse")
MAD_SCALE = 1.4826  # MAD * 1.4826 estimates the std of a normal distribution


@dataclass(frozen=True)
class Reason:
    signal: str
    value: float
    threshold: float
    message: str
    level: Level = "warning"


@dataclass(frozen=True)
class Verdict:
    level: Level
    reasons: list[Reason] = field(default_factory=list)
    step: int | None = None

    def to_event(self) -> dict:
        """Payload for `RunDir.write_event("health", step, **verdict.to_event())`. Non-finite
        numbers (a grad-norm z-score against a zero MAD is +inf) become None: strict JSON."""
        reasons = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(r).items()}
                   for r in self.reasons]
        return {"level": self.level, "reasons": reasons}


def series(history: list[dict], name: str, last: int | None = None) -> list[float]:
    """Finite values of metric `name` in step order (missing / None / NaN skipped).

    `last`: only the last this many values (scans from the end: O(last) on a long history).
    """
    out: list[float] = []
    for rec in reversed(history):
        if last is not None and len(out) >= last:
            break
        v = rec.get(name)
        if _finite(v):
            out.append(float(v))
    out.reverse()
    return out


def _finite(v) -> bool:
    """A metric value the rules read: a real number, not a bool, not NaN or infinite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def smoothed(xs: list[float], k: int) -> list[float]:
    """Trailing moving mean: s_t = mean(x_{max(0,t-k+1)..t})."""
    return [sum(xs[max(0, t - k + 1) : t + 1]) / (t + 1 - max(0, t - k + 1)) for t in range(len(xs))]


def drop_ratio(xs: list[float], window: int, smooth: int) -> float | None:
    """s_now / max(s over the `window` values before now); None without history or a zero peak."""
    s = smoothed(xs, smooth)
    peak = max(s[max(0, len(s) - 1 - window) : -1], default=0.0)  # no value before now: None
    return s[-1] / peak if peak > 1e-12 else None


def robust_z(xs: list[float], window: int) -> tuple[float, float] | None:
    """(z, median) of the last value against the `window` before it: (x - med) / (1.4826 MAD)."""
    if len(xs) < 4:
        return None
    prev = xs[max(0, len(xs) - 1 - window) : -1]
    med = median(prev)
    mad = median(abs(x - med) for x in prev)
    diff = xs[-1] - med
    if mad == 0.0:
        return (math.inf if diff > 0 else 0.0), med
    return diff / (MAD_SCALE * mad), med


def _ratio_signal(signal, metrics, warn, what) -> Callable[[list[dict], "HealthSpec"], Reason | None]:
    """A narrowing signal: the first of `metrics` present, relative to its recent peak."""

    def check(history: list[dict], cfg: "HealthSpec") -> Reason | None:
        name = next((m for m in metrics if series(history, m, 1)), None)
        if name is None:
            return None
        # drop_ratio reads the last window + 1 smoothed values, i.e. window + smooth raw ones
        ratio = drop_ratio(series(history, name, cfg.window + cfg.smooth), cfg.window, cfg.smooth)
        limit = getattr(cfg, warn)
        if ratio is None or ratio > limit:
            return None
        return Reason(signal, ratio, limit, f"{what} fell to {ratio:.0%} of its recent peak (limit {limit:.0%})")

    check.__doc__ = f"{what} ({metrics[0]}) relative to its recent peak."
    return check


in_group_std = _ratio_signal("in_group_std", ("reward/task_in_group_std", "filter/in_group_std_before"), "std_warn",
                             "in-group std of the task reward")
entropy = _ratio_signal("entropy", ("actor/entropy",), "entropy_warn", "policy entropy")
distinct = _ratio_signal("distinct_ngrams", ("diversity/distinct_2",), "distinct_warn", "distinct-bigram ratio")


def joint_narrowing(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Entropy and the distinct-bigram ratio both at or below `joint_warn` of their recent peaks:
    the replies' diversity falling on two independent measures, an earlier sign than either
    alone at its own limit (chosen on the run corpus: docs/health.md)."""
    if cfg.joint_warn >= 1.0:
        return None
    ratios = []
    for name in ("actor/entropy", "diversity/distinct_2"):
        ratio = drop_ratio(series(history, name, cfg.window + cfg.smooth), cfg.window, cfg.smooth)
        if ratio is None or ratio > cfg.joint_warn:
            return None
        ratios.append(ratio)
    return Reason("joint_narrowing", max(ratios), cfg.joint_warn,
                  f"entropy and distinct bigrams fell together, to {ratios[0]:.0%} and {ratios[1]:.0%} of their recent "
                  f"peaks (limit {cfg.joint_warn:.0%} for both)")


def template(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """I(X;Z) / H(X) (collapse/mi_norm, RAGEN-2) fell to `mi_warn` of its recent peak, from a
    peak of at least `mi_min_peak`: replies that depended on the state no longer do."""
    xs = series(history, "collapse/mi_norm", cfg.window + cfg.smooth)
    s = smoothed(xs, cfg.smooth)
    if len(s) < 2:
        return None
    peak = max(s[max(0, len(s) - 1 - cfg.window): -1])
    if peak < cfg.mi_min_peak or s[-1] > cfg.mi_warn * peak:
        return None
    return Reason("template", s[-1], cfg.mi_warn * peak,
                  f"replies carry {s[-1]:.0%} of the state's information, down from {peak:.0%} (limit {cfg.mi_warn:.0%} of the peak)")


SPREAD = "filter/in_group_std_after"  # the reward spread of the groups the update trained on


def _spike(xs: list[float], cfg: "HealthSpec") -> tuple[float, float] | None:
    """(z, median) when the last of `xs` is a spike: `grad_z_warn` robust deviations above the
    median of the `window` before it and at least `grad_ratio_min` times that median."""
    zm = robust_z(xs, cfg.window)
    if zm is None or zm[0] < cfg.grad_z_warn or xs[-1] < cfg.grad_ratio_min * zm[1]:
        return None
    return zm


def grad_spike(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Actor grad norm far above its recent median (robust z-score and a minimum ratio), and
    still so per unit of the trained groups' reward spread (`SPREAD`) where the run records it.

    Where advantages are in reward units (GRPO without the std division, as specs/bandit.yaml;
    GAE on a critic), the gradient grows with the reward spread it learns from: a policy that
    starts to learn gets more spread and a larger gradient (a fresh `make train` run: grad norm
    0.12 -> 0.46 as the kept group's reward std went 0.09 -> 0.33, grad / std 0.9-1.5 throughout).
    That is the learning signal, not the Echo Trap's spike, which comes with the spread falling
    (RAGEN Sec. 4.1). So a spike counts only when grad / spread spikes too; with the std division
    (GRPO's default) grad / spread spikes whenever the grad does or the spread falls."""
    steps = list(islice((r for r in reversed(history) if _finite(r.get("actor/grad_norm"))), cfg.window + 1))[::-1]
    grads = [float(r["actor/grad_norm"]) for r in steps]
    zm = _spike(grads, cfg)
    if zm is None:
        return None
    z, med = zm
    msg = f"grad norm {grads[-1]:.3g} is {z:.1f} robust deviations above its median {med:.3g} (limit {cfg.grad_z_warn:g})"
    if all(_finite(r.get(SPREAD)) and r[SPREAD] > 0 for r in steps):
        per = _spike([g / float(r[SPREAD]) for g, r in zip(grads, steps)], cfg)
        if per is None:
            return None  # the reward spread grew with it: learning
        msg += f", {per[0]:.1f} per unit of the trained groups' reward std"
    return Reason("grad_norm", z, cfg.grad_z_warn, msg)


def identical_replies(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Share of the step's replies identical to another reply (smoothed)."""
    xs = series(history, "diversity/identical_share", cfg.smooth)
    if not xs:
        return None
    share = smoothed(xs, cfg.smooth)[-1]
    if share < cfg.identical_warn:
        return None
    return Reason("identical_replies", share, cfg.identical_warn,
                  f"{share:.0%} of replies repeat another reply (limit {cfg.identical_warn:.0%})")


NARROWING: dict[str, Callable[[list[dict], "HealthSpec"], Reason | None]] = {
    "in_group_std": in_group_std,
    "entropy": entropy,
    "template": template,
    "grad_norm": grad_spike,
    "distinct_ngrams": distinct,
    "identical_replies": identical_replies,
    "joint_narrowing": joint_narrowing,
}
SIGNALS = NARROWING  # the names a spec or the TUI may refer to
# Replies no longer depend on the state: I(X;Z) fell (RAGEN-2's template collapse), or half repeat
# another word for word (RAGEN's "repetitive templates"); a slow learner's replies still differ.
STATE_BLIND = ("template", "identical_replies")
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
    """Why the run counts as progressing (solved, success rising, I(X;Z) rising), or None."""
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
    return Reason("holding", s[-1], peak - noise, f"train/success holds its gain ({s[-1]:.3g}, within {noise:.3g} of its peak {peak:.3g})")


def solved(history: list[dict], cfg: "HealthSpec") -> bool:
    """The smoothed train/success is at `solved`, or below it by less than its sampling margin
    (`fall_z` standard errors at its own level: 0.99 over 3 x 128 episodes is within 0.0102 of 1)."""
    if score_name(history) != "train/success":
        return False
    s = smoothed(series(history, "train/success"), cfg.smooth)[-1]
    return s >= cfg.solved - sampling_margin(history, "train/success", s, cfg)


def failure(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """Evidence that narrowing has become a collapse: success fell after a gain, no group has
    any reward variance left while most fail, or success never rose `progress_min` above its
    start (smoothed)."""
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


def trailing_run(xs: list[float], level: float) -> int:
    """How many of the last values of `xs` in a row are at least `level` ([.2, 1, .97], .95 -> 2)."""
    n = 0
    for x in reversed(xs):
        if x < level:
            break
        n += 1
    return n


def no_signal(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """The last `no_signal_steps` steps or more in a row had no learning signal: in each, at least
    `dead_frac` of the groups got one reward for all their rollouts, or at least `dead_frac` of
    the turns did not parse. Says since when, and what to change. A solved run is exempt (every
    group succeeding has no spread either: convergence). A step with some signal ends the streak;
    the next streak of `no_signal_steps` steps is said again."""
    if cfg.no_signal_steps == 0:
        return None
    zs, fs = series(history, "filter/zero_std_frac"), series(history, "episode/format_error_ratio")
    zero, fmt = trailing_run(zs, cfg.dead_frac), trailing_run(fs, cfg.dead_frac)
    k = max(zero, fmt)
    if k < cfg.no_signal_steps:
        return None
    if solved(history, cfg):
        return None
    since = history[-k].get("step", len(history) - k + 1)  # k <= len(history): series skips, never adds
    span = f"in step {since}" if k == 1 else f"in each of the last {k} steps (since step {since})"
    if fmt >= zero:
        share = min(fs[-k:])
        why = (f"at least {share:.0%} of the turns have not parsed {span}: the replies "
               "miss the answer format. Try rollout.think: false, rollout.answer_example, a larger "
               "rollout.max_tokens_per_turn, or another model")
    else:
        share = min(zs[-k:])
        who = "every group got one reward for all its" if share >= 1 else \
            f"at least {share:.0%} of the groups got one reward for all their"
        why = (f"{span}, {who} rollouts (the limit: {cfg.dead_frac:.0%} "
               "of the groups): no spread to learn from. Try a larger "
               "env.train.group_size, rollout.temperature 1.0, an easier env config, or reward shaping")
    stop = cfg.empty_stop_steps and k >= cfg.empty_stop_steps
    return Reason("no_signal", float(k), float(cfg.no_signal_steps), why, "collapse" if stop else "warning")


def assess(history: list[dict], cfg: "HealthSpec") -> Verdict:
    """The verdict for the last step of `history` (records in step order)."""
    step = history[-1].get("step") if history else None
    if not cfg.enabled:
        return Verdict("healthy", [], step)
    empty = no_signal(history, cfg)
    if empty is not None and (empty.value >= len(history) or empty.level == "collapse"):
        return Verdict(empty.level, [empty], step)  # never a signal (inside the warm-up too), or stop
    verdict = _judge(history, cfg, step)
    if empty is not None and verdict.level != "collapse":  # the signal was there and is gone: say so
        return Verdict("warning", [empty, *verdict.reasons], step)
    return verdict


def _judge(history: list[dict], cfg: "HealthSpec", step: int | None) -> Verdict:
    """Narrowing, progress and failure (module doc). The warm-up hides warnings, not a collapse
    once `smooth` steps and a trained one (step 1 samples the base model) exist (2026-11-27)."""
    early = len(history) < max(cfg.warmup_steps, 1)
    if early and len(history) < max(cfg.smooth, 2):
        return Verdict("healthy", [], step)
    narrowing = [r for check in NARROWING.values() if (r := check(history, cfg)) is not None]
    if not narrowing:
        return Verdict("healthy", [], step)
    failed = failure(history, cfg)
    going = progress(history, cfg)
    if going is not None and not (going.signal != "solved" and failed is not None
                                  and failed.signal in ("no_variance", "success_fell")):
        # A rise with no reward spread in any group is not learning (GRPO's update is zero): the
        # states drawn changed, not the policy. Only a solved task earns no_variance. Nor is a rise
        # that has since been lost (success_fell: at most fall_ratio of the gain kept), though its
        # high is still inside progress_window.
        return Verdict("healthy", [], step)
    if failed is not None and failed.signal == "no_gain" and not any(r.signal in STATE_BLIND for r in narrowing):
        failed = None  # a slow learner has not gained yet either (FrozenLake: 35 flat steps, then 0.12 -> 0.73)
    if failed is not None and len(narrowing) >= cfg.collapse_votes:
        return Verdict("collapse", [failed, *narrowing], step)
    return Verdict("healthy", [], step) if early else Verdict("warning", narrowing, step)


def assess_all(history: list[dict], cfg: "HealthSpec") -> list[Verdict]:
    """The verdict at every step, as the trainer saw it then (for charts and replays)."""
    return [assess(history[: i + 1], cfg) for i in range(len(history))]
