"""The weight-sync check (rollout/parity.py) against every sync of the real runs kept in the
health corpora (data/health_corpus/, every batch): how far do healthy syncs go, and which syncs did
(or would) each form of the check stop?

    .venv/bin/python bench/parity_corpus.py

Every run in the corpora finished, or stopped on a ParityError whose error event (events.jsonl)
carries the stopped sync's numbers and was then resumed or kept as it was. The syncs the metrics
record all passed the rule of their day and the runs went on learning or collapsing as RL runs
do, so they count as healthy. Per sync: `gap`, `noise`, `noise_after` (the noise expected after
the update; `noise` where a run predates it), `lag`, `moved`, `recent` (`recent_noise` of the
run's records before it: the largest noise of the last RECENT steps) and `reference` (the run's
first recorded noise; None at that sync).

Printed, over the bf16-like syncs (noise >= 1e-3):
- the size check: `gap / tolerance`, the tolerance `max(rollout.parity_threshold, factor x
  scale)` (0.05 and 3, the defaults) with the scale `noise_after` (the check until 2026-11-27) or
  `max(noise_after, recent)` (since), at most REFERENCE_CEILING x `reference` after a run's first
  sync (parity.py: a drift cannot raise it); a sync is stopped above 1. Syncs made with the check since
  log `noise_after` with `recent` in it: where it equals `recent` the noise before stands in for
  the check until then (the scaled noise is at least that, so the stand-in judges no more leniently);
- the lag rule: `lag x moved / unit`, the part of the update the engine misses in units,
  `unit = max(2 x noise_after, FP32_RESOLUTION)` (parity.py's unit less its random part `STALE_Z x
  noise_after / sqrt(k)`, which with k >= 64 is never the larger; k is not logged), over the syncs
  with a lag above 1/4;
then each error event's stopped sync, judged by the check before and since (the numbers its
message gives; the noise after the update was not in the messages before 2026-11-27, so the noise
before stands in, which is the smaller), and one JSON line.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from ragen_cli.rollout.parity import FP32_RESOLUTION, REFERENCE_CEILING, recent_noise, sync_verdict
from ragen_cli.spec.models import RolloutSpec

sys.path.insert(0, str(Path(__file__).parent))
import corpus  # noqa: E402  (bench/corpus.py, the loader)

FACTOR, THRESHOLD = RolloutSpec().parity_noise_factor, RolloutSpec().parity_threshold  # the defaults: 3, 0.05


def old_lag_rule(lag: float, moved: float, unit: float) -> bool:
    """The lag rule until 2026-11-27."""
    return (lag > 0.5 and moved >= 2 * unit) or (lag > 0.25 and moved >= 8 * unit)


def run_files(name: str) -> list[Path]:
    """The file `name` of every run of every corpus batch, batch by batch (sorted by name)."""
    return [p for b in corpus.batches() for p in sorted(corpus.folder(b).glob(f"runs/*/{name}"))]


def syncs() -> list[dict]:
    out = []
    for path in run_files("metrics.jsonl"):
        history: list[dict] = []
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "sync/parity_moved" in rec:  # the main corpus' oldest runs logged the noise alone
                noise = rec["sync/parity_noise"]
                after = rec.get("sync/parity_noise_after", noise)
                out.append({"run": path.parent.name, "step": rec["step"], "gap": rec["sync/parity_gap"],
                            "noise": noise, "noise_after": after, "recent": recent_noise(history).largest,
                            "reference": first_noise(history),
                            "lag": rec.get("sync/parity_lag", float("nan")), "moved": rec["sync/parity_moved"],
                            "unit": max(2 * after, FP32_RESOLUTION)})
            history.append(rec)
    return out


NUM = r"([\d.e+-]+)"
LAGGING = re.compile(rf"lie (\d+)% of the way back .*rms gap {NUM} to the new weights, {NUM} to the old ones, over "
                     rf"(\d+) tokens the update moved by rms {NUM}; the kernels' noise {NUM}"
                     rf"(?:, {NUM} expected after the update)?")
OFF = re.compile(rf"rms log-prob gap {NUM} over (\d+) tokens > {NUM} .*? x (?:{NUM}, )?the gap {NUM} the same weights gave")


def first_noise(history: list[dict]) -> float | None:
    """The run's first recorded `sync/parity_noise` (its reference: the corpora's runs predate
    `sync/parity_noise_ref`), None before any."""
    return next((r["sync/parity_noise"] for r in history if r.get("sync/parity_noise") is not None), None)


def stops() -> list[dict]:
    """The ParityErrors of the corpora's error events: the stopped sync's numbers, and `recent`
    from the run's metrics up to the event's step (the last finished one)."""
    out = []
    for path in run_files("events.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            error = event.get("error") or ""
            if "ParityError" not in error:
                continue
            metrics = [json.loads(m) for m in (path.parent / "metrics.jsonl").read_text().splitlines()]
            before = [r for r in metrics if r.get("step", 0) <= event["step"]]
            recent, reference = recent_noise(before).largest, first_noise(before)
            if m := LAGGING.search(error):
                gap, old, tokens, moved = float(m[2]), float(m[3]), int(m[4]), float(m[5])
                after = float(m[7] or m[6])
                out.append({"run": path.parent.name, "kind": "lagging", "gap": gap, "noise_after": after,
                            "lag": (gap ** 2 - old ** 2) / (2 * moved ** 2) + 0.5, "moved": moved, "tokens": tokens,
                            "recent": recent, "reference": reference})
            elif m := OFF.search(error):
                out.append({"run": path.parent.name, "kind": "off", "gap": float(m[1]), "noise_after": float(m[4] or m[5]),
                            "lag": float("nan"), "moved": 0.0, "tokens": int(m[2]), "recent": recent,
                            "reference": reference})
    return out


def until_scale(s: dict) -> float:
    """The noise scale of the check until 2026-11-27. A sync made since logs noise_after with
    `recent` in it; where the two are equal the scaled noise alone is unknown, and the noise before
    (no larger) stands in."""
    return s["noise_after"] if s["noise_after"] > s["recent"] else min(s["noise_after"], s.get("noise", s["noise_after"]))


def since_scale(s: dict) -> float:
    """The noise scale of the check since 2026-11-27: never below `recent`, and (parity.py today)
    never above REFERENCE_CEILING x the run's first noise."""
    scale = max(s["noise_after"], s["recent"])
    return scale if s.get("reference") is None else min(scale, REFERENCE_CEILING * s["reference"])


