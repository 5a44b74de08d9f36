"""`ragen eval`: a checkpoint, a base model or an endpoint on any env, with a reproducible report.

Light at import (typer only); the runner, torch and the backends load inside the command.
Exit codes: 0 done, 2 bad input (missing / half-written / foreign checkpoint, unknown model or
env, bad spec, unreachable endpoint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def _fail(message: str) -> None:
    from ragen_cli.say import fail

    fail("eval", message)


def eval_command(
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="RUN_DIR/checkpoints/step-N (full weights or a LoRA adapter on its base model)."),
    model: Optional[str] = typer.Option(None, "--model", help="A built-in model, a local HF directory; with --checkpoint: the base model it must belong to; with --endpoint: the served model name."),
    spec: Optional[Path] = typer.Option(None, "--spec", help="Use this run spec's validation settings (envs, episodes, seed, temperature) and rollout format."),
    env: list[str] = typer.Option([], "--env", help="Env to evaluate on (repeatable); default: the spec's validation envs."),
    episodes: Optional[int] = typer.Option(None, "--episodes", min=1, help="Seeds per env (default: the spec's val.episodes, 64)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="First seed (default: the spec's val.seed, 123)."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, help="Sampling temperature (default: the spec's val.temperature, 0.5)."),
    greedy: bool = typer.Option(False, "--greedy", help="Greedy decoding (temperature 0)."),
    samples: int = typer.Option(1, "--samples", min=1, help="Episodes per seed; > 1 reports pass@k."),
    max_turns: Optional[int] = typer.Option(None, "--max-turns", min=1, help="Most model turns per episode (default: the spec's rollout.max_turns, 5)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Most tokens generated per turn (default: the spec's rollout.max_tokens_per_turn, 128)."),
    backend: Optional[str] = typer.Option(None, "--backend", metavar="[vllm|hf|auto]", help="vllm, hf or auto (default: the spec's rollout.backend)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output directory for eval.json and trajectories (default: RUN_DIR/evals/... or evals/...)."),
    compare: Optional[tuple[str, str]] = typer.Option(None, "--compare", metavar="A B", help="Two checkpoints or models, A B, on the same seeds."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="OpenAI-compatible server URL used as the policy (with --model NAME)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="With --endpoint: local model whose tokenizer builds the prompts (default: --model)."),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Show the engines' logs (vLLM, progress bars, library warnings) here; "
                                      "without it vLLM's go to OUT/engine.log."),
) -> None:
    """Evaluate a checkpoint, a model or an endpoint on envs with fixed seeds; print a table per
    env (success with 95% CI, reward, turns, action ratios, pass@k) and write eval.json."""
    if backend is not None and backend not in ("vllm", "hf", "auto"):
        _fail(f"--backend must be vllm, hf or auto, not {backend!r}")
    sources = [s for s in (checkpoint is not None, compare is not None, endpoint is not None) if s]
    if len(sources) > 1:
        _fail("give only one of --checkpoint, --compare, --endpoint")
    if not sources and model is None and spec is None:
        _fail("nothing to evaluate: give --checkpoint, --model, --spec, --compare or --endpoint")
    if compare is not None and model is not None:
        _fail("with --compare, name both models or checkpoints in --compare A B (not --model)")
    if endpoint is not None and model is None:
        _fail("--endpoint needs --model NAME (the model name the server serves)")
    from ragen_cli.quiet import early_quiet, env_restored

    with env_restored():  # the quiet settings last as long as the command (a test runs it in-process)
        if not verbose:
            early_quiet()
        from ragen_cli.eval.cli_run import EvalOptions, run_eval

        opts = EvalOptions(
            checkpoint=checkpoint, model=model, spec=spec, envs=list(env), episodes=episodes, seed=seed,
            temperature=temperature, greedy=greedy, samples=samples, max_turns=max_turns, max_tokens=max_tokens,
            backend=backend, out=out, compare=compare, endpoint=endpoint, tokenizer=tokenizer, quiet=not verbose,
        )
        try:
            run_eval(opts)
        except _input_errors() as err:
            _fail(str(err))


def _input_errors() -> tuple[type[BaseException], ...]:
    from ragen_cli.eval.checkpoint import EvalInputError
    from ragen_cli.eval.endpoint import EndpointError
    from ragen_cli.spec.errors import SpecError

    return (EvalInputError, EndpointError, SpecError)
