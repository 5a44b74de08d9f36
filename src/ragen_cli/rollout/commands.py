"""Light CLI commands for this package (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def inspect() -> None:
    """Not implemented yet."""
    typer.echo("ragen: 'inspect' is not implemented yet.", err=True)
    raise typer.Exit(1)
