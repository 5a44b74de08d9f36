"""`ragen health`: replay the health detector over run directories (light module)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ragen_cli.say import say


def health(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories (finished or still running)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: {\"runs\": [...]}."),
) -> None:
    """Replay the Echo Trap / template-collapse detector over runs: first warning, first
    collapse, and every change of verdict with its reasons."""
    from ragen_cli.monitor.replay import replay

    bad = [d for d in run_dirs if not (d / "metrics.jsonl").is_file()]
    if bad:
        say("health", f"{bad[0]}: no metrics.jsonl here; pass a run directory "
                           "(output.dir/NAME, e.g. runs/bandit)")
        raise typer.Exit(2)
    timelines = [replay(d) for d in run_dirs]
    if as_json:
        typer.echo(json.dumps({"runs": [t.to_json() for t in timelines]}))
        return
    for t in timelines:
        _print(t)


def _print(t) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    warn, coll = t.first_warning(), t.first_collapse()
    last = t.verdicts[-1].level if t.verdicts else "no training steps yet"
    console.print(f"[bold]{t.run}[/]  steps {len(t.steps)}  now: {last}  first warning: "
                  f"{warn.step if warn else '-'}  first collapse: {coll.step if coll else '-'}")
    if t.note:
        console.print(f"  note: {t.note}")
    for problem in t.problems:
        console.print(f"  skipped {problem}", markup=False, highlight=False)
    if not t.changes:
        return
    table = Table("step", "verdict", "reasons", box=None, padding=(0, 1))
    for c in t.changes:
        table.add_row(str(c["step"]), f"{c['previous']} -> {c['level']}",
                      "\n".join(f"{r['signal']}: {r['message']}" for r in c["reasons"]) or "-")
    console.print(table)
