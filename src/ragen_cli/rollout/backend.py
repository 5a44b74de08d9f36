"""The generation backend interface, the backend factory and the sync parity probe.

Backends (docs/internals.md, "rollout/"):
- `hf_backend.HFBackend`: transformers `generate` on the policy model itself;
- `vllm_backend.VLLMBackend`: a vLLM engine created once, weights pushed after each update;
- `auto`: vLLM when it imports and its engine starts, else HF; the choice is logged.

All backends return log-probs under the unmodified model distribution (temperature 1, no
top-p), which is what the trainer computes; `score` gives the same quantity for a given
sequence so the trainer can compare after every sync (rollout/parity.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from ragen_cli.rollout.parity import ParityError  # noqa: F401  (re-exported: raised by the sync check)
from ragen_cli.rollout.types import Sample

log = logging.getLogger("ragen.rollout")


class Backend(Protocol):
    name: str  # "hf" or "vllm"
    needs_sync: bool  # False when the backend samples with the trainer's own module (nothing to push)

    def generate(self, prompts: list[list[int]], *, n: int, max_tokens: int, temperature: float,
                 top_p: float, seed: int) -> list[list[Sample]]:
        """n samples per prompt; temperature 0 means greedy."""

    def sync(self, weights: Any) -> None:
        """Make the engine serve new weights: a state dict (full fine-tuning, HF names) or the
        path of a saved PEFT adapter directory (LoRA)."""

    def score(self, token_ids: list[int]) -> list[float]:
        """log p(token_i | token_<i) for i = 1..len-1 (len(token_ids) - 1 values)."""

    def score_batch(self, sequences: list[list[int]]) -> list[list[float]]:
        """`score` of each sequence, in order (vLLM: in one engine call)."""

    def sleep(self) -> None:
        """Release accelerator memory until `wake_up` (vLLM sleep mode; a no-op where there is
        nothing to release)."""

    def wake_up(self) -> None:
        """Undo `sleep` before the next sync and rollout."""


def parity_gap(trainer_logprobs, engine_logprobs) -> float:
    """Largest absolute gap between two log-prob sequences of the same tokens (benches and
    tests; the training run's sync check is rollout/parity.py)."""
    a, b = [float(x) for x in trainer_logprobs], [float(x) for x in engine_logprobs]
    if len(a) != len(b) or not a:
        raise ValueError(f"parity probe needs two equal, non-empty sequences (got {len(a)} and {len(b)})")
    return max(abs(x - y) for x, y in zip(a, b))


def make_backend(kind: str, model_dir: str | Path, spec, policy: Any = None,
                 engine_args: dict[str, Any] | None = None, weight_sync: str = "file") -> Backend:
    """Create the rollout backend for `spec` (a `RunSpec`).

    kind: "vllm", "hf" or "auto". `policy` is the trainer's model for the HF backend (its
    weights are used directly, so `sync` is a no-op); without it the HF backend loads its own
    copy of `model_dir` (eval). vLLM needs `model_dir` (weights of the initial policy);
    `engine_args` (a run's `plan.vllm`) are vLLM's arguments exactly, LoRA support included,
    and `weight_sync` (`plan.weight_sync`) is "file" or "tensors"; without them (eval) the
    engine's arguments come from the spec (`vllm_args.engine_kwargs`, no LoRA)."""
    if kind == "hf":
        return _make_hf(model_dir, spec, policy)
    if kind == "vllm":
        return _make_vllm(model_dir, spec, engine_args, weight_sync)
    if kind != "auto":
        raise ValueError(f"unknown rollout backend {kind!r}; use vllm, hf or auto")
    try:
        backend = _make_vllm(model_dir, spec, engine_args, weight_sync)
    except Exception as err:  # any import or start-up failure means: fall back
        log.warning("rollout backend: vLLM unavailable (%s: %s); using HF generate", type(err).__name__, err)
        return _make_hf(model_dir, spec, policy)
    log.warning("rollout backend: vLLM")
    return backend


def spec_dtype(spec) -> str:
    """The model dtype of `spec`: its precision as the Plan resolved it (`device.with_precision`),
    or, for a spec not resolved yet, `auto` resolved on this machine the same way."""
    from ragen_cli.device import PRECISION_DTYPES, resolve_precision, resolved

    return PRECISION_DTYPES[resolve_precision(spec.deepspeed.precision, resolved(spec.deepspeed.device))[0]]


def _make_hf(model_dir, spec, policy):
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend

    tokenizer = load_tokenizer(model_dir)
    if policy is None:
        from ragen_cli.models.load import load_causal_lm

        return HFBackend(load_causal_lm(model_dir, spec_dtype(spec)), tokenizer, owns_model=True)
    return HFBackend(policy, tokenizer, owns_model=False)


def _make_vllm(model_dir, spec, engine_args: dict[str, Any] | None, weight_sync: str):
    from ragen_cli.rollout.vllm_backend import VLLMBackend

    kv = spec.rollout.vllm_kv_cache_gib
    if engine_args is not None:
        return VLLMBackend.with_args(model_dir, engine_args, weight_sync, kv)
    return VLLMBackend(model_dir, dtype=spec_dtype(spec), max_model_len=spec.model.max_context, seed=spec.train.seed,
                       kv_cache_gib=kv, weight_sync=weight_sync)
