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


MAX_NODES = 100_000
"""Values a spec may expand to (a real spec has a few hundred): an alias bomb of 7 lines, each
anchor a list of nine of the previous one, expands to 9^7 = 4.8 million."""
MAX_DEPTH = 64
"""Nesting depth of a spec (a real one has 5)."""


class SpecTooLarge(Exception):
    """The YAML expands past MAX_NODES values or MAX_DEPTH levels, or an alias refers to itself."""

    def __init__(self, node: yaml.Node, message: str):
        super().__init__(message)
        self.node = node


def _walk(loader: SpecLoader, node: yaml.Node, path: Path, out: Located, problems: list[Problem],
          budget: list[int] | None = None, open_nodes: frozenset[int] = frozenset()) -> Any:
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise SpecTooLarge(node, f"the file expands to more than {MAX_NODES} values (aliases that repeat aliases?)")
    if len(path) > MAX_DEPTH:
        raise SpecTooLarge(node, f"values nested more than {MAX_DEPTH} levels deep")
    if id(node) in open_nodes:
        raise SpecTooLarge(node, "an alias refers to the value that contains it (a cycle)")
    open_nodes = open_nodes | {id(node)} if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) else open_nodes
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
            data[key] = _walk(loader, value_node, sub, out, problems, budget, open_nodes)
        return data
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            out.keys[(*path, i)] = _mark(item)
            items.append(_walk(loader, item, (*path, i), out, problems, budget, open_nodes))
        return items
    return _scalar(loader, node)


def load_located(text: str, file: str) -> tuple[Located, list[Problem]]:
    """Parse YAML `text` into data with positions; syntax errors become one `Problem`."""
    out = Located(data=None, file=file)
    loader = None
    try:
        loader = SpecLoader(text)  # the reader rejects forbidden characters here already
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
    except yaml.reader.ReaderError as exc:  # a character YAML forbids, found before any parsing
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return out, [Problem(f"{file}:{line}:{col}", "", f"character U+{exc.character:04X} is not allowed in YAML "
                             "(a control character or NUL byte: is this a text file?)")]
    except SpecTooLarge as exc:
        out.data = None
        return out, [Problem(f"{file}:{_mark(exc.node)[0]}:{_mark(exc.node)[1]}", "", str(exc))]
    except RecursionError:  # the composer recurses once per nesting level
        out.data = None
        return out, [Problem(f"{file}:1:1", "", "values nested too deeply to read (hundreds of [ or { levels)")]
    finally:
        if loader is not None:
            loader.dispose()
