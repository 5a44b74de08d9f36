"""A newcomer's first hour (issue 73): each mistake a new user makes gets one line that names the
place and the fix, never a traceback or a guess. Real commands on real files: `ragen` in a
subprocess where the import state matters, Typer's CliRunner elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "src" / "ragen_cli" / "templates"
RAGEN = [sys.executable, "-c", "from ragen_cli.cli import main; main()"]
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_spec_folder(monkeypatch):
    """Loading a spec remembers its folder in RAGEN_SPEC_DIR; keep that within each test."""
    monkeypatch.delenv("RAGEN_SPEC_DIR", raising=False)


def ragen(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAGEN_SPEC_DIR"}
    return subprocess.run(RAGEN + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _corridor(tmp_path: Path) -> Path:
    """The guess template as corridor/ragen.yaml with its env in corridor/corridor.py."""
    project = tmp_path / "corridor"
    project.mkdir()
    shutil.copy(TEMPLATES / "guess" / "my_env.py", project / "corridor.py")
    text = (TEMPLATES / "guess" / "ragen.yaml").read_text()
    (project / "ragen.yaml").write_text(text.replace("name: my_env:GuessNumberEnv", "name: corridor:GuessNumberEnv"))
    return project


# ---------------------------------------------------------------- 1: where modules come from
def test_module_beside_the_spec_wins_over_a_folder_of_the_same_name(tmp_path):
    """From the parent folder, `corridor` is also the folder corridor/ (a namespace package);
    the spec's folder is searched first, so corridor/corridor.py is the module."""
    _corridor(tmp_path)
    done = ragen(["validate", "corridor/ragen.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("corridor/ragen.yaml: ok. Run 'guess-number'")


def test_a_folder_shadowing_the_module_is_named(tmp_path):
    """A spec in another folder names `corridor:...`: the only `corridor` found is the folder."""
    _corridor(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(tmp_path / "corridor" / "ragen.yaml", other / "ragen.yaml")
    (tmp_path / "corridor" / "corridor.py").rename(tmp_path / "corridor" / "env_code.py")
    done = ragen(["validate", "other/ragen.yaml"], cwd=tmp_path)
    assert done.returncode == 2
    # the env's `name:` is line 19, its value at column 11 (the guess template)
    assert done.stderr.splitlines()[1] == (
        f"  other/ragen.yaml:19:11: env.train.name: env 'corridor:GuessNumberEnv': module 'corridor' is the folder "
        f"{tmp_path / 'corridor'} (no __init__.py), not corridor.py; looked in {other}, {tmp_path} and the "
        "installed packages")


def test_a_missing_module_says_where_it_looked(tmp_path):
    project = _corridor(tmp_path)
    (project / "corridor.py").unlink()
    done = ragen(["validate", "ragen.yaml"], cwd=project)
    assert done.returncode == 2
    assert done.stderr.splitlines()[1] == (
        f"  ragen.yaml:19:11: env.train.name: env 'corridor:GuessNumberEnv': cannot import module 'corridor': no such module (looked in "
        f"{project} and the installed packages)")
