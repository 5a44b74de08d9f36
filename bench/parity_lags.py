"""The weight-sync check's lag rule (rollout/parity.py) against every sync of the real runs kept
in the health corpora (bench/health_corpus*/runs/*): how large is the lag of a healthy sync, and
which syncs did (or would) each form of the rule stop?

    .venv/bin/python bench/parity_lags.py

Every run in the corpora finished or was stopped by a ParityError (its error event, kept in
events.jsonl, carries the stopped sync's numbers). The syncs the metrics record all passed the
rule of their day, so they are healthy ones unless a run's engine really lagged, which no run's
later syncs or learning suggest. Per sync: `lag`, `moved`, `noise_after` (the noise the check
expected after the update; `noise` where a run predates it) and
`unit = max(2 x noise_after, FP32_RESOLUTION)`, the unit of parity.py less its random part
`STALE_Z x noise_after / sqrt(k)` (k, the probe's tokens, is not logged; with k >= 64 that part
is at most noise_after / 2 and never the larger one). Printed: the bf16-like syncs (noise_after
>= 1e-3) by `lag x moved / unit`, the part of the update the engine would miss in units; the
syncs each rule stops (the rule before 2026-11-27: `lag > 1/2` once `moved >= 2 unit`, or
`lag > 1/4` once `moved >= 8 unit`; the rule since: `lag > 1/4` and `lag x moved >= 2 unit`);
and the stopped syncs of the error events, judged by both.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from ragen_cli.rollout.parity import FP32_RESOLUTION
from ragen_cli.rollout.parity import lags as new_rule

BENCH = Path(__file__).parent


def old_rule(lag: float, moved: float, unit: float) -> bool:
    """The lag rule before 2026-11-27."""
    return (lag > 0.5 and moved >= 2 * unit) or (lag > 0.25 and moved >= 8 * unit)


def syncs() -> list[dict]:
    out = []
    for path in sorted(BENCH.glob("health_corpus*/runs/*/metrics.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "sync/parity_lag" not in rec:
                continue
            after = rec.get("sync/parity_noise_after", rec["sync/parity_noise"])
            out.append({"run": path.parent.name, "step": rec["step"], "lag": rec["sync/parity_lag"],
                        "moved": rec["sync/parity_moved"], "noise_after": after,
                        "unit": max(2 * after, FP32_RESOLUTION)})
    return out


STOP = re.compile(r"lie (\d+)% of the way back .*rms gap ([\d.e+-]+) to the new weights, ([\d.e+-]+) to the old "
                  r"ones, over (\d+) tokens the update moved by rms ([\d.e+-]+); the kernels' noise ([\d.e+-]+)"
                  r"(?:, ([\d.e+-]+) expected after the update)?")


def stops() -> list[dict]:
    """The "lagging" ParityErrors of the corpora's error events, with their numbers. Messages
    before 2026-11-27 do not give the noise after the update: the noise before stands in, which
    gives the smallest unit, so a sync that passes with it passes with any noise_after >= it."""
    out = []
    for path in sorted(BENCH.glob("health_corpus*/runs/*/events.jsonl")):
        for line in path.read_text().splitlines():
            m = STOP.search(json.loads(line).get("error") or "")
            if m:
                gap, old, tokens, moved = float(m[2]), float(m[3]), int(m[4]), float(m[5])
                noise = float(m[7] or m[6])
                lag = (gap ** 2 - old ** 2) / (2 * moved ** 2) + 0.5
                out.append({"run": path.parent.name, "lag": lag, "moved": moved, "noise_after": noise,
                            "tokens": tokens, "unit": max(2 * noise, FP32_RESOLUTION)})
    return out


def main() -> int:
    rows = syncs()
    bf16 = [r for r in rows if r["noise_after"] >= 1e-3]
    print(f"{len(rows)} syncs with a lag in {len({r['run'] for r in rows})} runs; {len(bf16)} bf16-like (noise_after >= 1e-3)")
    missed = sorted(r["lag"] * r["moved"] / r["unit"] for r in bf16 if r["lag"] > 0.25)
    print(f"bf16-like syncs with lag > 1/4: {len(missed)}; lag x moved / unit: median "
          f"{statistics.median(missed):.3f}, max {max(missed):.3f} (the rule since 2026-11-27 stops from 2)")
    for name, rule in (("before", old_rule), ("since", new_rule)):
        hit = [r for r in rows if rule(r["lag"], r["moved"], r["unit"])]
        print(f"recorded syncs the rule {name} 2026-11-27 stops: {len(hit)}", *[f"{r['run']}@{r['step']}" for r in hit])
    for s in stops():
        print(f"stopped: {s['run']} lag {s['lag']:.3f} moved {s['moved']:.4g} noise {s['noise_after']:.4g} "
              f"({s['tokens']} tokens): lag x moved / unit {s['lag'] * s['moved'] / s['unit']:.3f}; "
              f"rule before: {'stop' if old_rule(s['lag'], s['moved'], s['unit']) else 'pass'}, "
              f"since: {'stop' if new_rule(s['lag'], s['moved'], s['unit']) else 'pass'}")
    print(json.dumps({"syncs": len(rows), "bf16_syncs": len(bf16), "bf16_lag_over_quarter": len(missed),
                      "bf16_max_missed_units": round(max(missed), 3),
                      "stopped_before": sum(old_rule(r["lag"], r["moved"], r["unit"]) for r in rows),
                      "stopped_since": sum(new_rule(r["lag"], r["moved"], r["unit"]) for r in rows)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
