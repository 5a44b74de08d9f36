"""Spec problems: where (file:line:col or `--set ...`), which key path, and what is wrong."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec. `where` is `file:line:col` or `--set key=value`."""

    where: str
    path: str
    message: str

    def __str__(self) -> str:
        key = f"{self.path}: " if self.path else ""
        return f"{self.where}: {key}{self.message}"


class SpecError(Exception):
    """A spec that cannot run. Carries every problem found, not only the first."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems: list[Problem] = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.problems)
        head = f"{n} problem{'s' if n != 1 else ''} in the run spec:"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


def suggest(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest valid name, else the list of valid names."""
    choices = sorted(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{close[0]}'?"
    if not choices:
        return ""
    return "; valid keys: " + ", ".join(choices)


def join_path(parts: Iterable[object]) -> str:
    """('env', 'val', 'envs', 0, 'name') -> 'env.val.envs[0].name'."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def split_path(text: str) -> tuple[object, ...]:
    """'env.val.envs[0].name' -> ('env', 'val', 'envs', 0, 'name') (inverse of `join_path`)."""
    out: list[object] = []
    for part in text.split("."):
        name, *indices = part.split("[")
        if name:
            out.append(name)
        out.extend(int(i.rstrip("]")) for i in indices)
    return tuple(out)
