"""`ragen validate` (light imports only: pydantic, yaml, typer): the spec's problems, or its
summary, which algorithm values won, and the settings with no effect in its Plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ragen_cli.spec.commands import SPEC_EXIT, load_or_exit, provenance_line, summary


def validate(
    spec: Optional[Path] = typer.Argument(None, help="The run spec (YAML) to check.", show_default=False),
    set_: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a value: --set train.steps=10 (repeatable)."),
    schema: bool = typer.Option(False, "--schema", help="Print the JSON Schema of run specs and exit."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Do not run the spec's own code (env, reward functions) once on a sample."),
) -> None:
    """Check a run spec without training: every problem, with file:line:col and key path; for
    a valid one, a summary and a warning for each setting with no effect in its Plan. Each env
    that runs your code (a module:Class env, reward functions) is run once on a sample first."""
    if schema:
        from ragen_cli.spec.models import RunSpec

        typer.echo(json.dumps(RunSpec.model_json_schema(), indent=2))
        return
    if spec is None:
        typer.echo("ragen validate: give a SPEC file (or --schema).", err=True)
        raise typer.Exit(SPEC_EXIT)
    loaded = load_or_exit(spec, set_, probe=not no_probe)
    typer.echo(summary(loaded))
    typer.echo(provenance_line(loaded))
    for item in inert_warnings(loaded.spec):
        typer.echo(item)


def inert_warnings(spec) -> list[str]:
    """`compile.inert.inert_settings` of the spec's Plan on this machine, as warning lines. The
    chat template is not probed (it loads the tokenizer, and no rule reads it)."""
    from ragen_cli.compile.inert import inert_settings
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.compile.template import TemplateCheck

    plan = compile_plan(spec, template=TemplateCheck(None, "not checked by ragen validate"))
    return [item.warning() for item in inert_settings(spec, plan)]