def verdicts(s: dict) -> tuple[str, str]:
    """(check until 2026-11-27, check since) on one sync's numbers: "off", "lagging" or "ok". The
    check since is parity.sync_verdict itself (k, where not logged, the default probe's 64 tokens:
    the unit's random part is then never the larger)."""
    after = until_scale(s)
    unit = max(2 * after, FP32_RESOLUTION)
    until = "off" if s["gap"] > max(THRESHOLD, FACTOR * after) else (
        "lagging" if old_lag_rule(s["lag"], s["moved"], unit) else "ok")
    since = sync_verdict(s["gap"], s["lag"], s["moved"], since_scale(s), s.get("tokens", 64), THRESHOLD, FACTOR)[2]
    return until, since


def spread(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs):.2f}, 99th percentile {xs[int(0.99 * (len(xs) - 1))]:.2f}, max {xs[-1]:.2f}"


def main() -> int:
    rows = syncs()
    bf16 = [r for r in rows if r["noise"] >= 1e-3]
    print(f"{len(rows)} recorded syncs in {len({r['run'] for r in rows})} runs; {len(bf16)} bf16-like (noise >= 1e-3)")
    before = [r["gap"] / max(THRESHOLD, FACTOR * until_scale(r)) for r in bf16]
    since = [r["gap"] / max(THRESHOLD, FACTOR * since_scale(r)) for r in bf16]
    print(f"gap / tolerance, the tolerance from noise_after:              {spread(before)}")
    print(f"gap / tolerance, the tolerance from max(noise_after, recent): {spread(since)}   (bound 1)")
    lagged = [r for r in bf16 if r["lag"] > 0.25]
    missed = [r["lag"] * r["moved"] / r["unit"] for r in lagged]
    print(f"lag x moved / unit, the {len(lagged)} with lag > 1/4: {spread(missed)}   (bound 2)")
    judged = [verdicts(r) for r in rows]
    hit = [f"{r['run']}@{r['step']}" for r, v in zip(rows, judged) if v[0] != "ok"]
    print(f"recorded syncs stopped: {len(hit)} by the check until 2026-11-27 ({', '.join(hit) or 'none'}), "
          f"{sum(v[1] != 'ok' for v in judged)} by the check since")
    stopped = stops()
    for s in stopped:
        was, now = verdicts(s)
        print(f"stopped: {s['run']} ({s['kind']}): gap {s['gap']:.4g}, noise after {s['noise_after']:.4g}, recent "
              f"{s['recent']:.4g}, lag {s['lag']:.3f}, moved {s['moved']:.4g}: until 2026-11-27 {was}, since {now}")
    print(json.dumps({"syncs": len(rows), "bf16_syncs": len(bf16), "max_gap_share_until": round(max(before), 3),
                      "max_gap_share_since": round(max(since), 3), "max_missed_units": round(max(missed), 3),
                      "stopped_until": sum(v[0] != "ok" for v in judged), "stopped_since": sum(v[1] != "ok" for v in judged),
                      "events": len(stopped), "events_stopped_since": sum(verdicts(s)[1] != "ok" for s in stopped)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
