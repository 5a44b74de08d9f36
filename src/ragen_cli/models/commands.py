"""`ragen models` and `ragen doctor` (light: stdlib and typer at import)."""

from __future__ import annotations

import os
from typing import Optional

import typer

from ragen_cli.say import say

def models(
    convert: Optional[str] = typer.Option(None, "--convert", metavar="NAME", help="Convert this built-in into the cache now."),
    dtype: str = typer.Option("float32", "--dtype", help="dtype for --convert: float32/fp32, bfloat16/bf16, float16/fp16."),
) -> None:
    """List the built-in models and what the model cache holds."""
    from ragen_cli.models import cache, status
    from ragen_cli.models.builtin import BUILTIN_MODELS, ModelError, resolve_model

    if convert is not None:
        try:
            path = resolve_model(convert, dtype) if convert in BUILTIN_MODELS else None
        except ModelError as exc:
            say("models", str(exc))
            raise typer.Exit(2) from None
        if path is None:
            say("models", f"{convert!r} is not a built-in model; built-ins: {', '.join(BUILTIN_MODELS)}")
            raise typer.Exit(2)
        typer.echo(f"converted: {path}")
    present = {(e.name, e.dtype): e for e in status.cached_models()}
    typer.echo(f"Built-in models (cache: {cache.models_dir()}):")
    for name, description in BUILTIN_MODELS.items():
        typer.echo(f"\n  {name}\n    {description}")
        states = [f"{e.dtype} {e.size / 1e6:.0f} MB" + (" (damaged)" if e.problems else "")
                  for (n, _), e in present.items() if n == name]
        typer.echo(f"    cached: {', '.join(states) if states else 'not converted yet (converted on first use)'}")
    typer.echo("\nA spec's `model.name` may also be a local Hugging Face model directory.")


def doctor() -> None:
    """Check the installed environment (torch, vLLM, DeepSpeed, built-in model, cache, disk,
    memory) and print the fix for each problem found. Exit code 1 if a required check fails."""
    from ragen_cli.models.doctor import report
    from ragen_cli.models.status import run_doctor

    typer.echo("ragen doctor: checking the environment (imports torch, vLLM and DeepSpeed in subprocesses)...")
    lines, code = report(run_doctor(dict(os.environ)))
    for line in lines:
        typer.echo(line)
    raise typer.Exit(code)
