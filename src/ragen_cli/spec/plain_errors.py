"""Pydantic validation errors rewritten in plain words, on the spec's own key paths.

Pydantic reports union members as extra `loc` parts (`'list[str]'`, `"literal['all-linear']"`);
we walk the models to keep only real keys and list indices, then merge the alternatives of one
key into a single message ("expected a list or 'all-linear'").
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from ragen_cli.spec.errors import suggest

Path = tuple[object, ...]

_KIND = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "string": "text",
    "list": "a list",
    "dict": "a mapping (key: value lines)",
    "model": "a mapping (key: value lines)",
    "model_attributes": "a mapping (key: value lines)",
}

_NAME_RULE = "must start with a letter or digit and contain only letters, digits, '_', '.' and '-'"


def _unwrap(annotation: Any) -> list[Any]:
    """The member types of Optional / Union annotations (a plain type -> [type])."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _step(annotation: Any, part: object) -> tuple[bool, Any]:
    """Can `part` follow a value of type `annotation` as a key path part? -> (yes, sub type)."""
    for member in _unwrap(annotation):
        origin = typing.get_origin(member)
        if _is_model(member) and isinstance(part, str):
            field = member.model_fields.get(part)
            return True, field.annotation if field else None
        if origin in (list, tuple) and isinstance(part, int):
            args = typing.get_args(member)
            return True, args[0] if args else Any
        if origin is dict and isinstance(part, str) and not _looks_like_tag(part):
            args = typing.get_args(member)
            return True, args[1] if len(args) == 2 else Any
    return False, None


def _looks_like_tag(part: str) -> bool:
    return any(c in part for c in "[]()'\"") or part in {"int", "float", "str", "bool", "none"}


def clean_loc(root: type[BaseModel], loc: tuple[object, ...]) -> Path:
    """Drop pydantic's union tags from `loc`, keeping the spec's key path."""
    out: list[object] = []
    annotation: Any = root
    for part in loc:
        ok, sub = _step(annotation, part)
        if ok:
            out.append(part)
            annotation = sub
    return tuple(out)


def model_at(root: type[BaseModel], path: Path) -> type[BaseModel] | None:
    """The section model at `path` (for suggesting keys), if there is one."""
    annotation: Any = root
    for part in path:
        ok, annotation = _step(annotation, part)
        if not ok:
            return None
    models = [m for m in _unwrap(annotation) if _is_model(m)]
    return models[0] if models else None


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def plain_message(root: type[BaseModel], path: Path, err: dict[str, Any]) -> str:
    """One pydantic error dict -> a sentence about the key at `path`."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, _show(err.get("input"))
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        parent = model_at(root, path[:-1])
        names = parent.model_fields.keys() if parent else []
        return "unknown key" + suggest(str(path[-1]), names)
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {got}"
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("greater than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        word, key = bounds[kind]
        return f"must be {word} {ctx.get(key)}, got {got}"
    if kind == "string_pattern_mismatch":
        return f"{_NAME_RULE}, got {got}" if path == ("name",) else f"must match {ctx.get('pattern')}, got {got}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters, got {len(err.get('input') or '')}"
    prefix = next((p for p in _KIND if kind.startswith(p + "_")), None)
    if prefix:
        return f"expected {_KIND[prefix]}, got {got}"
    return err.get("msg", kind)


def rewrite(root: type[BaseModel], errors: list[dict[str, Any]]) -> list[tuple[Path, str]]:
    """All pydantic errors -> [(key path, message)], union alternatives merged per key."""
    merged: dict[Path, list[str]] = {}
    for err in errors:
        path = clean_loc(root, tuple(err["loc"]))
        message = plain_message(root, path, err)
        bucket = merged.setdefault(path, [])
        if message not in bucket:
            bucket.append(message)
    return [(path, _join_alternatives(msgs)) for path, msgs in merged.items()]


def _join_alternatives(messages: list[str]) -> str:
    if len(messages) == 1:
        return messages[0]
    expected = [m.removeprefix("expected ").split(", got ")[0] for m in messages if m.startswith("expected ")]
    expected += [m.removeprefix("must be one of ").split(", got ")[0] for m in messages if m.startswith("must be one of ")]
    got = messages[0].split(", got ")[-1] if ", got " in messages[0] else ""
    if len(expected) == len(messages):
        return f"expected {' or '.join(expected)}" + (f", got {got}" if got else "")
    return "; ".join(messages)
