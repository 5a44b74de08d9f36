"""`ragen train` (light imports only; torch and DeepSpeed load inside).

`ragen train SPEC` validates and compiles the spec, creates the run directory (resolved
spec.yaml, plan.json) and runs the job: in this process for one process, through the Plan's
launch command (the `deepspeed` launcher running `ragen_cli.train.worker`) for several.
`ragen train --resume RUN_DIR` continues a run from its newest checkpoint. On several nodes each
node runs the same command with its `--node-rank R` (docs/training.md "Several nodes"): node 0
creates the run directory, the others wait to see it (`train.job.join_run`) and start their ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

RUN_FAILED = 1


def train(
    spec: Optional[Path] = typer.Argument(None, help="The run spec (YAML). Not needed with --resume.", show_default=False),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the compiled plan (sizes, DeepSpeed config, launch) and exit."),
    json_: bool = typer.Option(False, "--json", help="With --dry-run: print the plan as JSON."),
    set_: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a value: --set train.steps=10 (repeatable)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the run in RUN_DIR from its newest checkpoint.",
                                          metavar="RUN_DIR"),
    warm_start_only: bool = typer.Option(False, "--warm-start-only",
                                         help="Run the spec's warm start and stop before RL (its checkpoint is "
                                              "RUN_DIR/warm_start/checkpoints/step-K; --resume RUN_DIR goes on to RL)."),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Show the engines' logs (vLLM, progress bars, library warnings) here; "
                                      "without it they go to RUN_DIR/engine.log."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Do not run the spec's own code (env, reward functions) "
                                                            "once on a sample before starting."),
    node_rank: Optional[int] = typer.Option(None, "--node-rank", metavar="R",
                                            help="On a run of several nodes: this node's place, 0 on the hostfile's "
                                                 "first host. Run the same command on every node, each with its R; "
                                                 "each starts its own ranks (no ssh). Without it the first host "
                                                 "starts every node through ssh."),
) -> None:
    """Train a policy with StarPO / StarPO-S as the spec says; Ctrl-C saves a checkpoint and exits."""
    from ragen_cli.quiet import env_restored

    with env_restored():  # the quiet settings last as long as the command (a test runs it in-process)
        _train(spec, dry_run, json_, set_, resume, verbose, warm_start_only, probe=not no_probe, node_rank=node_rank)


def _train(spec: Optional[Path], dry_run: bool, json_: bool, set_: List[str], resume: Optional[Path],
           verbose: bool, warm_start_only: bool = False, probe: bool = True, node_rank: Optional[int] = None) -> None:
    from ragen_cli.compile.launch import node_rank_problem
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.commands import load_or_exit

    if not verbose and not dry_run:
        from ragen_cli.quiet import early_quiet

        early_quiet()

    if resume is None and spec is None:
        typer.echo("ragen train: give a SPEC file, or --resume RUN_DIR.", err=True)
        raise typer.Exit(2)
    if resume is not None and spec is not None:
        typer.echo("ragen train: give either SPEC or --resume RUN_DIR, not both (use --set to change values).", err=True)
        raise typer.Exit(2)
    if json_ and not dry_run:
        typer.echo("ragen train: --json prints the plan and needs --dry-run (nothing was started).", err=True)
        raise typer.Exit(2)
    source = spec if resume is None else _resume_spec(resume)
    loaded = load_or_exit(source, set_, probe=probe and resume is None, command="train")
    if warm_start_only and loaded.spec.warm_start is None:
        typer.echo("ragen train: --warm-start-only, but the spec has no warm_start section.", err=True)
        raise typer.Exit(2)
    problem = node_rank_problem(loaded.spec, node_rank)
    if problem:
        typer.echo(f"ragen train: {problem}", err=True)
        raise typer.Exit(2)
    if dry_run:
        _print_plan(loaded, compile_plan(loaded.spec, node_rank=node_rank), json_)
        return
    _model_or_exit(loaded.spec.model.name)  # first: the Plan's template check reads the model's tokenizer
    plan = compile_plan(loaded.spec, node_rank=node_rank)
    run_dir = resume if resume is not None else Path(plan.run_dir)
    if node_rank:  # not node 0: node 0 locks and writes the run directory, this node waits to see it
        _join_or_exit(run_dir, loaded.spec, resume is not None, node_rank)
        lock = None
    else:
        lock = _lock_or_exit(run_dir)  # held until this process ends: one writer per run directory
    try:
        if lock is not None:
            _prepare_run_dir(run_dir, loaded.spec, plan, resume is not None)
        typer.echo(f"ragen: run directory {run_dir}  (watch it: ragen watch {run_dir})", err=True)
        if not verbose:
            from ragen_cli.quiet import go_quiet

            log = go_quiet(run_dir)
            typer.echo(f"ragen: engine logs in {log} (--verbose shows them here)", err=True)
        code = _run(loaded.spec, plan, run_dir, resume is not None, quiet=not verbose, warm_start_only=warm_start_only)
    finally:
        if lock is not None:
            lock.release()
    if code:
        raise typer.Exit(code)


def _model_or_exit(name: str) -> None:
    """Resolve the model before anything starts (a built-in is converted once, a hub id fetched
    unless HF_HUB_OFFLINE is set); a reference that cannot be resolved is exit 2, no run dir."""
    from ragen_cli.models.builtin import ModelError, resolve_model

    try:
        resolve_model(name)
    except ModelError as err:
        typer.echo(f"ragen train: {err}", err=True)
        raise typer.Exit(2) from None


def _resume_spec(run_dir: Path) -> Path:
    """The run's spec.yaml, after checking that its newest checkpoint (if any) is whole."""
    from ragen_cli.monitor.rundir import RunDir
    from ragen_cli.train.checkpoint import CheckpointError, check_checkpoint, latest_checkpoint

    source = run_dir / "spec.yaml"
    if not source.is_file():
        typer.echo(f"ragen train: cannot resume {run_dir}: no spec.yaml there (is it a run directory?).", err=True)
        raise typer.Exit(2)
    latest = latest_checkpoint(RunDir(run_dir).checkpoints_dir)
    try:
        if latest is not None:
            check_checkpoint(latest)
    except CheckpointError as exc:
        typer.echo(f"ragen train: cannot resume {run_dir}: {exc}", err=True)
        raise typer.Exit(2) from None
    return source


