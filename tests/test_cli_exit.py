"""The `ragen` entry point ends the process itself once a command is done (no interpreter
teardown: with vLLM's native threads alive it aborted finished runs with exit 134). Exit codes
must still be the command's own, and a bug must still show its traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragen_cli.cli import exit_code

RAGEN = Path(sys.executable).parent / "ragen"
SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"


@pytest.mark.parametrize("args,code", [(["validate", str(SPEC)], 0), (["validate", "/no/such.yaml"], 2),
                                       (["--version"], 0), (["health", "/no/such/run"], 2)])
def test_exit_codes_are_the_commands(args, code):
    p = subprocess.run([str(RAGEN), *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == code, p.stderr
    if code == 0:
        assert p.stdout  # flushed before the process ended


def test_exit_code_mapping():
    assert exit_code(None) == 0 and exit_code(3) == 3
    assert exit_code("a message") == 1


def test_a_bug_shows_its_traceback_and_exits_1(tmp_path):
    # main() with a command that raises: traceback on stderr, exit 1 (never 0)
    code = ("import ragen_cli.cli as c\n"
            "@c.app.command('boom')\n"
            "def boom():\n    raise RuntimeError('kaboom')\n"
            "c.main()\n")
    p = subprocess.run([sys.executable, "-c", code, "boom"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "RuntimeError: kaboom" in p.stderr and "Traceback" in p.stderr
