"""How long a vLLM engine takes to start, in the trainer's process or in vLLM's own processes.

    .venv/bin/python bench/engine_start.py                  # tiny-random, 3 starts of each kind
    .venv/bin/python bench/engine_start.py --model smollm2-135m-instruct --repeats 2
    .venv/bin/python bench/engine_start.py --engines 2      # two engines per process, as `ragen eval --compare`

Each start is a fresh Python process that builds a `VLLMBackend` (fp32, the settings a CPU run
uses) and generates 2 samples of 8 tokens, once with `VLLM_ENABLE_V1_MULTIPROCESSING=0` (the
engine in this process: what every run's Plan sets, compile/launch.py `process_env`) and once
with vLLM's default (an engine-core process and a worker process, each importing torch and vLLM
again), alternating so both see the same machine load. Prints one line per start, then one JSON
line: the median seconds of each kind (the backend's constructor, and the whole process) and the
ratio of the medians. With `--engines N` each process builds N engines one after the other (each
closed before the next, as `ragen eval --compare` opens its two policies), and the constructor
time is their sum.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

START = r"""
import os, sys, time
if __name__ == "__main__":
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.rollout.vllm_backend import VLLMBackend
    model = resolve_model(sys.argv[1], "float32")
    built = 0.0
    for _ in range(int(sys.argv[2])):
        t0 = time.perf_counter()
        engine = VLLMBackend(model, dtype="float32", max_model_len=512, kv_cache_gib=1)
        built += time.perf_counter() - t0
        engine.generate([[1, 2, 3]], n=2, max_tokens=8, temperature=1.0, top_p=1.0, seed=0)
        engine.close()
    print(f"ENGINE {built:.3f}", flush=True)
    os._exit(0)
"""


def one_start(model: str, in_process: bool, engines: int = 1) -> tuple[float, float]:
    """(seconds in the backend's constructors, seconds of the whole process)."""
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0" if in_process else "1",
           "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", START, model, str(engines)], capture_output=True, text=True, env=env,
                          timeout=900)
    wall = time.perf_counter() - t0
    line = next((x for x in proc.stdout.splitlines() if x.startswith("ENGINE ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"engine start failed (in_process={in_process}):\n{proc.stderr[-3000:]}")
    return float(line.split()[1]), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-random", help="a built-in model name (ragen models list)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", type=int, default=1, help="engines built one after the other in each process")
    args = ap.parse_args()
    got: dict[str, list[tuple[float, float]]] = {"in_process": [], "processes": []}
    for i in range(args.repeats):
        for kind in ("processes", "in_process"):
            got[kind].append(one_start(args.model, kind == "in_process", args.engines))
            print(f"start {i + 1}/{args.repeats} {kind:10s} engine {got[kind][-1][0]:6.1f} s  "
                  f"process {got[kind][-1][1]:6.1f} s", flush=True)
    med = {k: (statistics.median(e for e, _ in v), statistics.median(w for _, w in v)) for k, v in got.items()}
    print(json.dumps({"model": args.model, "repeats": args.repeats, "engines": args.engines, "cpus": os.cpu_count(),
                      "engine_s": {k: round(v[0], 1) for k, v in med.items()},
                      "process_s": {k: round(v[1], 1) for k, v in med.items()},
                      "engine_ratio": round(med["processes"][0] / med["in_process"][0], 2),
                      "process_ratio": round(med["processes"][1] / med["in_process"][1], 2)}))


if __name__ == "__main__":
    main()
