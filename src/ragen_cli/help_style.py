"""How `ragen ... --help` reads: click's conventions, set once for every command (issue 73, item 8).

Typer 0.29 prints each parameter's Python type (`<bool>` on flags, `<str>`, `<list[str]>`,
`<str,str>...`) and a required argument as `{name}`. `style_help(app)` gives every command and
group of the tree the classes below, whose `get_params` sets what a parameter did not set itself:

- a flag shows no metavar; an option shows its type in click's words (TEXT, INTEGER, FLOAT, PATH;
  a choice as `[a|b]`); a metavar given in the command's own code (`--set KEY=VALUE`) is kept;
- an argument is named in capitals (SPEC, RUN_DIRS), `[SPEC]` in the usage line when optional and
  `SPEC` when required, with its type beside it;
- a docstring's hard line breaks are joined (the terminal wraps), and the command list shows the
  first sentence.

Light: typer only, as the rest of cli.py.
"""

from __future__ import annotations

import re

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH", "Path": "PATH"}


def type_word(param, ctx) -> str:
    """A parameter's type in click's words, from Typer's own label (`<str>` -> TEXT,
    `<list[Path]>` -> PATH, `<int range>` -> INTEGER, `<a|b>` -> [a|b], `<str,str>` -> TEXT TEXT)."""
    label = param.display_type(ctx).strip("<>")
    label = re.sub(r"^list\[(.*)\]$", r"\1", label).removesuffix(" range")
    if "|" in label:
        return f"[{label}]"
    return " ".join(WORDS.get(part, part.upper()) for part in label.split(","))


class _Argument(TyperArgument):
    """An argument whose type column shows its type in click's words (its name is its metavar)."""

    def display_type_rich(self, ctx) -> str | None:
        return type_word(self, ctx)


def tidy_params(params: list, ctx) -> list:
    """Each parameter's metavar as the module doc says; idempotent, returns `params`."""
    for param in params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = param.name.upper()
            param.__class__ = _Argument  # one behaviour changed: the type column (see _Argument)
        elif isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = "" if param.is_flag else type_word(param, ctx)
    return params


def unwrap(text: str | None) -> str | None:
    """A docstring's paragraphs, each on one line (the terminal wraps them)."""
    if not text:
        return text
    import inspect

    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n"))


def first_sentence(text: str | None) -> str | None:
    if not text:
        return text
    return re.split(r"(?<=[.!?])\s", text.split("\n\n")[0], maxsplit=1)[0]


class _Styled:
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = unwrap(self.help)
        self.short_help = self.short_help or first_sentence(self.help)

    def get_params(self, ctx) -> list:
        return tidy_params(super().get_params(ctx), ctx)

    def collect_usage_pieces(self, ctx) -> list[str]:
        """Typer writes a required argument `{SPEC}`; click's convention is `SPEC`."""
        return [re.sub(r"^\{(.*)\}(\.\.\.)?$", r"\1\2", piece) for piece in super().collect_usage_pieces(ctx)]


class RagenCommand(_Styled, TyperCommand):
    pass


class RagenGroup(_Styled, TyperGroup):
    pass


def style_help(app: typer.Typer) -> None:
    """Give `app`, its commands and its sub-apps (recursively) the classes above."""
    app.info.cls = RagenGroup
    for command in app.registered_commands:
        command.cls = RagenCommand
    for group in app.registered_groups:
        group.cls = RagenGroup
        style_help(group.typer_instance)
