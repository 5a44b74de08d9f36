"""Shared fixtures, and what makes a run of the suite independent of the machine and of the user.

- The model cache: the suite converts the built-in models once per session into its own
  `$RAGEN_CACHE` (a temporary directory, removed at the end), never into the user's
  `~/.cache/ragen`, which a `make train` beside the tests may be using. `RAGEN_TEST_CACHE=DIR`
  keeps that cache in DIR between runs instead (saves SmolLM2's ~30 s conversion per run).
- Precision: `RAGEN_CPU_BF16` (src/ragen_cli/device.py) defaults to 0 here, so `precision: auto`
  resolves to fp32 on every CPU, with or without native bf16, and a test's bound cannot depend on
  which machine runs it. Tests whose result depends on precision say which they test; those where
  bf16 matters run under both answers of the machine (`machine_precision`), emulated bf16
  included, on tiny inputs. `RAGEN_CPU_BF16=1 make test` runs the whole suite as a native-bf16
  CPU would (slow where the CPU only emulates bf16).
- OpenMP threads wait passively (`OMP_WAIT_POLICY=passive`, unless set): the end-to-end tests run
  several processes on few cores at once (two trainer ranks, an engine beside a trainer, the
  pytest process), where threads that spin while they wait take the cores from the others
  (three two-rank training tests: 114 s spinning, 98 s passive, on a 2-core AVX2 EPYC). It
  changes how idle threads wait, not what is computed; the docs' run commands use it too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# Tests never reach the Hugging Face hub: a hub id resolves from a (fake) local cache or is an error.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAGEN_CPU_BF16", "0")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import pytest

_own_cache: str | None = None


def pytest_configure(config):
    """Point RAGEN_CACHE at the suite's cache before any test (or subprocess) resolves a model."""
    global _own_cache
    kept = os.environ.get("RAGEN_TEST_CACHE")
    if kept:
        os.environ["RAGEN_CACHE"] = str(Path(kept).expanduser().resolve())
    else:
        _own_cache = tempfile.mkdtemp(prefix="ragen-test-cache-")
        os.environ["RAGEN_CACHE"] = _own_cache


def pytest_unconfigure(config):
    if _own_cache:
        shutil.rmtree(_own_cache, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The `tiny-random` built-in (fp32): 2 layers, hidden 64, head_dim 32, SmolLM2 tokenizer."""
    from ragen_cli.models.builtin import resolve_model

    return resolve_model("tiny-random", "float32")


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The `smollm2-135m-instruct` built-in (fp32); the first use converts it (about 30 s)."""
    from ragen_cli.models.builtin import resolve_model

    return resolve_model("smollm2-135m-instruct", "float32")


@pytest.fixture(scope="session")
def vllm_probe(tiny_model_dir, smollm2_dir, tmp_path_factory) -> dict:
    """tests/rollout_vllm_probe.py's JSON result: the vLLM backend against HF and the trainer on
    tiny-random (tests/test_rollout_vllm.py), then SmolLM2's greedy tokens from a second engine
    (tests/test_models_smollm2.py); one process, each engine in it, as a run's Plan starts it."""
    import json
    import subprocess
    import sys

    script = Path(__file__).with_name("rollout_vllm_probe.py")
    work = tmp_path_factory.mktemp("vllm")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run([sys.executable, str(script), str(tiny_model_dir), str(work), str(smollm2_dir)],
                          capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(autouse=True)
def _own_spec_folder(monkeypatch):
    """Each test starts without a spec folder (user_code.SPEC_DIR_VAR, which loading a spec sets
    for the process): one test's project must not answer another's `module:name`."""
    monkeypatch.delenv("RAGEN_SPEC_DIR", raising=False)


@pytest.fixture(scope="module")
def tiny_hf():
    """tiny-random (fp32, seeded) and its tokenizer behind the HF backend: (backend, model, tokenizer),
    a real sampler for tests of what is built around one (the endpoint, agent envs)."""
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend

    torch.manual_seed(0)
    path = resolve_model("tiny-random", "float32")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tok = load_tokenizer(path)
    return HFBackend(model, tok), model, tok


@pytest.fixture(params=["fp32", "bf16"])
def machine_precision(request, monkeypatch) -> str:
    """Run the test once as on a CPU without native bf16 (`precision: auto` -> fp32) and once as
    on a CPU with it (auto -> bf16), whichever CPU this is; returns the precision auto gives."""
    monkeypatch.setenv("RAGEN_CPU_BF16", "1" if request.param == "bf16" else "0")
    return request.param
