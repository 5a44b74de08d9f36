"""Pure formatting for `ragen watch`: durations, ETA, header, events, trajectories, chart data.

No Textual here: every function takes plain data (metrics.jsonl / events.jsonl records,
trajectory dicts) and returns strings (Rich markup) or lists, so it is tested without an app.
"""

from __future__ import annotations

import re
from ragen_cli.monitor.health import Verdict
from ragen_cli.rollout.render import tool_call_text

VERDICT_STYLE = {"healthy": "bold green", "warning": "bold yellow", "collapse": "bold white on red"}
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)


def escape(text: str) -> str:
    """Make any text literal in Textual markup (`[X]`, `[SEP]`, `click[...]` are not tags)."""
    return text.replace("[", "\\[")


def fmt_duration(seconds: float | None) -> str:
    """`None` -> "-", 42.4 -> "42s", 185 -> "3m05s", 3725 -> "1h02m"."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def run_start(history: list[dict], events: list[dict]) -> float | None:
    """When the run started: its `start` event, else the first step's time minus its duration."""
    for ev in events:
        if ev.get("kind") == "start" and isinstance(ev.get("time"), (int, float)):
            return float(ev["time"])
    if history and isinstance(history[0].get("time"), (int, float)):
        return float(history[0]["time"]) - float(history[0].get("timing/step_s") or 0.0)
    return None


def run_end(events: list[dict]) -> float | None:
    """When the run ended (its last `end` or `error` event), None while it runs."""
    ends = [ev["time"] for ev in events if ev.get("kind") in ("end", "error") and isinstance(ev.get("time"), (int, float))]
    return float(ends[-1]) if ends else None


def run_state(events: list[dict], total: int | None) -> str:
    """How the run stands, from its last `end` or `error` event: running, finished, interrupted
    (Ctrl-C or a stop request: `interrupted: true`), stopped (by the health monitor or an empty
    filter: `stopped: true` before the last step), or failed (an `error` event)."""
    last = [ev for ev in events if ev.get("kind") in ("end", "error")]
    if not last:
        return "running"
    ev = last[-1]
    of = f" at step {ev.get('step')}" + (f" of {total}" if total else "")
    if ev["kind"] == "error":
        return "failed" + of
    if ev.get("interrupted"):
        return "interrupted" + of
    if ev.get("stopped") and not ev.get("warm_start_only"):
        return "stopped" + of
    return "finished"


def step_seconds(history: list[dict], last: int = 10) -> float | None:
    """Mean wall time per step over the last `last` steps (from `time` stamps, else timing/step_s)."""
    times = [r["time"] for r in history[-(last + 1) :] if isinstance(r.get("time"), (int, float))]
    if len(times) >= 2 and times[-1] > times[0]:
        return (times[-1] - times[0]) / (len(times) - 1)
    durs = [r["timing/step_s"] for r in history[-last:] if isinstance(r.get("timing/step_s"), (int, float))]
    return sum(durs) / len(durs) if durs else None


def eta_seconds(history: list[dict], total: int | None, finished: bool) -> float | None:
    """Steps left x mean step time; 0 once finished; None when unknown."""
    if finished:
        return 0.0
    per = step_seconds(history)
    if total is None or per is None:
        return None
    return max(0, total - len(history)) * per


def verdict_markup(level: str) -> str:
    style = VERDICT_STYLE.get(level, "bold")
    return f"[{style}] {level.upper()} [/]"


def header_markup(name: str, spec_desc: str, history: list[dict], total: int | None, events: list[dict],
                  verdict: Verdict | None, now: float) -> str:
    """The header: run, spec, progress, elapsed / ETA, the verdict and the signals that drove it
    (value against threshold), then the first reason in words."""
    start, end = run_start(history, events), run_end(events)
    elapsed = None if start is None else (end or now) - start
    step = history[-1]["step"] if history else "-"
    progress = f"{len(history)}/{total}" if total else f"{len(history)}"
    state = run_state(events, total)
    line1 = f"[b]{escape(name)}[/b]  {escape(spec_desc)}"
    eta = f"ETA {fmt_duration(eta_seconds(history, total, end is not None))}  " if state in ("running", "finished") else ""
    line2 = f"step {step} ({progress})  {escape(state)}  elapsed {fmt_duration(elapsed)}  {eta}"
    level = verdict.level if verdict else "healthy"
    line2 += verdict_markup(level)
    if verdict and verdict.reasons:
        line2 += "  " + escape(reason_summary(verdict))
        return line1 + "\n" + line2 + "\n" + escape(verdict.reasons[0].message)
    return line1 + "\n" + line2


def problems_markup(problems: list[str], shown: int = 2) -> str:
    """The skipped lines of the run's logs (`FILE:LINE: why`): the last `shown`, and how many more."""
    if not problems:
        return ""
    more = f" (and {len(problems) - shown} earlier)" if len(problems) > shown else ""
    return "".join(f"\n[yellow]skipped {escape(p)}[/]" for p in problems[-shown:]) + more


def reason_summary(verdict: Verdict) -> str:
    """'signal value (limit threshold)' for each reason of a verdict, e.g.
    'no_variance 1.00 (limit 0.95) · entropy 0.01 (limit 0.50)'."""
    def num(x: float) -> str:
        return "inf" if x == float("inf") else f"{x:.3g}" if abs(x) >= 10 else f"{x:.2f}"
    return " · ".join(f"{r.signal} {num(r.value)} (limit {num(r.threshold)})" for r in verdict.reasons)


