"""Load a run spec: YAML with positions -> `--set` overrides -> preset -> pydantic -> cross-field.

Every problem found is reported at once as a `SpecError`, each naming where it is
(`file:line:col`, or the `--set` argument) and the key path:

    specs/x.yaml:12:5: algorithm.clip_hgh: unknown key; did you mean 'clip_high'?
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import ValidationError

from ragen_cli.spec.checks import cross_field_problems
from ragen_cli.spec.errors import Problem, SpecError, join_path, split_path
from ragen_cli.spec.models import AlgorithmSpec, RunSpec
from ragen_cli.spec.plain_errors import rewrite
from ragen_cli.user_code import use_spec_folder
from ragen_cli.spec.presets import PRESETS, Source, leaf_paths, merge_under, resolve_provenance
from ragen_cli.spec.yamlpos import Located, load_located, load_scalar

KeyPath = tuple[object, ...]


@dataclass(frozen=True)
class LoadedSpec:
    """A valid spec, the file it came from, and who set each algorithm field."""

    spec: RunSpec
    source: str
    provenance: dict[str, Source] = field(default_factory=dict)


@dataclass(frozen=True)
class Override:
    raw: str
    path: KeyPath
    value: Any


def shorten(text: str, limit: int = 80) -> str:
    """`text`, cut to `limit` characters with '...' (a pasted value is not echoed whole)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_override(raw: str) -> tuple[Override | None, Problem | None]:
    """`a.b=c` -> Override(path=('a', 'b'), value=yaml scalar 'c')."""
    where = f"--set {shorten(raw)}"
    key, eq, text = raw.partition("=")
    key = key.strip()
    if not eq or not key:
        return None, Problem(where, "", "expected KEY=VALUE, e.g. --set train.steps=10")
    if any(not part.split("[")[0] and not part.startswith("[") or part == "" for part in key.split(".")):
        return None, Problem(where, key, "empty key name between dots (e.g. train..steps); write the full path: train.steps")
    try:
        path = split_path(key)
        value = load_scalar(text) if text.strip() else ""
    except (ValueError, yaml.YAMLError) as exc:
        return None, Problem(where, key, f"cannot read the value: {str(exc).splitlines()[0]}")
    if any(p == "" for p in path):
        return None, Problem(where, key, "empty key name")
    return Override(raw, path, value), None


def apply_override(data: dict[str, Any], ov: Override) -> Problem | None:
    """Set `ov.value` at `ov.path` in `data`, creating mappings on the way."""
    node: Any = data
    for i, part in enumerate(ov.path[:-1]):
        nxt = ov.path[i + 1]
        if isinstance(node, dict) and not isinstance(part, int):
            if node.get(part) is None:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return Problem(f"--set {ov.raw}", join_path(ov.path[:i]), "cannot set a key inside a value that is not a mapping")
    last = ov.path[-1]
    if isinstance(node, dict) and not isinstance(last, int):
        node[last] = ov.value
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        node[last] = ov.value
    else:
        return Problem(f"--set {ov.raw}", join_path(ov.path[:-1]), "cannot set a key inside a value that is not a mapping")
    return None


