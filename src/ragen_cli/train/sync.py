"""The weight sync: `WeightSync`, the one object between the trainer's weights and the rollout
engine. It owns the Plan's `lora_sync` (full weights, the adapter, or the adapter merged), the
engine's sleep and wake around the update (`plan.vllm_sleep`), the push, the parity probe of
what the engine then serves (rollout/parity.py judges it; train/probe.py picks its sequences),
and the ledger that measures what reached the engine on the weights themselves.

The parity probe (rollout/parity.py) asks whether the engine's log-probs moved with the
trainer's; in bf16 an update's log-prob move is about the size of the kernels' noise, so it
cannot tell a kept update from a lost one. This module compares weights, exactly: at each sync,
the trainer's effective weight change since the last sync (what its forward computes with:
W + (alpha/r) B A with the adapter tensors it holds) against the change of the weights the
engine now serves, summed over every adapted layer:

    kept  = <engine change, trainer change> / |trainer change|^2     (1.0: all of it)
    error = |engine change - trainer change| / |trainer change|       (0.0: exact)

(`sync/update_kept`, `sync/update_error`; docs/metrics.md). A bf16 merge rounds every element
of an update below half a bf16 step of its weight back to the weight: kept ~0.5 and error ~1
on SmolLM2-135M's first updates (docs/experiments/bf16-sync.md), which is why
`rollout.vllm_args.engine_dtype` serves merged weights in fp32.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ragen_cli.train.batch import Batch, score
from ragen_cli.train.lora import MODEL_PREFIX, Factors, lora_delta, lora_layers, merged_weight
from ragen_cli.train.probe import probe_rows, probe_windows


@dataclass
class Fidelity:
    """Running sums over layers of <e, t>, <t, t> and |e - t|^2 (e: engine change, t: trainer
    change). Each layer's sums are taken in fp32 and added up in Python floats (fp64)."""

    dot: float = 0.0
    norm2: float = 0.0
    err2: float = 0.0

    def add(self, engine_change: torch.Tensor, trainer_change: torch.Tensor) -> None:
        e, t = engine_change.reshape(-1).float(), trainer_change.reshape(-1).float()
        diff = e - t
        self.dot += float(torch.dot(e, t))
        self.norm2 += float(torch.dot(t, t))
        self.err2 += float(torch.dot(diff, diff))

    def metrics(self) -> dict[str, float]:
        """`sync/update_kept` and `sync/update_error`; nothing when the trainer's weights did not
        move (there is no update to keep)."""
        if self.norm2 == 0.0:
            return {}
        return {"sync/update_kept": self.dot / self.norm2, "sync/update_error": (self.err2 / self.norm2) ** 0.5}


