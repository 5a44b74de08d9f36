"""`ragen watch`: light module; Textual is imported inside the command only."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from ragen_cli.say import say


def watch(
    run_dirs: list[Path] = typer.Argument(None, help="Run directories to watch side by side; default: the newest run under --runs."),
    runs: Path = typer.Option(Path("runs"), "--runs", help="Parent directory searched for the newest run when none is given."),
    interval: float = typer.Option(0.5, "--interval", min=0.05, help="Seconds between polls of the run directories."),
) -> None:
    """Watch training runs live: header with health verdict, charts, events, trajectories. When
    stdout is not a terminal (a pipe, a file), print each run's header as plain text and exit."""
    from ragen_cli.monitor.rundir import latest_run

    dirs = list(run_dirs or [])
    if not dirs:
        newest = latest_run(runs)
        if newest is None:
            say("watch", f"no run directories under {runs}/; pass RUN_DIR (it may not exist yet).")
            raise typer.Exit(1)
        dirs = [newest]
    if not sys.stdout.isatty():
        for d in dirs:
            typer.echo(plain_summary(d))
        return
    from ragen_cli.tui.app import WatchApp

    WatchApp(dirs, interval=interval).run()


def plain_summary(run_dir: Path, now: float | None = None) -> str:
    """The header `ragen watch` shows for `run_dir`, as plain text (no markup, no escape codes)."""
    from rich.text import Text

    from ragen_cli.tui.format import header_markup
    from ragen_cli.tui.state import RunState

    state = RunState(run_dir)
    if not state.exists:
        return f"{run_dir}: no such run directory (yet)"
    state.poll()
    info = state.info
    name, desc = (info.name, info.description) if info else (state.run.name, "")
    text = header_markup(name, desc, state.history, info.total_steps if info else None, state.events,
                         state.verdict, time.time() if now is None else now)
    return Text.from_markup(text).plain
