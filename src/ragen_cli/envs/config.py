"""An env's config: its `config_class` dataclass built from a spec's mapping, every problem
(unknown keys, wrong types, the dataclass's own checks) raised at once as `EnvConfigError`, and
its fields with their defaults and meanings for `ragen envs show`."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import types
import typing
from typing import Any


class EnvConfigError(ValueError):
    """A bad env config; `problems` lists every problem, one message each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _type_ok(value: Any, tp: Any) -> bool:
    """Does a YAML value fit a (resolved) dataclass field type? Ints are accepted as floats,
    lists as tuples; types this does not know are accepted."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in args)
    if tp is type(None):
        return value is None
    if tp in (bool, int, float, str):
        if isinstance(value, bool):
            return tp is bool
        return isinstance(value, (int, float) if tp is float else tp)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(_type_ok(v, a) for v, a in zip(value, args))
        return not args or all(_type_ok(v, args[0]) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict) and (not args or all(
            _type_ok(k, args[0]) and _type_ok(v, args[1]) for k, v in value.items()))
    return True


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) and not typing.get_args(tp) else str(tp).replace("typing.", "")


def _type_problem(value: Any, tp: Any, where: str) -> str | None:
    """None when `value` fits `tp`; else a message naming the innermost element that does not
    ("'arms[2]' must be float, got 'x'"), so a long list is not echoed whole."""
    if _type_ok(value, tp):
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(value, (list, tuple)) and (origin in (list, tuple)) and args:
        fixed = origin is tuple and args[-1] is not Ellipsis
        if fixed and len(value) != len(args):
            return f"'{where}' must have {len(args)} elements, got {len(value)}"
        for i, v in enumerate(value):
            inner = _type_problem(v, args[i] if fixed else args[0], f"{where}[{i}]")
            if inner:
                return inner
    if isinstance(value, dict) and origin is dict and args:
        for k, v in value.items():
            inner = _type_problem(k, args[0], f"{where} key {k!r}") or _type_problem(v, args[1], f"{where}.{k}")
            if inner:
                return inner
    shown = repr(value)
    return f"'{where}' must be {_type_name(tp)}, got {shown if len(shown) <= 80 else shown[:77] + '...'}"


def config_from_dict(config_class: type, values: dict | None) -> Any:
    """Build `config_class` (a dataclass) from a plain dict, rejecting unknown keys and
    wrong types; raises `EnvConfigError` with all problems at once."""
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    try:
        hints = typing.get_type_hints(config_class)
    except Exception:  # an annotation that cannot be resolved: skip type checks
        hints = {}
    problems = []
    for key in values:
        if key not in fields:
            problems.append(f"unknown key '{key}'; valid keys: {', '.join(sorted(fields))}")
    for key, value in values.items():
        problem = _type_problem(value, hints[key], key) if key in hints else None
        if problem:
            problems.append(problem)
    if problems:
        raise EnvConfigError(problems)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return config_class(**values)
    except (ValueError, TypeError) as err:
        raise EnvConfigError([str(err)]) from None


def config_fields(config: Any) -> list[tuple[str, Any, str]]:
    """(name, value, help) of each field of a config dataclass instance; the help is the string
    literal written right under the field in the class body (empty when there is none)."""
    docs: dict[str, str] = {}
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(type(config)))).body[0].body
    except (OSError, TypeError, SyntaxError, IndexError, AttributeError):
        body = []
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return [(f.name, getattr(config, f.name), docs.get(f.name, "")) for f in dataclasses.fields(config)]
