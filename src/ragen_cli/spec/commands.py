"""Light CLI commands for this package (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def init() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'init' is not implemented yet.", err=True)
    raise typer.Exit(1)


def validate() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'validate' is not implemented yet.", err=True)
    raise typer.Exit(1)
