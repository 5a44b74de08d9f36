"""How far WebShop episodes get: the pages a policy's rollouts reach, from saved trajectory files
(a training run's `trajectories/step-*.jsonl`, or `ragen eval --out DIR`'s). It measures the
signal a reward for partial progress would have: a group only teaches when its rollouts differ.

    .venv/bin/python bench/webshop_reach.py runs/webshop-window/trajectories/step-*.jsonl
    .venv/bin/python bench/webshop_reach.py EVAL_OUT/A/trajectories/*.jsonl

Per file, one JSON line: episodes, turns, search actions, and the episodes that saw a results
page with at least one product, an item page, and bought. A page is read from the observation
the model was shown on its next turn, as WebShop's text renders it (pages.py): a results page
says "Total results: N", an item page lists "Buy Now"; a purchase ends the episode with a
`reward_info` (the last page shown is not saved).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_RESULTS = re.compile(r"Total results: (\d+)\)")
_SEARCH = re.compile(r"^\s*search\s*\[", re.IGNORECASE)


def reach(trajectory: dict) -> dict[str, bool]:
    """Which stages one saved episode reached."""
    shown = [t.get("obs") or "" for t in trajectory.get("turns", [])]
    results = any(int(m.group(1)) > 0 for obs in shown for m in _RESULTS.finditer(obs))
    item = any("[SEP] Buy Now" in obs for obs in shown)
    bought = "reward_info" in (trajectory.get("info") or {})
    return {"results": results or item or bought, "item": item or bought, "bought": bought}


def summarise(trajectories: list[dict]) -> dict:
    turns = [t for traj in trajectories for t in traj.get("turns", [])]
    stages = [reach(traj) for traj in trajectories]
    return {
        "episodes": len(trajectories),
        "turns": len(turns),
        "searches": sum(bool(_SEARCH.match(a)) for t in turns for a in t.get("actions") or []),
        "reached_results": sum(s["results"] for s in stages),
        "reached_item": sum(s["item"] for s in stages),
        "bought": sum(s["bought"] for s in stages),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    from ragen_cli.monitor.jsonl import read_jsonl

    total: list[dict] = []
    for path in args.files:
        trajs = read_jsonl(path)
        total += trajs
        print(json.dumps({"file": str(path), **summarise(trajs)}))
    if len(args.files) > 1:
        print(json.dumps({"file": "all", **summarise(total)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
