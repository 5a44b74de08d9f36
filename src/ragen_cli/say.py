"""One style for what a command says on stderr: `ragen COMMAND: message` (issue 73, item 10).

Errors, warnings (`ragen train: warning: ...`) and notes all open with the program and the
command the user typed (its first word: `ragen envs`, not `ragen envs show`), so a line in a log
says where it came from. Light: typer only."""

from __future__ import annotations

from typing import NoReturn

import typer


def say(command: str, message: str) -> None:
    """`ragen COMMAND: message` on stderr."""
    typer.echo(f"ragen {command}: {message}", err=True)


def fail(command: str, message: str, code: int = 2) -> NoReturn:
    """Say `message` and end the command with `code` (2: the user's input; 1: it ran and failed)."""
    say(command, message)
    raise typer.Exit(code)
