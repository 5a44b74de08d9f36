"""`ragen init` (light imports only: pydantic, yaml, typer, rich), and what `ragen validate`
(compile/commands.py) and `ragen train` (train/commands.py) print of a spec: `load_or_exit(spec,
overrides)` (the loaded spec with provenance, or the problems printed and exit code 2),
`summary`, `provenance_line`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import typer

from ragen_cli.say import fail, say

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the loader builds the pydantic models (~0.3 s): only when a command runs
    from ragen_cli.spec.loader import LoadedSpec

SPEC_EXIT = 2  # a spec that cannot run: nothing was started
TEMPLATES = ("guess", "dataset", "gymnasium", "openenv", "tools")
"""`ragen init --template` names: a folder each under ragen_cli/templates/ (package data, which
the source tree's top-level `templates/` links to, so a plain `pip install .` carries them).
guess: a custom env (my_env.py, a TextEnv); dataset: prompts and a reward function; gymnasium:
a Gymnasium env through the adapter; openenv: an OpenEnv server through the adapter; tools: a
tool-calling task (a Python-function tool, data and a reward; docs/tools.md)."""


def templates_dir(name: str = "guess") -> Path:
    """The folder of `ragen init` template `name`; every file in it is copied."""
    return Path(__file__).resolve().parents[1] / "templates" / name


def load_or_exit(spec: Path, overrides: List[str], probe: bool = False, command: str = "validate",
                 machine: bool = False) -> LoadedSpec:
    """Load and validate (`probe`: and run the user's env code once; `machine`: and check what
    must exist on this machine, `spec.loader.machine_problems`), or print every problem to
    stderr (`ragen COMMAND: N problems in the run spec:`, then one a line) and exit 2."""
    from ragen_cli.spec.errors import SpecError
    from ragen_cli.spec.loader import load

    try:
        return load(spec, overrides, probe=probe, machine=machine)
    except SpecError as exc:
        fail(command, exc.render(), SPEC_EXIT)


def summary(loaded: LoadedSpec) -> str:
    from ragen_cli.spec.sizes import filter_kept_groups, filter_max_groups

    s = loaded.spec
    env, f = s.env.train, s.algorithm.filter
    fixed = filter_kept_groups(env.groups, f.keep_ratio, f.strategy, f.value, f.include_zero)
    most = filter_max_groups(env.groups, f.keep_ratio, f.strategy, f.value)
    kept = f"up to {most * env.group_size}" if fixed is None else fixed * env.group_size
    world = s.deepspeed.world
    return (
        f"{loaded.source}: ok. Run '{s.name}': model {s.model.name}{' + LoRA' if s.model.lora else ''}, "
        f"env {env.name}, {env.groups}x{env.group_size} trajectories per step ({kept} kept), "
        f"{s.train.steps} steps, preset {s.algorithm.preset or 'none'}, {world} process(es)."
    )


def provenance_line(loaded: LoadedSpec) -> str:
    """Which algorithm values came from the preset, the spec file and --set (defaults omitted)."""
    from ragen_cli.spec.presets import flatten

    values = flatten(loaded.spec.algorithm.model_dump())
    groups: dict[str, list[str]] = {"preset": [], "user": [], "--set": []}
    for key, source in loaded.provenance.items():
        if source in groups and key != "preset":
            groups[source].append(f"{key}={json.dumps(values[key])}")
    names = {"preset": f"from preset {loaded.spec.algorithm.preset}", "user": "from the spec", "--set": "from --set"}
    parts = [f"{names[k]}: {', '.join(v)}" for k, v in groups.items() if v]
    return "algorithm " + "; ".join(parts) if parts else "algorithm: all defaults"


def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the project (created if missing)."),
    template: str = typer.Option("guess", "--template", "-t", metavar="NAME",
                                 help="The template: guess (a custom env), dataset (prompts + a reward function), "
                                      "gymnasium (a Gymnasium env), openenv (an OpenEnv server) or tools (a "
                                      "tool-calling task)."),
    force: bool = typer.Option(False, "--force", help="Overwrite the template's files where they already exist."),
) -> None:
    """Scaffold a project: a commented run spec and what it trains on, working as written."""
    if template not in TEMPLATES:
        say("init", f"unknown template {template!r}; choose one of {', '.join(TEMPLATES)}.")
        raise typer.Exit(2)
    source = templates_dir(template)
    files = sorted(p.name for p in source.glob("*") if p.is_file() and not p.name.startswith("."))
    if "ragen.yaml" not in files:
        say("init", f"template {template!r} not found in {source} (no ragen.yaml).")
        raise typer.Exit(1)
    clash = [name for name in files if (directory / name).exists()]
    if clash and force:
        say("init", f"overwriting {', '.join(str(directory / c) for c in clash)} (--force).")
    elif clash:
        say("init", f"{', '.join(str(directory / c) for c in clash)} already exist(s); nothing written "
                    "(--force overwrites them).")
        raise typer.Exit(1)
    directory.mkdir(parents=True, exist_ok=True)
    for name in files:
        text = (source / name).read_text(encoding="utf-8")
        (directory / name).write_text(text.replace("{project_dir}", str(directory)), encoding="utf-8")
    others = [directory / n for n in files if n != "ragen.yaml"]
    typer.echo(f"Created {directory / 'ragen.yaml'}" + "".join(f", {o}" for o in others) + ". Next:")
    typer.echo(f"  cd {directory} && ragen validate ragen.yaml && ragen train ragen.yaml")
