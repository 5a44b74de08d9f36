"""What a running job holds (`Run`), how it starts (`setup`), and the small actions the loop
takes between steps: logging, validation, health decisions, checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragen_cli.monitor.health import assess
from ragen_cli.monitor.tracker import HealthTracker
from ragen_cli.monitor.intervene import Decision, InterventionState, decide
from ragen_cli.monitor.rundir import RunDir
from ragen_cli.train.sinks import open_sinks
from ragen_cli.train import checkpoint as ckpt
from ragen_cli.train.ahead import AHEAD_FILE, RunAhead, ahead_to_json, read_ahead
from ragen_cli.train.progress import StepProgress
from ragen_cli.train.runtime_light import spec_yaml


@dataclass
class RunState:
    """Everything besides weights and optimizer that a checkpoint must carry to resume exactly."""

    step: int = 0  # last finished step
    cursor: int = 0  # next training seed
    keep_ratio: float = 0.25
    lr_scale: float = 1.0
    interventions: int = 0
    empty_steps: int = 0  # consecutive steps in which the filter kept no group
    last_intervention_step: int | None = None
    best_step: int | None = None  # the step with the best `checkpoint.keep_best` value so far
    best_value: float | None = None
    warm_done: bool = False  # the spec's warm start is finished (train/warm_start.py)
    version: int = 0  # changes of the engine's weights: each step's sync, each rollback (train/ahead.py)
    rollback_version: int = 0  # the version the last rollback made: a batch drawn before it is stale
    history: list[dict] = field(default_factory=list)  # metric records (for the health detector)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Run:
    spec: Any
    plan: Any
    rundir: RunDir
    model_dir: Path
    engines: Any
    backend: Any
    tokenizer: Any
    rank: int
    world: int
    state: RunState
    sync: Any  # train.sync.WeightSync: the rollout engine's copy of the weights, sleep/wake, parity probe
    tracker: HealthTracker = field(default_factory=HealthTracker)
    sinks: list = field(default_factory=list)  # TensorBoard / W&B (train/sinks.py); rank 0 only
    ahead: RunAhead = field(default_factory=RunAhead)  # the batch rolled out during the update (train/ahead.py)

    def say(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def event(self, kind: str, step: int, **data) -> None:
        if self.rank == 0:
            self.rundir.write_event(kind, step, **data)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        record = {k: float(v) for k, v in metrics.items() if v is not None}
        self.state.history.append({"step": step, **record})
        if self.rank == 0:
            self.rundir.write_metrics(step, record)
            for sink in self.sinks:
                sink.log(step, record)

    def save_checkpoint(self) -> Path:
        step = self.state.step
        ahead = self.ahead.pending  # joined: a step ends with the engine free
        files = {AHEAD_FILE.format(rank=self.rank): ahead_to_json(ahead)} \
            if ahead is not None and ahead.error is None and ahead.trajs is not None else {}
        path = ckpt.save(self.rundir.checkpoints_dir, step, self.engines, self.state.to_dict(), self.model_dir,
                         self.spec.checkpoint.keep, self.rank, files)
        if self.rank == 0 and self.state.best_step == step:
            ckpt.mark_best(self.rundir.checkpoints_dir, step)
        self.tracker.note_checkpoint(step)
        self.event("checkpoint", step, path=str(path), checksum=self.checksum())
        return path

    def checksum(self) -> float:
        """Checksum of this process's trainable actor parameters (step_metrics.rank_checksums)."""
        from ragen_cli.train.step_metrics import rank_checksums

        return rank_checksums(self)[self.rank]

    def progress(self) -> StepProgress:
        return StepProgress(self.spec.train.steps, self.state.step, enabled=self.rank == 0)


