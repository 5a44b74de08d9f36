"""How long a trainer's `import deepspeed` takes, as ragen imports it and plainly.

    .venv/bin/python bench/deepspeed_import.py [--repeats 5]

DeepSpeed's autotuner imports `mlflow` at import time when it is installed (the `trackers`
extra, which `scripts/install.sh` installs with `dev`); ragen never runs the autotuner, and
`models.load.import_deepspeed` keeps that import out. Each import is a fresh Python process
(`DS_ACCELERATOR` set as the trainer sets it), alternating the two kinds so both see the same
machine load. Prints one line per import, then one JSON line: the median seconds of each kind,
their ratio, and whether the plain import pulled mlflow in (without mlflow installed the two
kinds are the same import).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

IMPORTS = {
    "ragen": "from ragen_cli.models.load import import_deepspeed; import_deepspeed()",
    "plain": "from ragen_cli.models.load import set_ds_accelerator; set_ds_accelerator(); import deepspeed",
}
REPORT = "; import sys; print('MLFLOW', 'mlflow' in sys.modules)"


def one_import(kind: str) -> tuple[float, bool]:
    """(seconds of the whole process, whether mlflow ended up imported)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", IMPORTS[kind] + REPORT], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ))
    wall = time.perf_counter() - t0
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MLFLOW ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"import failed ({kind}):\n{proc.stderr[-3000:]}")
    return wall, line.split()[1] == "True"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    got: dict[str, list[tuple[float, bool]]] = {"plain": [], "ragen": []}
    for i in range(args.repeats):
        for kind in ("plain", "ragen"):
            got[kind].append(one_import(kind))
            print(f"import {i + 1}/{args.repeats} {kind:5s} {got[kind][-1][0]:6.2f} s  mlflow imported: "
                  f"{got[kind][-1][1]}", flush=True)
    med = {k: statistics.median(s for s, _ in v) for k, v in got.items()}
    print(json.dumps({"repeats": args.repeats, "cpus": os.cpu_count(), "seconds": {k: round(v, 2) for k, v in med.items()},
                      "ratio": round(med["plain"] / med["ragen"], 2),
                      "mlflow_imported": {k: any(m for _, m in v) for k, v in got.items()}}))


if __name__ == "__main__":
    main()
