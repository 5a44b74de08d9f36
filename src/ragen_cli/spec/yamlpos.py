"""YAML with positions: the plain data plus the line/column of every key and value.

`yaml.compose` gives the node tree with marks; we build the Python data from it ourselves so the
two can never disagree, and report duplicate keys (PyYAML silently keeps the last one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ragen_cli.spec.errors import Problem, join_path

Path = tuple[object, ...]


class SpecLoader(yaml.SafeLoader):
    """SafeLoader that also reads `1e-6` as a float (YAML 1.2; PyYAML's 1.1 rules need `1.0e-6`)."""


SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_scalar(text: str) -> Any:
    """A `--set` value, read with the same rules as the spec file."""
    return yaml.load(text, Loader=SpecLoader)


@dataclass
class Located:
    """YAML data with `file:line:col` (1-based) for each key path's key and value."""

    data: Any
    file: str
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: Path, *, at_value: bool = False) -> str:
        """Position of the deepest known prefix of `path` (the key, or its value)."""
        table = self.values if at_value else self.keys
        for n in range(len(path), 0, -1):
            pos = table.get(tuple(path[:n])) or self.keys.get(tuple(path[:n]))
            if pos:
                return f"{self.file}:{pos[0]}:{pos[1]}"
        return f"{self.file}:1:1"


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _scalar(loader: SpecLoader, node: yaml.ScalarNode) -> Any:
    return loader.construct_object(node, deep=True)


def _walk(loader: SpecLoader, node: yaml.Node, path: Path, out: Located, problems: list[Problem]) -> Any:
    out.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        data: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(loader, key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, (str, int, float, bool)) or key is None:
                problems.append(Problem(f"{out.file}:{_mark(key_node)[0]}:{_mark(key_node)[1]}", join_path(path), "keys must be plain names"))
                continue
            key = str(key)
            sub = (*path, key)
            if key in data:
                line, col = _mark(key_node)
                first = out.keys[sub][0]
                problems.append(Problem(f"{out.file}:{line}:{col}", join_path(sub), f"duplicate key (first set on line {first})"))
            out.keys[sub] = _mark(key_node)
            data[key] = _walk(loader, value_node, sub, out, problems)
        return data
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            out.keys[(*path, i)] = _mark(item)
            items.append(_walk(loader, item, (*path, i), out, problems))
        return items
    return _scalar(loader, node)


def load_located(text: str, file: str) -> tuple[Located, list[Problem]]:
    """Parse YAML `text` into data with positions; syntax errors become one `Problem`."""
    out = Located(data=None, file=file)
    loader = SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return out, [Problem(f"{file}:1:1", "", "the file is empty; a spec needs at least `name` and `env`")]
        problems: list[Problem] = []
        out.data = _walk(loader, node, (), out, problems)
        return out, problems
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else f"{file}:1:1"
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return out, [Problem(where, "", f"YAML syntax error: {what}")]
    finally:
        loader.dispose()
