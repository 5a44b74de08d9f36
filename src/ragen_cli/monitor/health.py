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
- *failure* (`failure`): no episode of the step succeeded where that is improbable (`wiped_out`), success
  fell to `fall_ratio` of its peak after a gain, or every group's reward is constant
  (`dead_frac`: nothing left to learn from) while success is below 1/2 (most groups fail), or
  success has gained nothing over its start (`no_gain`). No rule counts elapsed steps.

Verdict: healthy while warming up (a collapse excepted), solved, or without narrowing signals;
narrowing without progress is a warning; narrowing with failure is a collapse (`collapse_votes`
signals; one beside `wiped_out`: a run that breaks into garbage replies narrows only its reward
spread), where `no_gain`
counts only beside a state-blind signal, `STATE_BLIND` (a slow learner stalls for a long time
too; a state-blind one that stalls has collapsed), and one narrowing measure at its own limit,
`NARROWED` (a learner passing through one answer tripped only the earlier, joint sign:
docs/health.md). The template signal alone counts only from an I(X;Z) peak of `mi_alone_peak`
(alone it warned three Bandit learners, and one collapse other signals had warned, from peaks of
0.06-0.12, within the estimate's noise). A narrowing run that is progressing is healthy:
convergence. `no_signal` speaks separately of a run that has had no learning signal for
`no_signal_steps` steps in a row. Thresholds live in `HealthSpec` (spec/health_spec.py);
docs/health.md says how each was chosen on the run corpus.

Notation: x_t the metric at step t (records missing the metric or holding NaN are skipped);
s_t = mean of the last `smooth` values; the "recent peak" is max s over the `window` values
before the current one.
"""

from __future__ import annotations

import math
from itertools import islice
from statistics import median
from typing import TYPE_CHECKING, Callable

from ragen_cli.monitor.outcome import failure, progress, solved
# LEVELS, Level, Verdict: the verdict's types, imported from here by the tracker, TUI and replay
from ragen_cli.monitor.verdict import LEVELS, MAD_SCALE, Level, Reason, Verdict, finite, series, smoothed  # noqa: F401

if TYPE_CHECKING:  # monitor/ is stdlib-only at run time; the spec object is duck-typed.
    from ragen_cli.spec.health_spec import HealthSpec


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


def mi_peak(history: list[dict], cfg: "HealthSpec") -> tuple[float, float] | None:
    """(s_now, recent peak) of the smoothed I(X;Z) / H(X); None before two smoothed values."""
    s = smoothed(series(history, "collapse/mi_norm", cfg.window + cfg.smooth), cfg.smooth)
    if len(s) < 2:
        return None
    return s[-1], max(s[max(0, len(s) - 1 - cfg.window): -1])


def template(history: list[dict], cfg: "HealthSpec") -> Reason | None:
    """I(X;Z) / H(X) (collapse/mi_norm, RAGEN-2) fell to `mi_warn` of its recent peak, from a
    peak of at least `mi_min_peak`: replies that depended on the state no longer do."""
    got = mi_peak(history, cfg)
    if got is None:
        return None
    now, peak = got
    if peak < cfg.mi_min_peak or now > cfg.mi_warn * peak:
        return None
    return Reason("template", now, cfg.mi_warn * peak,
                  f"replies carry {now:.0%} of the state's information, down from {peak:.0%} (limit {cfg.mi_warn:.0%} of the peak)")


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
    steps = list(islice((r for r in reversed(history) if finite(r.get("actor/grad_norm"))), cfg.window + 1))[::-1]
    grads = [float(r["actor/grad_norm"]) for r in steps]
    zm = _spike(grads, cfg)
    if zm is None:
        return None
    z, med = zm
    msg = f"grad norm {grads[-1]:.3g} is {z:.1f} robust deviations above its median {med:.3g} (limit {cfg.grad_z_warn:g})"
    if all(finite(r.get(SPREAD)) and r[SPREAD] > 0 for r in steps):
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
# Replies no longer depend on the state: I(X;Z) fell (RAGEN-2's template collapse), or half repeat
# another word for word (RAGEN's "repetitive templates"); a slow learner's replies still differ.
STATE_BLIND = ("template", "identical_replies")
# A narrowing measure at its own limit, not the earlier joint sign or a grad spike: with no gain
# to fall from, `no_gain` is the weakest failure, so it needs one of these too.
NARROWED = ("in_group_std", "entropy", "distinct_ngrams", "identical_replies")


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
    once `smooth` steps and a trained one (step 1 samples the base model) exist."""
    early = len(history) < max(cfg.warmup_steps, 1)
    if early and len(history) < max(cfg.smooth, 2):
        return Verdict("healthy", [], step)
    narrowing = [r for check in NARROWING.values() if (r := check(history, cfg)) is not None]
    if [r.signal for r in narrowing] == ["template"] and mi_peak(history, cfg)[1] < cfg.mi_alone_peak:
        narrowing = []  # I(X;Z) fell from a peak within its step-to-step noise, and nothing else narrowed
    if not narrowing:
        return Verdict("healthy", [], step)
    failed = failure(history, cfg)
    going = progress(history, cfg)
    if going is not None and not (going.signal != "solved" and failed is not None
                                  and failed.signal in ("no_variance", "success_fell", "wiped_out")):
        # A rise with no reward spread in any group is not learning (GRPO's update is zero): the
        # states drawn changed, not the policy. Only a solved task earns no_variance. Nor is a rise
        # that has since been lost (success_fell: at most fall_ratio of the gain kept), though its
        # high is still inside progress_window.
        return Verdict("healthy", [], step)
    signals = {r.signal for r in narrowing}
    if failed is not None and failed.signal == "no_gain" and not (signals & set(STATE_BLIND) and signals & set(NARROWED)):
        # A slow learner has not gained yet either (FrozenLake: 35 flat steps, then 0.12 -> 0.73);
        # nor has a Bandit run settled on the safe arm with its entropy still near its peak (docs/health.md).
        failed = None
    if failed is not None and len(narrowing) >= (1 if failed.signal == "wiped_out" else cfg.collapse_votes):
        return Verdict("collapse", [failed, *narrowing], step)
    return Verdict("healthy", [], step) if early else Verdict("warning", narrowing, step)

