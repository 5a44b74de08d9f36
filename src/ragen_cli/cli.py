"""The `ragen` command line. Each command lives in its package's light `commands` module;
heavy imports (torch, vllm, deepspeed) happen inside the command functions only."""

from __future__ import annotations

import sys
import traceback

import typer

from ragen_cli import __version__
from ragen_cli.help_style import style_help
from ragen_cli.process_exit import end_process
from ragen_cli.compile import commands as compile_cmd
from ragen_cli.envs import commands as envs_cmd
from ragen_cli.eval import commands as eval_cmd
from ragen_cli.models import commands as models_cmd
from ragen_cli.monitor import commands as monitor_cmd
from ragen_cli.publish import commands as publish_cmd
from ragen_cli.rollout import commands as rollout_cmd
from ragen_cli.spec import commands as spec_cmd
from ragen_cli.train import commands as train_cmd
from ragen_cli.tui import commands as tui_cmd

app = typer.Typer(
    name="ragen",
    help="Train LLM agents with multi-turn RL (StarPO / StarPO-S) from one YAML spec.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ragen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Train LLM agents with multi-turn RL (StarPO / StarPO-S) from one YAML spec."""


app.command("init")(spec_cmd.init)
app.command("validate")(compile_cmd.validate)
app.command("train")(train_cmd.train)
app.command("export")(publish_cmd.export)
app.command("eval")(eval_cmd.eval_command)
app.command("watch")(tui_cmd.watch)
app.command("health")(monitor_cmd.health)
app.command("inspect")(rollout_cmd.inspect)
app.command("models")(models_cmd.models)
app.command("doctor")(models_cmd.doctor)
app.add_typer(envs_cmd.app, name="envs")
style_help(app)  # --help in click's conventions, for every command (help_style.py)


def main() -> None:
    """The `ragen` entry point. When the command is done (its files written, its engines
    closed), the process ends without interpreter teardown: with vLLM's and torch's native
    threads still alive, teardown aborted finished runs ("terminate called without an active
    exception", exit 134) although every step had trained; a scheduler reads 134 as a failed
    job. The exit code is the command's own."""
    code = 1
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # a bug: show it as Python would, then end as Python would (1)
        traceback.print_exc()
    finally:
        end_process(code)


def exit_code(code: object) -> int:
    """SystemExit.code as a process exit code (None: 0; a message: printed, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
