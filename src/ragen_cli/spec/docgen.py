"""docs/spec.md, generated from the models (`python scripts/gen_docs.py`; a test keeps it current)."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ragen_cli.spec.sizes import SIZE_LABELS
from ragen_cli.spec.checks import RULES
from ragen_cli.spec.models import RunSpec
from ragen_cli.spec.presets import PRESETS

HEADER = """# Run spec reference

<!-- Generated from src/ragen_cli/spec/models.py by `python scripts/gen_docs.py`; do not edit. -->

A run spec is one YAML file; `ragen validate SPEC` checks it (every problem at once, with
file:line:col and key path), `ragen validate --schema` prints its JSON Schema, and
`ragen train SPEC --dry-run` prints the compiled plan. Unknown keys are errors. Any value can be
overridden on the command line with `--set key.path=value` (the value is read as YAML).
Relative paths start at the directory ragen runs in. Python modules named `module:name` (a custom
env, reward, feedback, tool or mapping function) are imported from the spec's folder first, then
from the directory ragen runs in; an import error says where it looked.

Both `ragen validate` and the dry run warn about each setting the spec writes that has no effect
in its compiled plan, naming the field and why: `algorithm.clip_low` / `clip_high` when the
update is one optimizer step per rollout batch (the PPO ratio is exactly 1), `train.lr_critic`
without a critic, `algorithm.rollout_is: on` where trainer and engine both run fp32, and the
others listed in `src/ragen_cli/compile/inert.py`. Defaults are never named, nor a preset's
values (the dry run's table lists those, marked with the preset). They also warn about each value
ragen uses other than the spec wrote (a `train.micro_batch` above a mini batch's rows per process
is lowered to them). With `HF_HUB_OFFLINE` set, a hub model missing from the local cache is an
error in `ragen validate` and a warning beside the dry run's plan (which does not load it). A
whole number written in quotes (`rank: "16"`) is an error: YAML reads it as text.
Before anything starts, `ragen validate` and `ragen train` run the spec's own code once (a
dataset's reward functions on a sample row, a custom or Gymnasium env one step; docs/envs.md);
`--no-probe` skips that.

Editor completion: `ragen validate --schema > ragen.schema.json`, then start the spec with
`# yaml-language-server: $schema=ragen.schema.json` (VS Code's YAML extension and other editors
that use yaml-language-server read it).
"""


def type_name(annotation: Any) -> str:
    """A readable type: `int`, `'a' \\| 'b'`, `list of text`, `section`, `... or null`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    names = {int: "integer", float: "number", bool: "true/false", str: "text"}
    return names.get(annotation, str(annotation))


def default_text(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(section)"
    return "`" + json.dumps(value) + "`"


def _bounds(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(meta, name, None) is not None:
                parts.append(f"{sign} {getattr(meta, name)}")
    return f" ({', '.join(parts)})" if parts else ""


def _nested_models(annotation: Any, path: str) -> list[tuple[type[BaseModel], str]]:
    """Sections inside a field: `X`, `X | None` -> path; `list[X]` -> path[]."""
    origin = typing.get_origin(annotation)
    members = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else (annotation,)
    out = []
    for member in members:
        if typing.get_origin(member) is list and typing.get_args(member):
            out += [(m, f"{path}[]") for m, _ in _nested_models(typing.get_args(member)[0], path)]
        elif isinstance(member, type) and issubclass(member, BaseModel):
            out.append((member, path))
    return out


def _sections(model: type[BaseModel], prefix: str) -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    subsections: list[str] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        rows.append(f"| `{path}` | {type_name(field.annotation)}{_bounds(field)} | {default_text(field)} | {field.description} |")
        for sub, sub_path in _nested_models(field.annotation, path):
            subsections += _sections(sub, sub_path)
    title = f"## `{prefix}`" if prefix else "## Top level"
    return [title, "", *rows, "", *subsections]


def render() -> str:
    lines = [HEADER, *_sections(RunSpec, "")]
    lines += ["## Presets (`algorithm.preset`)", "",
              "A preset fills the `algorithm` fields you do not write; fields you write win. "
              "`ragen train --dry-run` shows, for each field, whether the default, the preset, the spec "
              "file or `--set` set it.", "", "| preset | values |", "|---|---|"]
    for name, values in PRESETS.items():
        lines.append(f"| `{name}` | `{json.dumps(values)}` |")
    lines += ["", "## Rules across fields", ""] + [f"- {rule}" for rule in RULES]
    lines += ["", "## Derived sizes (`ragen train --dry-run`)", "", "| name | meaning |", "|---|---|"]
    lines += [f"| `{key}` | {label} |" for key, label in SIZE_LABELS.items()]
    return "\n".join(lines).rstrip() + "\n"
