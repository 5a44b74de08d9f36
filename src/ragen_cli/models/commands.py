"""Light CLI commands for this package (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def models() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'models' is not implemented yet.", err=True)
    raise typer.Exit(1)


def doctor() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'doctor' is not implemented yet.", err=True)
    raise typer.Exit(1)
