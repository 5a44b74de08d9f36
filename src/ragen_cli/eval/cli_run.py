"""What `ragen eval` does once its options are parsed: resolve the spec and the policies, run,
print the tables, write eval.json and the trajectories."""

from __future__ import annotations

import datetime as _dt
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ragen_cli.eval.checkpoint import EvalInputError, Policy, load_checkpoint, looks_like_checkpoint, model_policy
from ragen_cli.eval.report import compare_table, summary_table
from ragen_cli.eval.runner import build_plan, compare_results, run_policy, write_outputs


@dataclass(frozen=True)
class EvalOptions:
    checkpoint: Path | None = None
    model: str | None = None
    spec: Path | None = None
    envs: list[str] | None = None
    episodes: int | None = None
    seed: int | None = None
    temperature: float | None = None
    greedy: bool = False
    samples: int = 1
    max_turns: int | None = None
    max_tokens: int | None = None
    backend: str | None = None
    out: Path | None = None
    compare: tuple[str, str] | None = None
    endpoint: str | None = None
    tokenizer: str | None = None
    quiet: bool = False  # vLLM's logs to OUT/engine.log (ragen_cli.quiet), bars and library warnings off


def run_dir_of(checkpoint: Path) -> Path | None:
    """RUN_DIR for RUN_DIR/checkpoints/step-N, else None."""
    parent = checkpoint.expanduser().resolve().parent
    return parent.parent if parent.name == "checkpoints" else None


def resolve_ref(ref: str, base: str | None = None) -> Policy:
    """A checkpoint directory (step-N, or one holding state.json) or a model reference."""
    path = Path(ref).expanduser()
    if looks_like_checkpoint(path):
        return load_checkpoint(path, base)
    return model_policy(ref)


def endpoint_policy(url: str, served: str, tokenizer: str | None) -> Policy:
    from ragen_cli.models.builtin import ModelError, resolve_model

    try:
        tok = resolve_model(tokenizer or served)
    except ModelError as err:
        raise EvalInputError(f"--endpoint: no local tokenizer for {tokenizer or served!r} ({err}); "
                             "pass --tokenizer with a local model of the same tokenizer") from None
    return Policy(label=f"{served} @ {url}", kind="endpoint", tokenizer_dir=tok, endpoint=url,
                  extra={"served_model": served, "tokenizer_dir": str(tok)})


def _load_spec(opts: EvalOptions):
    from ragen_cli.spec.loader import load_spec

    if opts.spec is not None:
        return load_spec(opts.spec)
    refs = [opts.checkpoint] if opts.checkpoint is not None else []
    refs += [Path(r) for r in (opts.compare or ()) if looks_like_checkpoint(Path(r).expanduser())]
    for ref in refs:
        run_dir = run_dir_of(ref)
        if run_dir is not None and (run_dir / "spec.yaml").is_file():
            return load_spec(run_dir / "spec.yaml")
    return None


def _policies(opts: EvalOptions, spec) -> list[Policy]:
    if opts.compare is not None:
        return [resolve_ref(opts.compare[0]), resolve_ref(opts.compare[1])]
    if opts.endpoint is not None:
        return [endpoint_policy(opts.endpoint, opts.model, opts.tokenizer)]
    if opts.checkpoint is not None:
        return [load_checkpoint(opts.checkpoint, opts.model)]
    return [model_policy(opts.model or spec.model.name)]


def _out_dir(opts: EvalOptions, policies: list[Policy]) -> Path:

    if opts.out is not None:
        return opts.out
    first = policies[0]
    if len(policies) == 1 and first.checkpoint is not None:
        return default_out(first.label, run_dir_of(first.checkpoint), first.step)
    label = "compare" if len(policies) > 1 else first.extra.get("served_model", first.label)
    return default_out(label, None, None)


def run_eval(opts: EvalOptions, console: Console | None = None) -> Path:
    """Run the eval described by `opts`; returns the path of eval.json."""
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    errors = Console(stderr=True, soft_wrap=True)
    spec = _load_spec(opts)
    plan = build_plan(spec, envs=opts.envs or [], episodes=opts.episodes, seed=opts.seed,
                      temperature=opts.temperature, greedy=opts.greedy, samples=opts.samples,
                      max_turns=opts.max_turns, max_tokens=opts.max_tokens,
                      backend=opts.backend)
    policies = _policies(opts, spec)
    out = _out_dir(opts, policies)

    def log(message: str) -> None:
        errors.print(f"[dim]ragen eval: {escape(message)}[/dim]", highlight=False)  # a path may hold [brackets]

    if opts.quiet and plan.backend != "hf" and any(p.kind != "endpoint" for p in policies):
        from ragen_cli.quiet import go_quiet

        log(f"engine logs in {go_quiet(out)} (--verbose shows them here)")

    results = {}
    for key, policy in zip(("A", "B") if len(policies) > 1 else ("policy",), policies):
        results[key] = run_policy(policy, plan, log)
        res = results[key]
        title = f"{'[' + key + '] ' if len(policies) > 1 else ''}{policy.label}  ({_describe_sampling(plan)})"
        title += "  INCOMPLETE: the endpoint failed, see below" if res.error else ""
        console.print(summary_table(res.summaries, title))
    comparison = None
    if len(policies) > 1:
        comparison = compare_results(results["A"], results["B"])
        console.print(compare_table(comparison, policies[0].label, policies[1].label))
    path = write_outputs(out, plan, results, comparison)
    console.print(f"wrote {path}", highlight=False)
    for res in results.values():
        if res.error is not None:  # after the report is written: the episodes played are kept
            from ragen_cli.eval.endpoint import EndpointError

            planned = res.planned * len(plan.envs)
            raise EndpointError(f"{res.policy.label}: stopped early at {res.error}; the {res.played} of {planned} "
                                f"episodes played before it are in {path}")
    return path


def _describe_sampling(plan) -> str:
    how = "greedy" if plan.rollout.temperature <= 0 else f"T={plan.rollout.temperature:g}"
    seeds = f"seeds {plan.seeds[0]}..{plan.seeds[-1]}"
    return f"{how}, {seeds}, {plan.samples} sample(s)/seed, max {plan.rollout.max_turns} turns"


def default_out(label: str, run_dir: Path | None, step: int | None) -> Path:
    """RUN_DIR/evals/step-N-<utc> for a checkpoint, else evals/<label>-<utc>."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    if run_dir is not None:
        return run_dir / "evals" / f"step-{step}-{stamp}"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(label).name or label).strip("_") or "model"
    return Path("evals") / f"{safe}-{stamp}"
