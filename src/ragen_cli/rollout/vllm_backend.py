"""vLLM backend: one engine per run; token prompts in, sampled ids and log-probs out.

- Created once: `LLM(model=dir, dtype, enforce_eager on CPU, enable_prefix_caching=True,
  max_model_len, seed, enable_lora, worker_extension_cls=WeightSyncExtension)`.
- `generate` sends `TokensPrompt`s with one `SamplingParams` per prompt (`n`, seed
  `seed + i * n`, vLLM gives child j the seed + j) and `logprobs=0`: the sampled token's
  log-prob, which vLLM computes from the raw logits (`logprobs_mode="raw_logprobs"`, i.e.
  temperature 1 and no top-p), like the HF backend and the trainer.
- `sync(state_dict)`: full weights through the worker extension (a safetensors file in
  /dev/shm; tied `lm_head.weight` dropped), then `reset_prefix_cache()`. Each worker sums the
  parameters its `load_weights` loaded, read back from its own memory, and `last_check` holds
  them compared with the pushed tensors (rollout/weight_sums.py). `sync(adapter_dir)`: LoRA, a new
  `LoRARequest` id for each new adapter version so the engine loads it.
- `score(ids)`: `prompt_logprobs=0` on a 1-token greedy request.

vLLM on CPU starts its engine core in a spawned process (V1 multiprocessing): the code that
creates this backend must run under `if __name__ == "__main__":`. With
`VLLM_ENABLE_V1_MULTIPROCESSING=0` the engine runs in the calling process instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ragen_cli.rollout.context import stop_token_ids
from ragen_cli.rollout.types import Sample
from ragen_cli.rollout.vllm_args import MODEL_DIR, engine_kwargs, vllm_cpu_env



def cpu_env_defaults(kv_cache_gib: int) -> None:
    """vLLM-on-CPU settings for a backend built without a Plan's environment (eval, benches):
    `vllm_args.vllm_cpu_env` for one process; values already set in the environment win."""
    for key, value in vllm_cpu_env(kv_cache_gib, os.cpu_count() or 1).items():
        os.environ.setdefault(key, value)
    # vLLM kills its engine when one model step takes over 300 s; on a busy 2-core machine a
    # long prefill can (EngineDeadError mid-run while other jobs share the cores).
    os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")


def quiet_load(args: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """`args` with vLLM's weight-loading bar off where tqdm's are (TQDM_DISABLE=1: a quiet `ragen
    train`, ragen_cli/quiet.py). vLLM passes its bar `disable=` itself, which outranks tqdm's
    environment defaults, so it needs `use_tqdm_on_load`; an explicit setting in `args` wins."""
    if env.get("TQDM_DISABLE") == "1" and "use_tqdm_on_load" not in args:
        return {**args, "use_tqdm_on_load": False}
    return args


class VLLMBackend:
    name = "vllm"
    needs_sync = True
    duplicate_prompts = False  # send n copies of a prompt as n requests instead of one with n samples

    def __init__(self, model_dir: str | Path, dtype: str = "float32", max_model_len: int = 4096, seed: int = 0,
                 max_lora_rank: int | None = None, kv_cache_gib: int = 2, weight_sync: str = "file"):
        """An engine built without a Plan (eval, benches): its arguments are `engine_kwargs` of
        these values on this machine's device. A run's engine: `VLLMBackend.with_args`."""
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        self._start(model_dir, engine_kwargs(dtype=dtype, max_model_len=max_model_len, seed=seed, device=device,
                                             lora_rank=max_lora_rank), weight_sync, kv_cache_gib)

    @classmethod
    def with_args(cls, model_dir: str | Path, engine_args: dict[str, Any], weight_sync: str = "file",
                  kv_cache_gib: int = 2) -> "VLLMBackend":
        """An engine on `engine_args` exactly (a run's `plan.vllm`; `weight_sync`: `plan.weight_sync`;
        `kv_cache_gib`: vLLM's CPU KV cache where the environment does not set it already)."""
        backend = cls.__new__(cls)
        backend._start(model_dir, engine_args, weight_sync, kv_cache_gib)
        return backend

    def _start(self, model_dir: str | Path, engine_args: dict[str, Any], weight_sync: str, kv_cache_gib: int) -> None:
        import torch

        if not torch.cuda.is_available():
            cpu_env_defaults(kv_cache_gib)
        from vllm import LLM

        from ragen_cli.models.load import load_tokenizer

        self.model_dir = Path(model_dir)
        self.tokenizer = load_tokenizer(self.model_dir)
        self.stop_ids = stop_token_ids(self.tokenizer)
        self.dtype = str(engine_args["dtype"])
        self.lora_enabled = bool(engine_args.get("enable_lora"))
        self.lora_request = None
        self._lora_version = 0
        if weight_sync not in ("file", "tensors"):
            raise ValueError(f"weight_sync must be file or tensors, got {weight_sync!r}")
        if weight_sync == "tensors" and os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") != "0":
            raise ValueError("weight_sync tensors hands the worker the trainer's tensors, which needs the engine in "
                             "this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, which the Plan sets on CUDA)")
        self.weight_sync = weight_sync
        from ragen_cli.rollout.reaper import ctrl_c_spared, start_reaper

        start_reaper()  # the engine's processes end with this one, even on SIGKILL
        from ragen_cli.rollout.rng import kept_rng

        # a terminal's Ctrl-C reaches this process only, not the engine; and an engine in this
        # process (CUDA, several ranks) seeds torch's generators: the trainer's come back after
        with ctrl_c_spared(), kept_rng():
            self.llm = LLM(**quiet_load({k: str(self.model_dir) if v == MODEL_DIR else v for k, v in engine_args.items()},
                                        os.environ))
        self.tied = bool(getattr(self.llm.llm_engine.model_config.hf_config, "tie_word_embeddings", False))
        self._packed: dict | None = None  # the model's fused layers (`ragen_packed_modules`), asked once
        self.last_check = None  # the last full-weight push, checked in the engine (rollout/weight_sums.py)

    # ------------------------------------------------------------------ interface
    def generate(self, prompts: list[list[int]], *, n: int, max_tokens: int, temperature: float,
                 top_p: float, seed: int) -> list[list[Sample]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if any(not p for p in prompts):
            raise ValueError("every prompt needs at least one token")
        greedy = temperature <= 0
        # n > 1 is one request with n children (vLLM refuses it with greedy sampling)
        copies, per = (n, 1) if greedy or self.duplicate_prompts else (1, n)
        params = [
            SamplingParams(n=per, max_tokens=max_tokens, temperature=0.0 if greedy else temperature,
                           top_p=1.0 if greedy else top_p, logprobs=0, seed=seed + i * n + j,
                           stop_token_ids=list(self.stop_ids), detokenize=False)
            for i in range(len(prompts)) for j in range(copies)
        ]
        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts for _ in range(copies)]
        from ragen_cli.rollout.rng import kept_rng

        with kept_rng():  # per-request seeds: vLLM's own generators, never the trainer's
            outs = self.llm.generate(requests, params, use_tqdm=False, lora_request=self.lora_request)
        flat = [self._sample(c) for out in outs for c in sorted(out.outputs, key=lambda c: c.index)]
        return [flat[i * n:(i + 1) * n] for i in range(len(prompts))]

    def sync(self, weights: Any) -> None:
        if isinstance(weights, dict):
            self._sync_full(weights)
        else:
            self._sync_lora(Path(weights))
        self.llm.reset_prefix_cache()

    def score(self, token_ids: list[int]) -> list[float]:
        return self.score_batch([token_ids])[0]

    def score_batch(self, sequences: list[list[int]]) -> list[list[float]]:
        """`score` of each sequence, in one engine call (one prefill for the lot: the sync's parity
        probe scores its sequences this way), or one call each on an engine built with LoRA, whose
        CPU kernels fail on the prompt log-probs of several requests at once (vllm 0.32: einsum
        size mismatch in punica_cpu `add_lora_logits`)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if any(len(ids) < 2 for ids in sequences):
            raise ValueError("score needs at least two tokens")
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        calls = [sequences] if not self.lora_enabled else [[ids] for ids in sequences]
        outs = [out for part in calls
                for out in self.llm.generate([TokensPrompt(prompt_token_ids=list(ids)) for ids in part], params,
                                             use_tqdm=False, lora_request=self.lora_request)]
        return [[step[tid].logprob for step, tid in zip(out.prompt_logprobs[1:], ids[1:])]
                for out, ids in zip(outs, sequences)]

    def sleep(self) -> None:
        """vLLM sleep mode level 1 (engine built with `enable_sleep_mode`): the KV cache is freed
        and the weights go to host memory, so the trainer has the GPU memory during the update."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        """Back from `sleep`: weights on the GPU again and a fresh KV cache (the caller then
        syncs the new weights, which also resets the prefix cache)."""
        self.llm.wake_up()

    def close(self) -> None:
        """Shut the engine down (frees its processes and KV cache); the backend is unusable after."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()

    # ------------------------------------------------------------------ internals
    def _sync_full(self, state_dict: dict) -> None:
        """Push full weights (`self.weight_sync`, the Plan's): "file" writes them to a safetensors
        file in shared memory (/dev/shm when there is one) that the worker loads (sending the
        same 540 MB of SmolLM2-135M fp32 as bytes through vLLM's RPC took 7-9 s of a 10 s sync;
        the file takes ~3 s); "tensors" hands the worker the tensors themselves, where they are
        (on CUDA the engine runs in this process, so nothing is copied or serialised)."""
        import torch

        dtype = getattr(torch, self.dtype)
        keep = self.weight_sync == "tensors"
        tensors = {name: (t.detach().to(dtype) if keep else t.detach().to("cpu", dtype)).contiguous()
                   for name, t in state_dict.items() if not (self.tied and name == "lm_head.weight")}
        if not tensors:
            raise ValueError("sync got an empty state dict")
        if keep:  # the worker in this process (CUDA): by reference
            answers = self.llm.collective_rpc("ragen_load_tensors", args=(tensors,))
        else:
            answers = self._sync_file(tensors)
        self.lora_request = None  # the weights are the whole policy now; no adapter on top
        self.last_check = self._check(tensors, answers)

    def _check(self, tensors: dict, answers: list[dict]):
        """What each worker read back from its own parameters against what was pushed
        (rollout/weight_sums.py): the worst worker's `EngineCheck`."""
        from ragen_cli.rollout.weight_sums import compare, engine_name, expected_sums

        if self._packed is None:
            self._packed = self.llm.collective_rpc("ragen_packed_modules")[0]
        expected = expected_sums(tensors, self._packed)
        sizes: dict[str, int] = {}
        for name, t in tensors.items():
            key = engine_name(name, self._packed)
            sizes[key] = sizes.get(key, 0) + t.numel()
        return min((compare(expected, a["sums"], sizes) for a in answers), key=lambda c: c.held)

    def _sync_file(self, tensors: dict) -> list[int]:
        import tempfile

        from safetensors.torch import save_file

        shm = Path("/dev/shm")
        with tempfile.TemporaryDirectory(prefix="ragen-sync-", dir=shm if shm.is_dir() else None) as tmp:
            path = Path(tmp) / "weights.safetensors"
            save_file(tensors, str(path))
            return self.llm.collective_rpc("ragen_load_weights", args=(str(path),))

    def adapter_check(self, adapter_dir: Path):
        """After an adapter sync: activate the new adapter with a 2-token request, then compare
        the LoRA weights each worker serves in its slot with the adapter file's
        (`weight_sums.adapter_sums`); the worst worker's `EngineCheck`."""
        from ragen_cli.rollout.weight_sums import EngineCheck, adapter_sums, compare

        self.score([0, 0])
        answers = self.llm.collective_rpc("ragen_lora_sums", args=(self._lora_version,))
        if self._packed is None:
            self._packed = self.llm.collective_rpc("ragen_packed_modules")[0]
        checks = []
        for a in answers:
            if a is None:  # the adapter is not in any slot: nothing of it is served
                return EngineCheck(("the adapter " + str(adapter_dir),), (), 0.0)
            expected, sizes = adapter_sums(adapter_dir, a["dtype"], self._packed)
            checks.append(compare(expected, a["sums"], sizes))
        return min(checks, key=lambda c: c.held)

    def _sync_lora(self, adapter_dir: Path) -> None:
        from vllm.lora.request import LoRARequest

        if not (adapter_dir / "adapter_config.json").is_file():
            raise ValueError(f"{adapter_dir} is not a PEFT adapter directory (no adapter_config.json)")
        if not self.llm.llm_engine.vllm_config.lora_config:
            raise ValueError("this vLLM engine was started without LoRA (model.lora is unset, or "
                             "rollout.lora_sync resolved to merged)")
        self._lora_version += 1
        self.lora_request = LoRARequest(f"ragen-policy-v{self._lora_version}", self._lora_version, str(adapter_dir))

    def _sample(self, completion) -> Sample:
        ids = list(completion.token_ids)
        logprobs = [step[tid].logprob for step, tid in zip(completion.logprobs, ids)]
        reason = "stop" if ids and ids[-1] in self.stop_ids else "length"
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return Sample(token_ids=ids, logprobs=logprobs, text=text, finish_reason=reason)