def _snapshot(layers: dict[str, Factors]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    return {name: (f.a.detach().clone(), f.b.detach().clone()) for name, f in layers.items()}


def _with(f: Factors, ab: tuple[torch.Tensor, torch.Tensor]) -> Factors:
    return Factors(f.base, ab[0], ab[1], f.scale, f.transpose)


class SyncLedger:
    """The adapter as the trainer held it at the last sync, and as the engine received it, so
    that the next sync's fidelity can be measured. `mode`: the Plan's `lora_sync` ("merged",
    "adapter") or None for full weights; `engine_dtype`: the engine's (Plan placement)."""

    def __init__(self, mode: str | None, engine_dtype: str):
        self.mode, self.dtype = mode, getattr(torch, engine_dtype)
        self.trainer: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None
        self.engine: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None
        self.last_engine: Any = None  # full weights: the last push as the engine read it back

    def start(self, module) -> None:
        """The engine serves the trainer's current weights (a fresh run: both hold the base
        model, B = 0; a resume or rollback: the sync that followed it)."""
        if self.mode is not None:
            self.trainer = _snapshot(lora_layers(module))
            self.engine = dict(self.trainer)

    def record(self, module, pushed: dict | None = None, adapter_dir: Path | None = None,
               engine: Any = None) -> dict[str, float]:
        """After a sync: the fidelity of the engine's change to the trainer's since the last one.
        `pushed`: what a merged sync handed the engine (`lora.merged_state_dict`; None: merged
        here again); `adapter_dir`: what an adapter sync wrote (the engine's A and B are read
        back from it); `engine`: the push as the engine's workers read it back from their own
        parameters (`weight_sums.EngineCheck`; None for an engine that cannot report it)."""
        if self.mode is None:
            # full weights: which of the parameters the update moved the engine holds at their new
            # values, read in the engine (rollout/weight_sums.py); nothing when nothing moved
            from ragen_cli.rollout.weight_sums import update_kept

            if engine is None:
                return {}
            out, self.last_engine = update_kept(self.last_engine, engine), engine
            return out
        layers = lora_layers(module)
        if self.trainer is None:
            self.start(module)
            return {}
        now = _snapshot(layers)
        served = _read_adapter(adapter_dir, layers) if self.mode == "adapter" else now
        fid = Fidelity()
        with torch.no_grad():
            for name, f in layers.items():
                trainer_change = lora_delta(f) - lora_delta(_with(f, self.trainer[name]))
                if self.mode == "merged":
                    key = name.removeprefix(MODEL_PREFIX) + ".weight"
                    new = pushed[key].to(self.dtype) if pushed is not None else merged_weight(f, self.dtype)
                    # both near W: their fp32 difference is exact (Sterbenz)
                    engine_change = new.float() - merged_weight(_with(f, self.engine[name]), self.dtype).float()
                else:  # the engine adds (alpha/r) B A of the tensors it loaded to W
                    engine_change = lora_delta(_with(f, served[name])) - lora_delta(_with(f, self.engine[name]))
                fid.add(engine_change, trainer_change)
        self.trainer, self.engine = now, served
        return fid.metrics()


def _read_adapter(adapter_dir: Path | None, layers: dict[str, Factors]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """A and B per layer as a PEFT adapter directory holds them (what vLLM's LoRARequest loads)."""
    from safetensors.torch import load_file

    if adapter_dir is None:
        raise ValueError("an adapter sync's fidelity needs the adapter directory it wrote")
    saved = load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))

    def ab(name: str) -> tuple[torch.Tensor, torch.Tensor]:
        if f"{name}.lora_A.weight" in saved:
            return saved[f"{name}.lora_A.weight"], saved[f"{name}.lora_B.weight"]
        return saved[f"{name}.lora_embedding_A"], saved[f"{name}.lora_embedding_B"]  # an embedding's

    return {name: ab(name) for name in layers}


@dataclass(frozen=True)
class ParityBaseline:
    """The probe before the update: its sequences, and trainer and engine log-probs of their
    sampled tokens while both hold the same weights."""

    probe: Batch
    trainer: list[float]
    engine: list[float]


