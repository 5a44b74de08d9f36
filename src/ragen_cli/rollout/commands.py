"""`ragen inspect`: the mask audit view of saved trajectories (light imports at module level)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ragen_cli.say import say


def inspect(
    file: Path = typer.Argument(..., help="A trajectories JSONL file (RUN/trajectories/step-K.jsonl) or a run directory."),
    step: Optional[int] = typer.Option(None, "--step", min=0, help="With a run directory: the step to show (default: the latest)."),
    index: Optional[int] = typer.Option(None, "--index", min=0, help="Show only the trajectory at this position in the file."),
    model: Optional[str] = typer.Option(None, "--model", help="Tokenizer to decode token ids (default: the run's spec.yaml model)."),
    text_only: bool = typer.Option(False, "--text", help="Show the turns' text, without decoding token ids."),
) -> None:
    """Render saved trajectories with the trained tokens (loss mask 1) in bold green and
    everything the model did not generate (prompt, observations, rewards, template) dimmed."""
    from rich.console import Console

    from ragen_cli.rollout import render

    try:
        path = render.find_trajectory_file(file, step)
        records = render.read_records(path)
    except (FileNotFoundError, ValueError) as err:
        say("inspect", str(err))
        raise typer.Exit(2) from None
    if index is not None:
        if index >= len(records):
            say("inspect", f"--index {index} but {path} has {len(records)} trajectories")
            raise typer.Exit(2)
        records = [records[index]]
    tokenizer = None
    name = model or render.model_from_run(path)
    if not text_only and name and any("input_ids" in r for r in records):
        try:
            tokenizer = render.load_tokenizer_for(name)
        except Exception as err:  # noqa: BLE001 - any failure: fall back to the text view
            say("inspect", f"cannot load tokenizer of {name!r} ({err}); showing text")
    console = Console(highlight=False)
    console.print(f"[bold]{path}[/bold]: {len(records)} trajectories")
    for rec in records:
        console.rule()
        console.print(render.render_trajectory(rec, tokenizer))