def setup(spec, plan, run_dir: Path, resume: bool) -> Run:
    """Distributed init, run directory, engines, rollout backend; restore a checkpoint on resume."""
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.backend import make_backend
    from ragen_cli.train.engine import build_engines, init_distributed
    from ragen_cli.train.sync import WeightSync

    rank, world = init_distributed(plan.env)
    rundir = RunDir(run_dir)
    if rank == 0 and not rundir.spec_path.exists():
        rundir.create(spec_yaml(spec), plan.to_json(), resume=False)
    model_dir = Path(resolve_model(spec.model.name))
    tokenizer = load_tokenizer(model_dir, spec.model)  # with model.chat_template / chat_template_kwargs
    check_template(spec, plan, tokenizer)
    engines = build_engines(spec, plan, model_dir, world)
    state = RunState(cursor=spec.env.train.seed, keep_ratio=spec.algorithm.filter.keep_ratio)
    policy = engines.actor.module
    backend = make_backend(spec.rollout.backend, model_dir, spec, policy=policy, engine_args=plan.vllm,
                           weight_sync=plan.weight_sync)
    if spec.rollout.max_staleness > 0 and backend.name != "vllm":
        raise RuntimeError(f"rollout.max_staleness {spec.rollout.max_staleness} needs the vLLM engine, but the run "
                           f"got the {backend.name} backend (rollout.backend {spec.rollout.backend}: vLLM did not "
                           "start); the HF backend samples with the module the update changes")
    run = Run(spec, plan, rundir, model_dir, engines, backend, tokenizer, rank, world, state,
              WeightSync.for_run(spec, plan, engines.actor, backend, rank, world))
    if resume:
        _restore(run)
    if rank == 0:
        run.sinks = open_sinks(spec.monitor.loggers, rundir.path, spec.name, spec.model_dump(mode="json"))
    run.event("start", run.state.step, resume=resume, world_size=world, backend=backend.name,
              model_dir=str(model_dir))
    return run


def check_template(spec, plan, tokenizer) -> None:
    """Stop (`compile.plan.PlanMismatch`) unless the loaded chat template trains the way the Plan says."""
    from ragen_cli.compile.plan import check_runs_as_planned, update_turn_rows
    from ragen_cli.compile.template import check_tokenizer

    found = check_tokenizer(spec, tokenizer)
    check_runs_as_planned(plan, plan.sizes.world_size, update_turn_rows(spec, found.stable))


def _restore(run: Run) -> None:
    from ragen_cli.train.sync import push_weights

    latest = ckpt.latest_checkpoint(run.rundir.checkpoints_dir)
    if latest is None:  # stopped (or killed) before its first checkpoint: nothing to keep
        run.say(f"ragen: {run.rundir.checkpoints_dir} holds no complete checkpoint yet: starting from step 0")
        return
    saved = ckpt.load(latest, run.engines)
    fields = RunState().__dict__.keys()
    run.state = RunState(**{k: v for k, v in saved.items() if k in fields})
    run.ahead.pending = restored_ahead(run, latest)  # the batch rolled out during the last update, if any
    push_weights(run, f"resume-{run.state.step}")  # the same weights again: not a new version
    run.say(f"ragen: resumed from {latest} (step {run.state.step})")


def restored_ahead(run: Run, latest: Path):
    """The batch a checkpoint holds for this process, when the run overlaps rollouts and every
    process has its share (a checkpoint from another world size, or one rank's rollout that
    failed, leaves the batch to be rolled out again)."""
    ahead = read_ahead(latest, run.rank) if run.spec.rollout.max_staleness > 0 else None
    if (latest / AHEAD_FILE.format(rank=run.world)).exists():  # saved by more processes than run now
        ahead = None
    if run.world > 1:
        import torch

        have = torch.tensor([1 if ahead is not None else 0])
        torch.distributed.all_reduce(have, op=torch.distributed.ReduceOp.MIN)
        if not int(have):
            ahead = None
    return ahead


def best_metric(spec) -> str | None:
    """The metric `checkpoint.keep_best` names (auto: the first validation env's success), or None."""
    from ragen_cli.monitor.metrics import env_metric

    name = spec.checkpoint.keep_best
    if name != "auto":
        return name
    envs = spec.env.val.envs
    return env_metric("val/<env>/success", envs[0].name if envs else spec.env.train.name)


def new_best(run: Run, step: int, metrics: dict[str, float]) -> bool:
    """Whether this step's validation beat every earlier one on `best_metric` (ties keep the
    earlier step); records it in the run state. Rank 0 measures; every rank gets its answer (all
    of them take part in the checkpoint it calls for)."""
    name = best_metric(run.spec)
    value = metrics.get(name) if name else None
    better = value is not None and (run.state.best_value is None or value > run.state.best_value)
    if run.world > 1:
        import torch

        box = [(better, value)]
        torch.distributed.broadcast_object_list(box, src=0)
        better, value = box[0]
    if better:
        run.state.best_step, run.state.best_value = step, float(value)
    return better


def teardown(run: Run) -> None:
    try:
        run.ahead.join()  # a batch still rolling out (an error mid-update) ends before the engine closes
    finally:  # a second Ctrl-C while it waits: close everything anyway
        run.sync.close()
        for sink in run.sinks:
            sink.close()
        close = getattr(run.backend, "close", None)
        if callable(close):
            close()