def _nested(path: KeyPath, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    return out


def _with_preset(data: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Fill `algorithm` fields the user did not write from the chosen preset."""
    algorithm = data.get("algorithm")
    if algorithm is None:
        algorithm = {}
    if not isinstance(algorithm, dict):
        return data, None
    preset = algorithm.get("preset", AlgorithmSpec.model_fields["preset"].default)
    if not isinstance(preset, str) or preset not in PRESETS:
        return data, None
    return {**data, "algorithm": merge_under(PRESETS[preset], algorithm)}, preset


class _Locator:
    """Turns a key path into `file:line:col` or the `--set` argument that wrote it."""

    def __init__(self, located: Located, overrides: list[Override]):
        self.located, self.overrides = located, overrides

    def where(self, path: KeyPath, *, at_value: bool) -> str:
        for ov in reversed(self.overrides):
            n = min(len(ov.path), len(path))
            if n and tuple(ov.path[:n]) == tuple(path[:n]):
                return f"--set {shorten(ov.raw)}"
        return self.located.where(path, at_value=at_value)


def _order(problem: Problem) -> tuple[int, int, int]:
    """File problems by line and column, then `--set` problems in command-line order."""
    parts = problem.where.rsplit(":", 2)
    if problem.where.startswith("--set") or len(parts) < 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return (1, 0, 0)
    return (0, int(parts[1]), int(parts[2]))


def _read(path: Path) -> tuple[str | None, Problem | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, Problem(str(path), "", "no such file")
    except IsADirectoryError:
        return None, Problem(str(path), "", "is a directory; pass a spec file (e.g. specs/bandit.yaml)")
    except OSError as exc:
        return None, Problem(str(path), "", f"cannot read the file: {exc.strerror or exc}")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None, Problem(f"{path}:1:1", "", "the file is UTF-16; save it as UTF-8")
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, Problem(f"{path}:{line}:{col}", "", f"byte 0x{raw[exc.start]:02X} is not UTF-8 text (Latin-1? "
                             "a binary file?); save the spec as UTF-8")


def load(path: str | Path, overrides: Sequence[str] = (), probe: bool = False, machine: bool = False) -> LoadedSpec:
    """Load, override, apply the preset and validate; raise `SpecError` listing all problems.
    `probe`: also run each env that runs the user's code once (`probe_problems`); `machine`: also
    check what must exist on this machine (`machine_problems`)."""
    file = str(path)
    text, problem = _read(Path(path))
    if problem:
        raise SpecError([problem])
    use_spec_folder(path)
    located, problems = load_located(text, file)
    if problems and located.data is None:
        raise SpecError(problems)
    if not isinstance(located.data, dict):
        raise SpecError([Problem(f"{file}:1:1", "", "a spec is a mapping of sections (name:, env:, ...), not a single value")])
    data = copy.deepcopy(located.data)
    parsed: list[Override] = []
    for raw in overrides:
        ov, bad = parse_override(raw)
        bad = bad or apply_override(data, ov)
        if bad:
            problems.append(bad)
        else:
            parsed.append(ov)
    merged, preset = _with_preset(data)
    locator = _Locator(located, parsed)
    spec = None
    try:
        spec = RunSpec.model_validate(merged)
    except ValidationError as exc:
        for key_path, message in rewrite(RunSpec, exc.errors()):
            at_value = not message.startswith(("unknown key", "required key"))
            problems.append(Problem(locator.where(key_path, at_value=at_value), join_path(key_path), message))
    if spec is not None:
        for key_path, message in quoted_numbers(spec, merged):
            problems.append(Problem(locator.where(key_path, at_value=True), join_path(key_path), message))
    if spec is not None and not problems:
        for key, message in cross_field_problems(spec):
            problems.append(Problem(locator.where(split_path(key), at_value=True), key, message))
    if spec is not None and not problems and probe:
        for key, message in probe_problems(spec):
            problems.append(Problem(locator.where(split_path(key), at_value=True), key, message))
    if spec is not None and not problems and machine:
        for key, message in machine_problems(spec):
            problems.append(Problem(locator.where(split_path(key), at_value=True), key, message))
    if problems:
        raise SpecError(sorted(problems, key=_order))
    return LoadedSpec(spec, file, _provenance(spec, preset, located.data, parsed))


def quoted_numbers(model: Any, data: Any, path: KeyPath = ()) -> list[tuple[KeyPath, str]]:
    """Whole-number fields written as text (`rank: "16"`): pydantic would read "16" as 16, but a
    quoted value is text in YAML, so the spec says something other than what it means. (Float
    fields are left alone: YAML 1.1 reads `1e-4` unquoted as text.)"""
    from pydantic import BaseModel

    out: list[tuple[KeyPath, str]] = []
    if isinstance(model, BaseModel) and isinstance(data, dict):
        for key, raw in data.items():
            if key in type(model).model_fields:
                out += quoted_numbers(getattr(model, key), raw, (*path, key))
    elif isinstance(model, (list, tuple)) and isinstance(data, list):
        for i, (item, raw) in enumerate(zip(model, data)):
            out += quoted_numbers(item, raw, (*path, i))
    elif isinstance(model, int) and not isinstance(model, bool) and isinstance(data, str):
        out.append((path, f"{data!r} is text (quoted); write the number {model} without quotes"))
    return out


def machine_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """What this machine lacks for the spec: with HF_HUB_OFFLINE set, a hub model whose snapshot
    is not in the local cache (`spec.refs.hub_cache_problem`): [(key path, message)]."""
    from ragen_cli.spec.refs import hub_cache_problem

    hub = hub_cache_problem(spec.model.name)
    return [("model.name", hub)] if hub else []


def probe_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """envs/probe.py on the train env and each validation env (each distinct one once), at its
    first seed: [(key path, message)]."""
    from ragen_cli.envs.probe import probe_env

    refs = [("env.train", spec.env.train, spec.env.train.seed)]
    refs += [(f"env.val.envs[{i}]", ref, spec.env.val.seed) for i, ref in enumerate(spec.env.val.envs)]
    out, seen = [], set()
    for prefix, ref, seed in refs:
        ident = (ref.name, repr(sorted(dict(ref.config).items())), seed)
        if ident in seen:
            continue
        seen.add(ident)
        out += [(f"{prefix}.{key}", message) for key, message in probe_env(ref.name, dict(ref.config), seed)]
    return out


def _provenance(spec: RunSpec, preset: str | None, file_data: dict, parsed: list[Override]) -> dict[str, Source]:
    """Who set each algorithm field: the spec file's `algorithm` mapping, `--set algorithm...`."""
    user = file_data.get("algorithm") if isinstance(file_data.get("algorithm"), dict) else {}
    from_set: dict[str, Any] = {}
    for ov in parsed:
        if ov.path[:1] == ("algorithm",):
            value = _nested(ov.path[1:], ov.value)
            if isinstance(value, dict):
                from_set = merge_under(from_set, value)
    return resolve_provenance(leaf_paths(spec.algorithm.model_dump()), preset, user, from_set)


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> RunSpec:
    """The validated `RunSpec` from a YAML file plus `--set` overrides (see `load`)."""
    return load(path, overrides).spec
