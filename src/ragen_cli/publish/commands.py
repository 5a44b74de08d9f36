"""`ragen export` (light imports only; torch loads inside): a checkpoint as a full model
directory with its model card, and `--push-to-hub`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ragen_cli.say import say

from ragen_cli.train.commands import RUN_FAILED


def export(
    checkpoint: Path = typer.Argument(..., help="A checkpoint directory (RUN_DIR/checkpoints/step-K)."),
    out: Path = typer.Argument(..., help="Where to write the full model directory (must not exist or be empty)."),
    push_to_hub: Optional[str] = typer.Option(None, "--push-to-hub", metavar="REPO",
                                              help="Then upload OUT to this Hugging Face model repo (org/name; created if missing)."),
    private: bool = typer.Option(False, "--private", help="With --push-to-hub: create the repo private."),
) -> None:
    """Write a full Hugging Face model directory from a checkpoint (LoRA adapters merged) with a
    model card README.md (spec, algorithm, steps, eval table); --push-to-hub uploads it."""
    from ragen_cli.publish.export import export as export_ckpt
    from ragen_cli.publish.hub import HubError, check_push, push
    from ragen_cli.train.checkpoint import CheckpointError

    try:
        if private and push_to_hub is None:
            raise HubError("--private applies to the repo --push-to-hub creates: give --push-to-hub REPO too")
        if push_to_hub is not None:
            check_push(push_to_hub, out)  # before anything is written
        path = export_ckpt(checkpoint, out, push_to_hub)
    except (FileNotFoundError, FileExistsError, CheckpointError, HubError) as exc:
        say("export", str(exc))
        raise typer.Exit(2) from None
    typer.echo(f"ragen: exported {checkpoint} to {path} (model card: {path / 'README.md'})")
    if push_to_hub is not None:
        try:
            url = push(path, push_to_hub, private, checkpoint)
        except HubError as exc:
            say("export", str(exc))
            raise typer.Exit(RUN_FAILED) from None
        typer.echo(f"ragen: pushed {path} to {url}")