def log_validation(run: Run, step: int) -> dict[str, float]:
    """Validate on rank 0; its episodes go to val_trajectories/step-<k>.jsonl; at step 0 the
    metrics go to metrics.jsonl on their own line."""
    from ragen_cli.train.validate import run_validation

    if run.rank != 0:
        return {}
    metrics, trajs = run_validation(run.backend, run.tokenizer, run.spec)
    run.rundir.write_trajectories(step, [t.to_record(with_tokens=False) for t in trajs], validation=True)
    run.event("val", step, **metrics)
    if step == 0:
        run.rundir.write_metrics(0, metrics)
    return metrics


def health_decision(run: Run, step: int) -> Decision:
    """Echo Trap verdict over the metric history -> `health` event (on change) -> Decision."""
    cfg = run.spec.monitor.health
    verdict = assess(run.state.history, cfg) if run.rank == 0 else None
    if run.world > 1:  # rank 0 holds the run's metrics: one verdict for all, so ranks act alike
        import torch

        box = [verdict]
        torch.distributed.broadcast_object_list(box, src=0)
        verdict = box[0]
    payload = run.tracker.observe(verdict)
    if payload is not None:
        run.event("health", step, **payload)
        if verdict.reasons:
            run.say(f"ragen: health: {verdict.level} at step {step}: " + "; ".join(r.message for r in verdict.reasons))
    s = run.state
    keep = s.keep_ratio if run.spec.algorithm.filter.strategy == "top_k" else None  # others have no fraction
    decision = decide(verdict, cfg, InterventionState(step, keep, s.interventions, s.last_intervention_step,
                                                      tuple(run.tracker.healthy_checkpoints)))
    if decision.action != "continue":
        run.event("intervention", step, **decision.to_event())
        run.say(f"ragen: health: {decision.message}")
    return decision


def apply_decision(run: Run, decision: Decision) -> bool:
    """Carry out an intervention: stronger filtering, lower learning rates, rollback (`rollback`:
    the run goes back to the checkpoint, except the seed cursor, so it continues on fresh initial
    states). Returns whether it rolled back."""
    s = run.state
    step = s.step
    rolled_back = False
    if decision.rollback_to is not None:
        path = run.rundir.checkpoints_dir / f"step-{decision.rollback_to}"
        if path.is_dir():
            before = run.checksum()
            abandoned = rollback(run, path)
            run.event("rollback", step, to_step=s.step, path=str(path), checksum_before=before,
                      checksum=run.checksum(), removed=[p.name for p in abandoned])
            rolled_back = True
        else:
            run.event("rollback", step, to_step=decision.rollback_to, path=str(path), error="checkpoint not found")
    if decision.keep_ratio is not None:
        s.keep_ratio = decision.keep_ratio
    if decision.lr_scale is not None:
        s.lr_scale *= decision.lr_scale  # applied at every optimizer step (update.scaled_step)
    s.interventions += 1
    s.last_intervention_step = step
    return rolled_back


def rollback(run: Run, path: Path) -> list[Path]:
    """Go back to checkpoint `path` (weights, optimizer, step, metric history, best step) and make
    the engine serve its weights, a new version; delete the abandoned branch's checkpoints (the
    steps after it: `--resume` must not take them). A batch rolled out before is now stale
    (`RunState.rollback_version`, train/ahead.py). Returns the deleted checkpoints (rank 0's list)."""
    from ragen_cli.train.sync import push_weights

    s, root = run.state, run.rundir.checkpoints_dir
    saved = ckpt.load(path, run.engines)
    s.step, s.history = saved["step"], [r for r in s.history if r["step"] <= saved["step"]]
    s.best_step, s.best_value = saved.get("best_step"), saved.get("best_value")
    run.tracker.forget_after(s.step)
    abandoned = ckpt.abandon_after(root, s.step) if run.rank == 0 else []
    if run.rank == 0 and (root / ckpt.BEST).is_symlink():  # the best goes back with the rest
        if s.best_step is not None and (root / f"step-{s.best_step}").is_dir():
            ckpt.mark_best(root, s.best_step)
        else:
            ckpt.unmark_best(root)
    push_weights(run, f"rollback-{s.step}")
    s.version += 1  # other weights: a batch rolled out before the rollback is a version older
    s.rollback_version = s.version  # and drawn by weights the run abandoned (ahead.is_stale)
    return abandoned
