"""`ragen envs` (placeholder until the environments issue lands)."""

from __future__ import annotations

import typer

app = typer.Typer(help="List, show and play environments.", no_args_is_help=False)


@app.callback(invoke_without_command=True)
def envs() -> None:
    """List environments (not implemented yet)."""
    typer.echo("ragen: 'envs' is not implemented yet.", err=True)
    raise typer.Exit(1)
