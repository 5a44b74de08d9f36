"""What the engine holds after a weight push, read inside the engine's worker and compared with
what the trainer pushed (issue 72, item 5).

The worker (rollout/vllm_worker_ext.py) loads the pushed tensors with the model's own
`load_weights`, which returns the names of the engine parameters it loaded, and then sums each of
those parameters as it holds it (`param_sums`), before `process_weights_after_loading` (which on
CPU packs the linears into the matrix kernels' layout and empties `layer.weight`). The trainer's
side sums the tensors it pushed, already in the engine's dtype, under the engine's names
(`expected_sums`: vLLM fuses q, k, v into `qkv_proj` and gate, up into `gate_up_proj`, its
`packed_modules_mapping`), and `compare` names every pushed tensor the engine did not load and
every parameter whose sums differ.

The sums of a parameter w are (sum w, sum w^2, sum |w|), accumulated in fp64. Both sides add the
same values (the engine's are copies of the pushed tensors), so they differ only by summation
order, ~1e-16 of sum |w| per element added. A parameter that kept its old values differs by the
update: elements moved by ~1e-6 (an Adam step at lr 1e-6) move sum w by ~sqrt(n) 1e-6, which on
SmolLM2-135M's smallest matrix (k_proj, n = 110,592, |w| ~ 0.04) is ~1e-7 of sum |w|, four orders
above the tolerance (`REL_TOL`); tests/test_rollout_vllm.py tells such a weight apart on a real
engine. All three sums are additive, so a fused parameter's are the sums of its parts, whatever
their order. LoRA wrappers (an engine started with LoRA) name a layer's weight `...base_layer.weight`:
both sides use the name without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REL_TOL = 1e-11
"""A parameter is held when |sum w - expected| and |sum w^2 - expected| are within this share of
its sum |w| (resp. sum w^2)."""


def tensor_sums(t: Any) -> tuple[float, float, float]:
    """(sum w, sum w^2, sum |w|) of a tensor, in fp64."""
    d = t.detach().double()
    return float(d.sum()), float((d * d).sum()), float(d.abs().sum())


def _plain(name: str) -> str:
    """A parameter's name without the `.base_layer` an engine with LoRA enabled wraps layers in."""
    return name.replace(".base_layer.", ".")


def param_sums(model: Any, names: set[str] | None) -> dict[str, tuple[float, float, float]]:
    """The sums of each named parameter of the engine's model that `names` holds (all when None),
    by its name without LoRA's `.base_layer`."""
    wanted = None if names is None else {_plain(n) for n in names}
    return {_plain(name): tensor_sums(p.data) for name, p in model.named_parameters()
            if wanted is None or _plain(name) in wanted}


def engine_layer(hf_layer: str, packed: dict[str, list[str]]) -> str:
    """The engine layer a Hugging Face layer is part of: `...self_attn.q_proj` ->
    `...self_attn.qkv_proj` under Llama's `packed_modules_mapping`; other layers keep their name."""
    parent, _, module = hf_layer.rpartition(".")
    fused = next((f for f, parts in packed.items() if module in parts), module)
    return f"{parent}.{fused}" if parent else fused


def engine_name(hf_name: str, packed: dict[str, list[str]]) -> str:
    """The engine parameter a Hugging Face tensor is loaded into: `...q_proj.weight` ->
    `...qkv_proj.weight`."""
    owner, _, leaf = hf_name.rpartition(".")
    return f"{engine_layer(owner, packed)}.{leaf}"


def expected_sums(tensors: dict[str, Any], packed: dict[str, list[str]]) -> dict[str, tuple[float, float, float]]:
    """The sums each engine parameter should have after loading `tensors` (HF names, engine dtype)."""
    out: dict[str, list[float]] = {}
    for name, t in tensors.items():
        acc = out.setdefault(engine_name(name, packed), [0.0, 0.0, 0.0])
        for i, s in enumerate(tensor_sums(t)):
            acc[i] += s
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