def _print_plan(loaded, plan, as_json: bool) -> None:
    """The Plan (JSON on stdout, or tables), the warnings of `ragen validate` (values ragen
    changes, settings the spec wrote without effect: `compile.commands`), on stderr beside JSON,
    after the tables otherwise; the preset's settings without effect appear in the table only."""
    from dataclasses import replace

    from ragen_cli.compile.commands import spec_warnings, user_inert

    warnings = spec_warnings(loaded.spec)
    mine, preset = user_inert(loaded, plan)
    if as_json:
        typer.echo(plan.to_json())
        for line in [*warnings, *(item.warning() for item in mine)]:
            typer.echo(line, err=True)
        return
    from ragen_cli.compile.render import print_plan

    name = loaded.spec.algorithm.preset
    print_plan(plan, loaded.provenance, inert=[*mine, *(replace(i, field=f"{i.field} (preset {name})") for i in preset)],
               spec=loaded.spec)
    for line in warnings:
        typer.echo(line)


def _lock_or_exit(run_dir: Path):
    """The run directory's writer lock; another live run holding it is exit 2 (its pid named)."""
    from ragen_cli.monitor.rundir import RunDirError, lock_run_dir

    try:
        lock = lock_run_dir(run_dir)
    except RunDirError as exc:
        typer.echo(f"ragen train: {exc}", err=True)
        raise typer.Exit(2) from None
    if lock.note:
        typer.echo(f"ragen train: warning: {lock.note}", err=True)
    return lock


def _join_or_exit(run_dir: Path, spec, resume: bool, node_rank: int) -> None:
    """Wait for node 0's spec.yaml and plan.json in the run directory (`train.job.join_run`); exit 2
    naming why this node cannot join."""
    from ragen_cli.train.job import JoinFailed, join_run
    from ragen_cli.train.runtime_light import spec_yaml

    typer.echo(f"ragen: node {node_rank} waits for node 0 to prepare {run_dir}", err=True)
    try:
        join_run(run_dir, spec_yaml(spec), resume, node_rank)
    except JoinFailed as exc:
        typer.echo(f"ragen train: {exc}", err=True)
        raise typer.Exit(2) from None


def _prepare_run_dir(run_dir: Path, spec, plan, resume: bool) -> None:
    from ragen_cli.monitor.rundir import RunDir, RunDirError
    from ragen_cli.train.runtime_light import spec_yaml

    try:
        RunDir(run_dir).create(spec_yaml(spec), plan.to_json(), resume=resume)
    except RunDirError as exc:
        typer.echo(f"ragen train: {exc}", err=True)
        raise typer.Exit(RUN_FAILED) from None


def _run(spec, plan, run_dir: Path, resume: bool, quiet: bool, warm_start_only: bool = False) -> int:
    """Run the job (`train.job.run_job`: in this process, or the launched workers); returns
    the exit code."""
    from ragen_cli.train.job import RunFailed, run_job
    from ragen_cli.train.checkpoint import CheckpointError

    try:
        run_job(spec, plan, run_dir, resume, quiet, warm_start_only)
    except RunFailed as exc:  # the launcher's code: the ranks printed why
        return exc.code
    except KeyboardInterrupt:
        typer.echo(f"ragen: aborted; {_last_saved(run_dir)}", err=True)
        return 130
    except CheckpointError as exc:  # a checkpoint DeepSpeed or torch could not read
        typer.echo(f"ragen train: {exc}", err=True)
        return 2
    except Exception as exc:  # the traceback is in events.jsonl (kind "error")
        typer.echo(f"ragen train: {type(exc).__name__}: {exc}  (traceback in {run_dir}/events.jsonl)", err=True)
        return RUN_FAILED
    return 0


def _last_saved(run_dir: Path) -> str:
    """What an aborted run kept: its newest complete checkpoint (the unfinished step never has one)."""
    from ragen_cli.train.checkpoint import latest_checkpoint

    latest = latest_checkpoint(run_dir / "checkpoints")
    if latest is None:
        return "no checkpoint was saved."
    return f"the newest checkpoint is {latest} (resume with: ragen train --resume {run_dir})."
