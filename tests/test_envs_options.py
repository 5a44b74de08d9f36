"""`ragen envs options` and the dataset adapters' help without a data file (issue 73, item 11)."""

from __future__ import annotations

from typer.testing import CliRunner


def test_a_data_adapter_s_options_need_no_data_file():
    from ragen_cli.cli import app

    runner = CliRunner()
    shown = runner.invoke(app, ["envs", "show", "dataset"])
    assert shown.exit_code == 2
    assert shown.output.splitlines()[-2:] == [
        "ragen envs: path is required: a .jsonl, .csv or .parquet file, or a saved datasets folder",
        "(the dataset adapter's options: docs/envs.md, or `ragen envs options dataset`; give them with --set, "
        "e.g. --set path=data.jsonl)"]
    table = runner.invoke(app, ["envs", "options", "dataset"])
    assert table.exit_code == 0
    assert table.output.splitlines()[:3] == [
        "| option | default | meaning |", "|---|---|---|",
        "| `path` | required | The data: a .jsonl (or .json with one object per line), .csv or .parquet file, or a "
        "folder written by `datasets`' save_to_disk; relative paths start where ragen runs. |"]
    assert "| `judge` | `null` |" in table.output
    other = runner.invoke(app, ["envs", "options", "bandit"])
    assert other.exit_code == 2 and "run `ragen envs show bandit`" in other.output