@dataclass(frozen=True)
class EngineCheck:
    """One push, checked: `missing`, engine parameters the push should have loaded and did not;
    `differ`, parameters loaded with other values than pushed; `held`, the share of the pushed
    elements the engine holds (1.0 when both are empty); `expected` and `sizes`, the pushed
    parameters' sums and element counts (what the next push is compared with)."""

    missing: tuple[str, ...]
    differ: tuple[str, ...]
    held: float
    expected: dict = field(default_factory=dict, repr=False)
    sizes: dict = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.differ

    def message(self) -> str:
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} pushed weight(s) not loaded by the engine ({', '.join(self.missing[:3])})")
        if self.differ:
            parts.append(f"{len(self.differ)} engine weight(s) differ from the pushed ones ({', '.join(self.differ[:3])})")
        return ("the rollout engine does not serve the trained weights: " + "; ".join(parts) +
                f" ({self.held:.6f} of the pushed elements held)")


def held(engine: tuple[float, float, float], expected: tuple[float, float, float]) -> bool:
    """Whether an engine parameter's sums are the expected ones (module docstring)."""
    s1, s2, sa = engine
    e1, e2, ea = expected
    return abs(s1 - e1) <= REL_TOL * max(ea, sa) and abs(s2 - e2) <= REL_TOL * max(e2, s2)


def compare(expected: dict[str, tuple[float, float, float]], engine: dict[str, tuple[float, float, float]],
            sizes: dict[str, int]) -> EngineCheck:
    """Check a push: `expected` from `expected_sums`, `engine` the worker's `param_sums` of the
    parameters its `load_weights` loaded, `sizes` the element count of each expected parameter."""
    missing = tuple(sorted(n for n in expected if n not in engine))
    differ = tuple(sorted(n for n in expected if n in engine and not held(engine[n], expected[n])))
    total = sum(sizes.values())
    bad = sum(sizes[n] for n in missing + differ)
    return EngineCheck(missing, differ, (total - bad) / total if total else 1.0, expected, sizes)


def update_kept(previous: EngineCheck | None, now: EngineCheck) -> dict[str, float]:
    """`sync/update_kept` of a full-weight push, read from the engine: the share of the elements of
    the parameters the update moved (their pushed sums changed since the `previous` push; all of
    them at the first) that the engine holds at their new values. {} when nothing moved."""
    before = previous.expected if previous is not None else {}
    moved = [n for n in now.expected if before.get(n) != now.expected[n]]
    if not moved:
        return {}
    bad = set(now.missing) | set(now.differ)
    total = sum(now.sizes[n] for n in moved)
    return {"sync/update_kept": sum(now.sizes[n] for n in moved if n not in bad) / total}


def adapter_sums(adapter_dir: Any, dtype: str, packed: dict[str, list[str]]) -> tuple[dict, dict]:
    """What an engine serving the PEFT adapter in `adapter_dir` holds in its LoRA slot, layer by
    layer (`name.lora_a`, `name.lora_b` under the engine's layer names): A as saved and B times the
    adapter's scaling, both in the engine's LoRA `dtype` (vLLM casts them on loading and folds
    the scaling into B, `LoRALayerWeights.optimize`), summed as `tensor_sums`; and their sizes."""
    import json
    from pathlib import Path

    import torch
    from safetensors.torch import load_file

    config = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    r, alpha = config["r"], config["lora_alpha"]
    scaling = alpha / r ** 0.5 if config.get("use_rslora") else alpha / r
    dt = getattr(torch, dtype)
    out: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    for key, t in load_file(str(Path(adapter_dir) / "adapter_model.safetensors")).items():
        for tag, side in ((".lora_A.weight", "a"), (".lora_B.weight", "b"), (".lora_embedding_A", "a"),
                          (".lora_embedding_B", "b")):
            if key.endswith(tag):
                layer = engine_layer(key[: -len(tag)].removeprefix("base_model.model."), packed)
                value = t.to(dt) * scaling if side == "b" else t.to(dt)
                name = f"{layer}.lora_{side}"
                acc = out.setdefault(name, [0.0, 0.0, 0.0])
                for i, v in enumerate(tensor_sums(value)):
                    acc[i] += v
                sizes[name] = sizes.get(name, 0) + t.numel()
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}, sizes
