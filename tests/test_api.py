"""docs/api.md's example runs as written (from a directory where `specs/` is the repository's),
and the public names are the API's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_public_names_import_light():
    code = ("import sys, ragen_cli as r\n"
            "assert r.__all__ == ['load_spec', 'compile_plan', 'train_policy', 'evaluate', 'read_metrics', 'TrainResult']\n"
            "assert all(callable(getattr(r, n)) for n in r.__all__)\n"
            "print([m for m in ('torch', 'deepspeed', 'vllm', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_docs_example_runs(tmp_path, monkeypatch, tiny_model_dir):
    import ragen_cli.train.loop  # noqa: F401  (as in a session that trained before: the package is loaded)

    [example] = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    (tmp_path / "specs").symlink_to(ROOT / "specs")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/api.md", "exec"), {})
    assert (tmp_path / "runs" / "api-demo" / "checkpoints" / "step-2").is_dir()
