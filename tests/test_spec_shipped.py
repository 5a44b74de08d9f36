"""Every shipped spec validates and opens with its command; docs/spec.md is current; `ragen init`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.spec.commands import templates_dir
from ragen_cli.spec.docgen import render
from ragen_cli.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").rglob("*.yaml"))
TEMPLATES = sorted((ROOT / "templates").rglob("*.yaml"))


def test_there_are_specs_to_check():
    names = {p.name for p in SPECS}
    assert {"bandit.yaml", "sokoban.yaml", "frozenlake.yaml", "webshop.yaml", "countdown.yaml", "cluster-2x8.yaml"} <= names
    assert TEMPLATES


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_shipped_spec_validates(path: Path, monkeypatch):
    monkeypatch.chdir(ROOT)  # relative paths in specs (the hostfile) start at the repo root
    # the GPU specs name a hub model: the machines they run on reach the hub (offline and not
    # cached is a validate error: tests/test_newcomer.py)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    rel = path.relative_to(ROOT)
    result = CliRunner().invoke(app, ["validate", str(rel)])
    assert result.exit_code == 0, result.output
    first = path.read_text().splitlines()[0]
    assert first == f"# ragen train {rel}", "a spec opens with the exact command that runs it"


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_template_spec_validates(path: Path, monkeypatch):
    monkeypatch.chdir(path.parent)  # the custom env module sits next to the spec
    result = CliRunner().invoke(app, ["validate", path.name])
    assert result.exit_code == 0, result.output
    assert path.read_text().startswith("# cd {project_dir} && ragen train ragen.yaml\n")


def test_init_scaffolds_a_project_that_validates(tmp_path: Path, monkeypatch):
    project = tmp_path / "proj"
    runner = CliRunner()
    result = runner.invoke(app, ["init", str(project)])
    assert result.exit_code == 0, result.output
    spec_text = (project / "ragen.yaml").read_text()
    assert spec_text.startswith(f"# cd {project} && ragen train ragen.yaml\n")
    monkeypatch.chdir(project)
    spec = load_spec("ragen.yaml")
    assert spec.env.train.name == "my_env:GuessNumberEnv"
    again = runner.invoke(app, ["init", str(project)])
    assert again.exit_code == 1 and "already exist" in again.stderr and "--force" in again.stderr
    assert (project / "ragen.yaml").read_text() == spec_text  # never overwritten
    (project / "ragen.yaml").write_text("edited", encoding="utf-8")
    (project / "mine.txt").write_text("mine", encoding="utf-8")
    forced = runner.invoke(app, ["init", str(project), "--force"])
    assert forced.exit_code == 0 and "overwriting" in forced.stderr
    assert (project / "ragen.yaml").read_text() == spec_text  # the template's file again
    assert (project / "mine.txt").read_text() == "mine"  # files the template does not have are left alone


def test_scaffold_env_plays_by_the_text_env_contract():
    """The scaffold env, run as written. Bisection on 1..8 finds any secret within its 4 guesses
    (worst case 4, 6, 7, 8: ceil(log2 8) + 1 = 4), so the episode ends in success with reward 1;
    an invalid guess never raises and scores 0 with action_is_valid False."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from my_env import GuessNumberEnv as E\nfrom ragen_cli.envs.base import TextEnv\n"
        "e = E(); assert isinstance(e, TextEnv)\n"
        "e.reset(seed=2); o, r, term, trunc, i = e.step('banana')\n"
        "assert (r, term, trunc, i['action_is_valid']) == (0.0, False, False, False), (r, term, i)\n"
        "e.reset(seed=2); lo, hi, n = 1, 8, 0\n"
        "while True:\n"
        "    g = (lo + hi) // 2; o, r, term, trunc, i = e.step(str(g)); n += 1\n"
        "    if term or trunc: break\n"
        "    lo, hi = (g + 1, hi) if o.startswith('Higher') else (lo, g - 1)\n"
        "print(r, term, trunc, i['success'], n)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(templates_dir())], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    reward, term, trunc, success, guesses = out.stdout.split()
    assert (reward, term, trunc, success) == ("1.0", "True", "False", "True")
    assert 1 <= int(guesses) <= 4


def test_docs_spec_md_is_current():
    assert (ROOT / "docs" / "spec.md").read_text() == render(), "run: python scripts/gen_docs.py"


@pytest.mark.parametrize("template", ["guess", "dataset", "gymnasium", "openenv", "tools"])
def test_init_template_scaffolds_a_project_that_validates(template, tmp_path, monkeypatch):
    from ragen_cli.spec.commands import TEMPLATES

    assert template in TEMPLATES
    project = tmp_path / "proj"
    result = CliRunner().invoke(app, ["init", str(project), "--template", template])
    assert result.exit_code == 0, result.output
    assert (project / "ragen.yaml").read_text().startswith(f"# cd {project} && ragen train ragen.yaml\n")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(app, ["validate", "ragen.yaml"])
    assert result.exit_code == 0, result.output


def test_the_dataset_template_rewards_the_last_number_of_a_reply():
    """The scaffold's reward reads the reply's last number: SmolLM2 answers "What is 3 + 1?" with
    "3 + 1 = 4" more often than with "4", and an exact match gave no reward spread at all
    (docs/experiments/seed-sweep.md)."""
    import importlib.util

    path = ROOT / "templates" / "dataset" / "my_rewards.py"
    spec = importlib.util.spec_from_file_location("dataset_template_rewards", path)
    rewards = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rewards)
    replies = ["4", "3 + 1 = 4", "3 + 1 = 4.", "4 apples, not 5", "three plus one", "", "-4", "14"]
    assert rewards.correct(["q"] * 8, replies, answer=["4"] * 8) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_init_refuses_an_unknown_template(tmp_path):
    result = CliRunner().invoke(app, ["init", str(tmp_path / "p"), "--template", "chess"])
    assert result.exit_code == 2 and "unknown template 'chess'; choose one of guess, dataset, gymnasium, openenv, tools" in result.output
    assert not (tmp_path / "p").exists()
