"""scripts/gpu-check.sh in its CPU dry mode: the same checks a GPU machine runs (module doc of
ragen_cli/gpucheck.py), on this machine's CPU in the precision `auto` resolves to here (bf16 on
a CPU with AVX512-BF16, else fp32). One JSON line on stdout; exit 0 when every check passed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def test_bad_usage_exits_2():
    for args in (["--bogus"], ["--device", "gpu"], ["--wheels", "/no/such/dir"], ["--device", "cpu", "--only", "nope"]):
        proc = subprocess.run(["bash", str(SCRIPT), "--python", sys.executable, *args], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2 and "gpu-check:" in proc.stderr, args


@pytest.mark.slow
def test_dry_mode_on_the_cpu_passes_every_check():
    from ragen_cli.device import resolve_precision

    proc = subprocess.run(["bash", str(SCRIPT), "--device", "cpu", "--python", sys.executable],
                          capture_output=True, text=True, timeout=600)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1])
    assert out["ok"] and out["device"] == "cpu" and out["precision"] == resolve_precision("auto", "cpu")[0]
    checks = out["checks"]
    assert set(checks) == {"update_full", "update_lora", "hf_rollouts", "resume", "vllm"}
    for name in ("update_full", "update_lora"):  # advantage +1 rows rose, -1 rows fell
        c = checks[name]
        assert c["ok"] and c["logp_change_pos"] > 0 > c["logp_change_neg"] and c["optimizer"] == "AdamW"
        assert c["actor_device"] == c["reference_device"] == "cpu"
    assert checks["hf_rollouts"]["episodes"] == 4
    assert checks["resume"]["max_abs_diff"] == 0.0 and checks["resume"]["tensors"] > 0
    v = checks["vllm"]
    assert v["stale_verdict"] != "ok" and v["fresh_verdict"] == "ok" and v["sleep"].startswith("skipped")
    assert out["versions"]["deepspeed"] and out["versions"]["torch"].startswith("2.13.0")