@dataclass
class WeightSync:
    """The rollout engine's copy of the trainer's weights. `mode`: the Plan's `lora_sync`
    ("merged" | "adapter", None for full weights); `sleeps`: `plan.vllm_sleep`; `rollout`: the
    spec's rollout section (the probe's size and thresholds); `micro`, `share_prefix`: how the
    trainer scores the probe. `ledger` holds the weights as of the last push; `scratch` the
    adapter directories an adapter push writes."""

    actor: Any  # the DeepSpeed actor engine; its `.module` is the policy
    backend: Any
    mode: str | None
    sleeps: bool
    ledger: SyncLedger
    scratch: Path
    rollout: Any
    micro: int
    share_prefix: bool
    rank: int = 0
    world: int = 1

    @classmethod
    def for_run(cls, spec, plan, actor, backend, rank: int, world: int) -> "WeightSync":
        """The run's sync, its ledger started on the weights the trainer and the engine start with."""
        sync = cls(actor, backend, plan.lora_sync, plan.vllm_sleep,
                   SyncLedger(plan.lora_sync, plan.placement["rollout"]["dtype"]),
                   Path(tempfile.mkdtemp(prefix="ragen-sync-")), spec.rollout, spec.train.micro_batch,
                   spec.train.share_prefix, rank, world)
        sync.ledger.start(actor.module)
        return sync

    def sleep(self) -> None:
        """Before the update: the engine releases its accelerator memory (vLLM on CUDA beside DeepSpeed)."""
        if self.sleeps:
            self.backend.sleep()

    def wake(self) -> None:
        """After the update, before the push: undo `sleep`."""
        if self.sleeps:
            self.backend.wake_up()

    def push(self, tag: str) -> dict[str, float]:
        """Make the engine serve the trainer's current weights: full weights, or with LoRA the
        adapter (`adapter`) or the adapter folded into full weights (`merged`, served in fp32 when
        the trainer is not: `rollout.vllm_args.engine_dtype`). Returns its seconds and what share of
        the update reached the engine (`SyncLedger`). Nothing to push when the HF backend
        generates with the trainer's own module."""
        start = time.perf_counter()
        module = self.actor.module
        if not self.backend.needs_sync:
            return {"timing/sync_s": 0.0}
        adapter = merged = None
        if self.mode == "merged":
            from ragen_cli.train.lora import merged_state_dict

            merged = merged_state_dict(module)
            self.backend.sync(merged)
        elif self.mode == "adapter":
            adapter = self.scratch / f"adapter-{tag}"
            module.save_pretrained(str(adapter), safe_serialization=True)
            self.backend.sync(adapter)
        else:
            self.backend.sync({k: v.detach() for k, v in module.state_dict().items()})
        seconds = time.perf_counter() - start
        if self.mode == "adapter":
            engine = self.backend.adapter_check(adapter) if hasattr(self.backend, "adapter_check") else None
        else:
            engine = getattr(self.backend, "last_check", None)
        if engine is not None:
            agreed_engine(engine, self.rank, self.world)
        held = {} if engine is None else {"sync/engine_held": engine.held}
        return {"timing/sync_s": seconds, **held, **self.ledger.record(module, merged, adapter, engine)}

    def logprobs(self, probe: Batch) -> tuple[list[float], list[float]]:
        """(trainer, engine) log-probs of the sampled tokens of the probe's sequences, in row order."""
        trainer = score(self.actor, probe, self.micro, share_prefix=self.share_prefix)
        rows = [probe.input_ids[i, : int(probe.attention_mask[i].sum().item())].tolist() for i in range(len(probe))]
        engine = self.backend.score_batch(rows)  # one engine call (one a row cost 0.45 s more a step on CPU)
        t_out: list[float] = []
        e_out: list[float] = []
        for i, (ids, logp) in enumerate(zip(rows, engine)):
            on = probe.mask[i, : len(ids) - 1].bool()
            t_out += trainer[i, : len(ids) - 1][on].tolist()
            e_out += torch.tensor(logp)[on].tolist()
        return t_out, e_out

    def baseline(self, batch: Batch) -> ParityBaseline:
        """Before the update: both sides on the probe's sequences with the same weights."""
        r = self.rollout
        probe = probe_windows(batch, probe_rows(batch, r.parity_tokens, r.parity_window), r.parity_window)
        return ParityBaseline(probe, *self.logprobs(probe))

    def probe(self, base: ParityBaseline, history: list[dict]) -> dict[str, float]:
        """After the push: the probe again, judged against `base` (rollout/parity.py; `history`:
        the run's metric records, for the recent noise) -> the sync metrics. Raises ParityError
        on every rank when any rank's engine does not serve the trained weights."""
        from ragen_cli.rollout.parity import judge_sync, recent_noise

        r = self.rollout
        trainer_new, engine_after = self.logprobs(base.probe)
        check = judge_sync(base.trainer, base.engine, trainer_new, engine_after, r.parity_threshold,
                           r.parity_noise_factor, recent_noise(history))
        return agreed_sync(check, self.rank, self.world, r).metrics()

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def agreed_sync(check, rank: int, world: int, rollout):
    """This rank's `check` once every rank has passed its own (`parity.ruling`: all ranks raise
    the same ParityError, naming the rank whose engine failed, or none does). `rollout`: the
    spec's rollout section (parity_threshold, parity_noise_factor)."""
    from ragen_cli.rollout.parity import check_sync, ruling

    checks = [check] * world
    if world > 1:
        torch.distributed.all_gather_object(checks, check)
    bad = ruling(checks, rank)
    check_sync(checks[bad], rollout.parity_threshold, rollout.parity_noise_factor, rank=bad if world > 1 else None)
    return check


def agreed_engine(check, rank: int, world: int) -> None:
    """Every rank raises ParityError when any rank's engine did not load the pushed weights
    (`weight_sums.EngineCheck`), naming that rank; none waits on a rank that stopped."""
    from ragen_cli.rollout.parity import ParityError

    checks = [check] * world
    if world > 1:
        torch.distributed.all_gather_object(checks, check)
    bad = next((r for r, c in enumerate(checks) if not c.ok), None)
    if bad is not None:
        where = f" (rank {bad})" if world > 1 else ""
        raise ParityError(checks[bad].message() + where)


def push_weights(run, tag: str) -> dict[str, float]:
    """The loop's push (`run.sync.push`): one module-level name, where a test injects a faulty sync."""
    return run.sync.push(tag)
