"""`ragen watch`: light module; Textual is imported inside the command only."""

from __future__ import annotations

from pathlib import Path

import typer


def watch(
    run_dirs: list[Path] = typer.Argument(None, help="Run directories to watch side by side; default: the newest run under --runs."),
    runs: Path = typer.Option(Path("runs"), "--runs", help="Parent directory searched for the newest run when none is given."),
    interval: float = typer.Option(0.5, "--interval", min=0.05, help="Seconds between polls of the run directories."),
) -> None:
    """Watch training runs live: header with health verdict, charts, events, trajectories."""
    from ragen_cli.monitor.rundir import latest_run

    dirs = list(run_dirs or [])
    if not dirs:
        newest = latest_run(runs)
        if newest is None:
            typer.echo(f"ragen watch: no run directories under {runs}/; pass RUN_DIR (it may not exist yet).", err=True)
            raise typer.Exit(1)
        dirs = [newest]
    from ragen_cli.tui.app import WatchApp

    WatchApp(dirs, interval=interval).run()
