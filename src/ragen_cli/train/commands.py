"""Light CLI commands for this package (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def train() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'train' is not implemented yet.", err=True)
    raise typer.Exit(1)


def export() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'export' is not implemented yet.", err=True)
    raise typer.Exit(1)
