"""`ragen validate` (light imports only: pydantic, yaml, typer): the spec's problems, or its
summary, which algorithm values won, and the settings with no effect in its Plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import typer

from ragen_cli.spec.commands import load_or_exit, provenance_line, summary


def _schema(value: bool) -> None:
    """--schema: print the JSON Schema of run specs and exit (eager: no SPEC needed)."""
    if value:
        from ragen_cli.spec.models import RunSpec

        typer.echo(json.dumps(RunSpec.model_json_schema(), indent=2))
        raise typer.Exit()


def validate(
    spec: Path = typer.Argument(..., help="The run spec (YAML) to check.", show_default=False),
    set_: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a value: --set train.steps=10 (repeatable)."),
    schema: bool = typer.Option(False, "--schema", callback=_schema, is_eager=True, expose_value=False,
                                help="Print the JSON Schema of run specs and exit."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Do not run the spec's own code (env, reward functions) once on a sample."),
    preview: bool = typer.Option(False, "--preview", help="Also sample a few base-model replies per env at the training "
                                 "temperature and show what each reward function pays for them (loads the model)."),
) -> None:
    """Check a run spec without training: every problem, with file:line:col and key path; for
    a valid one, a summary and a warning for each setting with no effect in its Plan. Each env
    that runs your code (a module:Class env, reward functions) is run once on a sample first."""
    loaded = load_or_exit(spec, set_, probe=not no_probe, machine=True)
    typer.echo(summary(loaded))
    typer.echo(provenance_line(loaded))
    for line in spec_warnings(loaded.spec):
        typer.echo(line)
    for item in user_inert(loaded, _plan(loaded.spec))[0]:
        typer.echo(item.warning())
    if preview:
        from ragen_cli.rollout.preview import preview as sample

        for line in sample(loaded.spec):
            typer.echo(line)


def _plan(spec):
    """The spec's Plan on this machine. The chat template is not probed (it loads the tokenizer,
    and no rule of compile.inert reads it)."""
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.compile.template import TemplateCheck

    return compile_plan(spec, template=TemplateCheck(None, "not checked by ragen validate"))


def user_inert(loaded, plan) -> tuple[list, list]:
    """`compile.inert.inert_settings` split into (what the user wrote: warnings, what only the
    preset set: information for the dry run's table). A preset's value the plan does not read is
    not the user's doing (starpo's clip bounds on a one-optimizer-step run)."""
    from ragen_cli.compile.inert import inert_settings

    items = inert_settings(loaded.spec, plan)
    by_preset = [i for i in items if i.field.startswith("algorithm.")
                 and loaded.provenance.get(i.field.removeprefix("algorithm.")) == "preset"]
    return [i for i in items if i not in by_preset], by_preset


def spec_warnings(spec) -> list[str]:
    """A warning for each value ragen uses other than the spec wrote (spec.sizes.derive_sizes
    caps the micro batch at a mini batch's rows per process), and for a hub model that cannot
    load offline (`spec.refs.hub_cache_problem`: an error in `ragen validate`, a warning beside
    the dry run's plan, which does not need the model)."""
    from ragen_cli.spec.checks import compiled_sizes
    from ragen_cli.spec.refs import hub_cache_problem

    sizes, out = compiled_sizes(spec), []
    hub = hub_cache_problem(spec.model.name)
    if hub:
        out.append(f"warning: model.name {hub}")
    if sizes.micro_batch != spec.train.micro_batch:
        rows = sizes.mini_batch // sizes.world_size
        out.append(f"warning: train.micro_batch {spec.train.micro_batch} is more than a mini batch's {rows} rows per "
                   f"process ({sizes.mini_batch} per mini batch / {sizes.world_size} process(es)); ragen uses "
                   f"micro_batch {sizes.micro_batch}: write {sizes.micro_batch}, or fewer mini batches")
    return out
