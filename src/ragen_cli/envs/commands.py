"""`ragen envs`: list environments, show an initial state, or play one in the terminal.
Light imports only: the env modules are imported when a command runs."""

from __future__ import annotations

import typer

from ragen_cli.say import say

app = typer.Typer(help="List, show and play environments.", no_args_is_help=False)

SEED_OPT = typer.Option(0, "--seed", "-s", min=0, help="Seed of the initial state (0 or more).")
SET_OPT = typer.Option([], "--set", metavar="KEY=VALUE", help="Env config override key=value (YAML value); repeatable.")


def parse_sets(items: list[str]) -> dict:
    """['dim=8', 'arm_names=[A, B]'] -> {'dim': 8, 'arm_names': ['A', 'B']}."""
    import yaml

    config = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got '{item}'", param_hint="--set")
        try:
            config[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise typer.BadParameter(f"bad value in '{item}': {err}", param_hint="--set") from None
    return config


def _make(name: str, sets: list[str]):
    from ragen_cli.envs.registry import make_env

    config = parse_sets(sets)
    try:
        return make_env(name, config)
    except ValueError as err:
        from ragen_cli.envs.config_doc import ADAPTERS

        hint = (f"\n(the {name} adapter's options: docs/envs.md, or `ragen envs options {name}`; give them with "
                f"--set, e.g. --set path=data.jsonl)") if name in ADAPTERS else ""
        say("envs", str(err) + hint)
        raise typer.Exit(2) from None
    except Exception:  # a user's env class failing in __init__
        return _run_user_code(make_env, name, config)


def _run_user_code(what, *args):
    """`what(*args)`; an env or a user's function that fails ends the command with one line (the
    error and the user's own frame), exit 1, not a traceback."""
    from ragen_cli.envs.base import EnvFailure
    from ragen_cli.envs.probe import user_frame

    try:
        return what(*args)
    except Exception as err:  # a user's env, reward or feedback function may raise anything
        text = str(err) if isinstance(err, EnvFailure) else f"{type(err).__name__}: {err}"
        where = user_frame(err)
        say("envs", f"{text}" + (f" (at {where})" if where else ""))
        raise typer.Exit(1) from None


def _yaml_value(value) -> str:
    import yaml

    if isinstance(value, tuple):
        value = list(value)
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, sort_keys=False, width=10**6)
    return text.strip().removesuffix("...").strip()


def _actions_text(env) -> str:
    return ", ".join(env.valid_actions()) or "(free-form text, see the instruction)"


@app.callback(invoke_without_command=True)
def envs(ctx: typer.Context) -> None:
    """List the environments (name and one-line description)."""
    if ctx.invoked_subcommand is not None:
        return
    from ragen_cli.envs.registry import list_envs

    rows = list_envs()
    width = max(len(name) for name, _ in rows)
    for name, description in rows:
        typer.echo(f"{name.ljust(width)}  {description}")


@app.command("show")
def show(name: str = typer.Argument(..., help="Env name (see `ragen envs`)."),
         seed: int = SEED_OPT, sets: list[str] = SET_OPT) -> None:
    """Print the instruction and the initial state for a seed."""
    env = _make(name, sets)
    obs, _ = _run_user_code(env.reset, seed)
    from ragen_cli.envs.config import config_fields

    typer.echo(f"== {env.name} (seed {seed}, {env.max_actions} actions) ==")
    typer.echo("-- config (change with --set key=value) --")
    for key, value, help_ in config_fields(env.config):
        typer.echo(f"{key}: {_yaml_value(value)}" + (f"  # {help_}" if help_ else ""))
    typer.echo("-- instruction --")
    typer.echo(env.instruction())
    typer.echo("-- initial state --")
    typer.echo(obs)
    typer.echo("-- valid actions --")
    typer.echo(_actions_text(env))


@app.command("options")
def options(name: str = typer.Argument(..., help="A data adapter: dataset, tools or agent.")) -> None:
    """Print a data adapter's options (the table in docs/envs.md), which need no data file."""
    from ragen_cli.envs.config_doc import ADAPTERS, options_table

    if name not in ADAPTERS:
        say("envs", f"options lists a data adapter's options ({', '.join(ADAPTERS)}); for {name!r} run "
                    f"`ragen envs show {name}`, which prints its config")
        raise typer.Exit(2)
    typer.echo(options_table(name), nl=False)


@app.command("play")
def play(name: str = typer.Argument(..., help="Env name (see `ragen envs`)."),
         seed: int = SEED_OPT, sets: list[str] = SET_OPT) -> None:
    """Play an episode: type one action per line (`:q` quits)."""
    import sys

    env = _make(name, sets)
    obs, _ = _run_user_code(env.reset, seed)
    typer.echo(env.instruction())
    typer.echo(f"\n{obs}")
    total = 0.0
    while True:
        typer.echo(f"valid actions: {_actions_text(env)}\n({env.actions_left} left) > ", nl=False)
        line = sys.stdin.readline()
        if not line or line.strip() == ":q":
            typer.echo("\nquit")
            break
        obs, reward, terminated, truncated, info = _run_user_code(env.step, line.rstrip("\n"))
        total += reward
        flag = "" if info["action_is_valid"] else "  [invalid action]"
        typer.echo(f"\n{obs}\nreward {reward:g} (total {total:g}){flag}")
        if terminated or truncated:
            end = "terminated" if terminated else "truncated (action budget used)"
            typer.echo(f"episode {end}; success: {info['success']}; total reward {total:g}")
            break
