"""vLLM worker extension: push a full set of new weights into a running engine.

Imported by name inside vLLM's worker process (`LLM(worker_extension_cls=...)`), so it must
import without side effects. Why not `load_weights` alone: on CPU vLLM packs every linear layer's weight for its matrix
kernels and then empties `layer.weight` (shape [0]), so loading into it fails and the built-in
`reload_weights` silently leaves the linears unchanged. The method below re-creates the
emptied weight parameters through each layer's own `quant_method.create_weights`, loads the
new tensors with the model's `load_weights` (which knows the fused qkv / gate_up layouts), then
re-runs `process_weights_after_loading` everywhere so the packed copies (linears, and the
lm_head's packed copy of the embedding) are rebuilt from the new values.
"""

from __future__ import annotations

WEIGHT_LOADER_V2_SUPPORTED = ("UnquantizedLinearMethod", "CompressedTensorsLinearMethod",
                              "CompressedTensorsLinearTransformMethod")


class WeightSyncExtension:
    """Mixed into vLLM's worker class; call through `llm.collective_rpc("ragen_load_weights", ...)`."""

    def ragen_load_weights(self, path: str) -> dict:
        """Load the safetensors file `path` (an HF-named state dict, written by the backend on
        the same machine); returns what `ragen_load_tensors` returns."""
        from safetensors.torch import load_file

        return self.ragen_load_tensors(load_file(path))

    def ragen_packed_modules(self) -> dict:
        """The model's fused layers and their Hugging Face parts (`packed_modules_mapping`)."""
        return dict(getattr(self.model_runner.get_model(), "packed_modules_mapping", None) or {})

    def ragen_lora_sums(self, lora_id: int) -> dict | None:
        """The sums of the LoRA A and B (scaling folded in, as vLLM serves them) that the adapter
        `lora_id` occupies in each layer's slot of the stacked buffers the kernels read, by layer
        name (`name.lora_a`, `name.lora_b`) and with their dtype; None while it is not active."""
        from ragen_cli.rollout.weight_sums import tensor_sums

        manager = self.model_runner.lora_manager._adapter_manager
        if lora_id not in manager.lora_index_to_id:
            return None
        slot = manager.lora_index_to_id.index(lora_id)
        sums, dtype = {}, None
        for name, module in manager.modules.items():
            for side in ("a", "b"):
                stacked = getattr(module, f"lora_{side}_stacked", None)
                if stacked is None:
                    continue
                parts = [tensor_sums(t[slot]) for t in stacked]
                sums[f"{name}.lora_{side}"] = tuple(sum(p[i] for p in parts) for i in range(3))
                dtype = str(stacked[0].dtype).removeprefix("torch.")
        return {"sums": sums, "dtype": dtype}

    def ragen_load_tensors(self, tensors: dict) -> dict:
        """Load an HF-named state dict of tensors (handed over by reference when the engine runs
        in the trainer's process, rollout weight_sync "tensors"). Returns {"sums": the sums of
        each parameter `load_weights` loaded, read back from the engine's own parameters before
        they are packed (rollout/weight_sums.py)}."""
        from vllm.model_executor.layers.linear import LinearBase

        from ragen_cli.rollout.weight_sums import param_sums

        model = self.model_runner.get_model()
        for module in model.modules():
            if isinstance(module, LinearBase) and module.weight.numel() == 0:
                _recreate_weight(module)
        loaded = model.load_weights(weights=iter(tensors.items()))
        sums = param_sums(model, set(loaded) if loaded is not None else None)
        for module in model.modules():
            method = getattr(module, "quant_method", None)
            if hasattr(module, "base_layer"):
                continue  # a LoRA wrapper: its base layer is visited on its own
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(module)
        return {"sums": sums}


def _recreate_weight(module) -> None:
    """Give an emptied LinearBase its full-size weight parameter back (values are loaded next)."""
    method = module.quant_method
    v2 = type(method).__name__ in WEIGHT_LOADER_V2_SUPPORTED and hasattr(module, "weight_loader_v2")
    method.create_weights(
        layer=module,
        input_size_per_partition=getattr(module, "input_size_per_partition", module.input_size),
        output_partition_sizes=module.output_partition_sizes,
        input_size=module.input_size,
        output_size=module.output_size,
        params_dtype=module.params_dtype,
        weight_loader=module.weight_loader_v2 if v2 else module.weight_loader,
    )
