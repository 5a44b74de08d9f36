"""bf16 against fp32 matmul on this machine's CPU: what `deepspeed.precision: auto` decides from.

    .venv/bin/python bench/bf16_matmul.py              # 512 x 512 (a SmolLM2-135M layer is 576 wide)
    .venv/bin/python bench/bf16_matmul.py --n 1024 --repeats 5

Times torch.matmul of two n x n matrices in each dtype (median of --repeats, after a warm-up)
and prints one JSON line: the CPU's bf16 flags (`device.CPU_BF16_FLAGS` found in
/proc/cpuinfo), the two medians, their ratio, and what `auto` resolves to here. Where the CPU
lacks avx512_bf16 and amx_bf16, torch emulates bf16 and the ratio is far above 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    import torch

    from ragen_cli.device import CPU_BF16_FLAGS, cpu_flags, resolve_precision

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    medians = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(args.n, args.n, dtype=dtype), torch.randn(args.n, args.n, dtype=dtype)
        torch.matmul(a, b)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - t0)
        medians[str(dtype).split(".")[1]] = statistics.median(times)
    print(json.dumps({"n": args.n, "threads": torch.get_num_threads(),
                      "cpu_bf16_flags": sorted(set(CPU_BF16_FLAGS) & cpu_flags()),
                      "fp32_s": round(medians["float32"], 5), "bf16_s": round(medians["bfloat16"], 5),
                      "bf16_over_fp32": round(medians["bfloat16"] / medians["float32"], 1),
                      "auto_resolves_to": resolve_precision("auto", "cpu")}))


if __name__ == "__main__":
    main()