def event_row(event: dict) -> tuple[str, str, str]:
    """(step, kind, detail) for the event log; detail summarises the kind-specific fields."""
    kind = str(event.get("kind", "?"))
    data = {k: v for k, v in event.items() if k not in ("step", "time", "kind")}
    if kind == "health":
        reasons = "; ".join(r.get("message", r.get("signal", "")) for r in data.get("reasons", []) if isinstance(r, dict))
        detail = f"{data.get('previous', '?')} -> {data.get('level', '?')}" + (f": {reasons}" if reasons else "")
    elif kind == "intervention":
        detail = str(data.get("message") or data.get("changes") or data)
    else:
        detail = ", ".join(f"{k}={_short(v)}" for k, v in data.items())
    return str(event.get("step", "-")), kind, detail


def _short(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def split_reply(reply: str) -> tuple[str, str]:
    """(think, answer) of a `<think>..</think><answer>..</answer>` reply; unparsable -> ("", reply)."""
    think = _THINK.search(reply)
    answer = _ANSWER.search(reply)
    if not think and not answer:
        return "", reply.strip()
    return (think.group(1).strip() if think else ""), (answer.group(1).strip() if answer else "")


def filter_trajectories(trajs: list[dict], mode: str) -> list[int]:
    """Indices of the trajectories to list: mode "all", "success" or "failure"."""
    if mode not in ("all", "success", "failure"):
        raise ValueError(f"unknown filter {mode!r}")
    return [i for i, t in enumerate(trajs) if mode == "all" or bool(t.get("success")) == (mode == "success")]


def turn_flags(turn: dict) -> list[str]:
    """Problems of one turn: unparsable reply, invalid / ineffective actions, reply cut short.

    `valid` / `effective` are counts of actions (with `executed`, as the rollout writes them)
    or booleans (one action).
    """
    flags = []
    if turn.get("format_ok") is False:
        flags.append("format error")
    executed = turn.get("executed")
    for key, word in (("valid", "invalid"), ("effective", "no effect")):
        v = turn.get(key)
        if v is False:
            flags.append(word)
        elif isinstance(v, int) and not isinstance(v, bool) and isinstance(executed, int) and v < executed:
            flags.append(f"{word}: {executed - v}/{executed}")
    if turn.get("finish_reason") == "length":
        flags.append("cut at max tokens")
    return flags


def trajectory_markup(traj: dict) -> str:
    """One trajectory, turn by turn: state, think, answer, actions, reward and flags; a tools
    env's turns also list their calls and results."""
    head = (f"[b]group {traj.get('group', '?')}  seed {traj.get('seed', '?')}  env {escape(str(traj.get('env', '?')))}[/b]  "
            f"reward {_short(traj.get('reward', 0.0))}  " + ("[green]success[/]" if traj.get("success") else "[red]failure[/]"))
    if traj.get("truncated"):
        head += "  [yellow]truncated[/]"
    lines = [head]
    for k, turn in enumerate(traj.get("turns", []), 1):
        think, answer = split_reply(str(turn.get("reply", "")))
        flags = turn_flags(turn)
        lines += [
            f"\n[b]turn {k}[/b]  reward {_short(turn.get('reward', 0.0))}" + (f"  [red]{escape(', '.join(flags))}[/]" if flags else ""),
            f"[dim]state[/]   {escape(str(turn.get('obs', '')))}",
            f"[dim]think[/]   {escape(think)}" if think else "[dim]think[/]   -",
            f"[dim]answer[/]  {escape(answer)}",
            f"[dim]actions[/] {escape(' || '.join(map(str, turn.get('actions', [])))) or '-'}",
        ]
        for call in turn.get("tool_calls") or []:
            style = "" if call.get("status") == "ok" else "[red]"
            lines.append(f"[dim]call[/]    {style}{escape(tool_call_text(call))}{'[/]' if style else ''}")
    return "\n".join(lines)


def chart_series(history: list[dict], name: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric, skipping steps where it is missing or not finite."""
    xs, ys = [], []
    for rec in history:
        v = rec.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf"):
            xs.append(rec["step"])
            ys.append(float(v))
    return xs, ys


def matching_names(history: list[dict], pattern: str) -> list[str]:
    """Metric names in the history matching a `*` wildcard (`val/*/success`), sorted."""
    regex = re.compile("^" + re.escape(pattern).replace(r"\*", "[^/]+") + "$")
    return sorted({k for rec in history for k in rec if regex.match(k)})


def alarm_steps(verdicts: list[Verdict]) -> list[tuple[int, str]]:
    """(step, level) where the verdict turned into warning or collapse (to mark on charts)."""
    out, prev = [], "healthy"
    for v in verdicts:
        if v.level != prev and v.level != "healthy" and v.step is not None:
            out.append((v.step, v.level))
        prev = v.level
    return out


def intervention_steps(events: list[dict]) -> list[tuple[int, str]]:
    """(step, "intervention") for each intervention event that changed the run (to mark on charts)."""
    return [(ev["step"], "intervention") for ev in events
            if ev.get("kind") == "intervention" and ev.get("action") != "continue" and isinstance(ev.get("step"), int)]
