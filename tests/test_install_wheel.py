"""`pip install .` (not editable) carries everything a user needs: the wheel is built from this
tree, installed into a fresh virtual environment, and its own `ragen` console script runs
`ragen init` and `ragen validate` on the result. No network: the wheel is installed with
--no-deps --no-index, and the dependencies come from this test's environment on PYTHONPATH
(a path entry, so the editable install's finder there is not active: ragen_cli must come from
the wheel, which the test checks)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_wheel_install_then_init_and_validate(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("ragen_cli-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(site.getsitepackages())}
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import ragen_cli; print(ragen_cli.__file__)"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr

    ragen = str(venv / "bin" / "ragen")
    init = subprocess.run([ragen, "init", "proj"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert init.returncode == 0, init.stdout + init.stderr
    assert sorted(p.name for p in (tmp_path / "proj").iterdir()) == ["my_env.py", "ragen.yaml"]
    check = subprocess.run([ragen, "validate", "ragen.yaml"], cwd=tmp_path / "proj", capture_output=True, text=True,
                           env=env, timeout=120)
    assert check.returncode == 0 and "ragen.yaml: ok" in check.stdout, check.stdout + check.stderr
