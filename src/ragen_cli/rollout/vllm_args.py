"""The keyword arguments of a vLLM engine (`vllm.LLM(...)`) and its process settings: the one
definition that compile (the Plan's `vllm` and `env`, compile/launch.py) and the rollout backend
built without a Plan (eval, benches: `VLLMBackend`) both read. Pure and light: no vLLM import.

`MODEL_DIR` is a placeholder that the backend fills in with the local model directory.
"""

from __future__ import annotations

from ragen_cli.device import PRECISION_DTYPES

MODEL_DIR = "{model_dir}"
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm.config.lora.MaxLoRARanks
GPU_MEMORY_FRACTION = 0.4  # vLLM shares the GPU with the trainer (not measured here: no GPU)


def vllm_lora_rank(rank: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds `rank` (vLLM takes only these values)."""
    if rank > VLLM_LORA_RANKS[-1]:
        raise ValueError(f"LoRA rank {rank} is above vLLM's largest supported rank {VLLM_LORA_RANKS[-1]}")
    return next(r for r in VLLM_LORA_RANKS if r >= rank)


VLLM_CPU_BLOCK_SIZE = 32
"""KV-cache block size of vLLM on CPU: the smallest its CPU attention takes (a multiple of 32).
Prefix caching works in whole blocks; with vLLM's CPU default (128) the N rollouts of a
330-token bandit prompt re-computed about half of it each: 64 x 2-token samples took 15 s;
with 32 they take 2.7 s (docs/rollout.md)."""


VLLM_EXTENSION = "ragen_cli.rollout.vllm_worker_ext.WeightSyncExtension"
"""vLLM worker extension that receives pushed weights (rollout/vllm_worker_ext.py)."""


EXTERNAL_LAUNCHER = "external_launcher"
"""vLLM's executor for one engine per rank of a torchrun / deepspeed job (vllm 0.32.0,
v1/executor/uniproc_executor.ExecutorWithExternalLauncher): the engine runs in the rank's own
process (it sets VLLM_ENABLE_V1_MULTIPROCESSING=0), on the rank's device (LOCAL_RANK), and joins
the process group the trainer already initialised; with tensor_parallel_size 1 each rank is its
own "external data parallel" replica and generates its own prompts
(distributed/parallel_state.initialize_model_parallel). Without it, vLLM's single-process
executor uses local rank 0, so every rank's engine would land on cuda:0."""


def engine_kwargs(*, dtype: str, max_model_len: int, seed: int, device: str, max_num_seqs: int | None = None,
                  lora_rank: int | None = None, sleep: bool = False, world: int = 1) -> dict[str, object]:
    """Keyword arguments of `vllm.LLM(...)`: the one definition, used for the Plan
    (compile/launch.py `vllm_args`) and by `VLLMBackend` when it is built without a Plan (eval, benches).
    `model` and `tokenizer` are the MODEL_DIR placeholder; the backend fills in the directory.
    `world`: processes in the training job; above 1 each rank's engine comes up through vLLM's
    external launcher (EXTERNAL_LAUNCHER)."""
    args: dict[str, object] = {
        "model": MODEL_DIR,
        "tokenizer": MODEL_DIR,
        "dtype": dtype,
        "seed": seed,
        "max_model_len": max_model_len,
        "enforce_eager": device == "cpu",  # compiled start-up costs 80-100 s on CPU
        "enable_prefix_caching": True,  # multi-turn prompts share their history
        # whole-prompt prefill: with chunked prefill, vLLM rewinds a seeded request's generator
        # after a partial prefill with a CUDA-only call (CPU: "CPU Generator does not use
        # offset"), so per-request seeds would crash on long multi-turn prompts
        "enable_chunked_prefill": False,
        "max_num_batched_tokens": max(max_model_len, 8192),
        "worker_extension_cls": VLLM_EXTENSION,
    }
    if max_num_seqs is not None:
        args["max_num_seqs"] = max_num_seqs
    if device == "cuda":
        args["gpu_memory_utilization"] = GPU_MEMORY_FRACTION
    else:
        args["block_size"] = VLLM_CPU_BLOCK_SIZE  # whole-block prefix caching: see its docstring
    if lora_rank is not None:
        args.update(enable_lora=True, max_lora_rank=vllm_lora_rank(lora_rank), max_loras=1)
    if sleep:
        args["enable_sleep_mode"] = True
    if world > 1:
        args["distributed_executor_backend"] = EXTERNAL_LAUNCHER
    return args


def engine_dtype(precision: str, lora_sync: str | None, backend: str) -> tuple[str, str]:
    """(dtype, why) of the rollout engine for a trainer in `precision`.

    The engine must serve the policy the trainer holds: precision follows the hardware, and
    never costs on-policy sampling. A merged LoRA sync folds W + (alpha/r) B A into
    one tensor; in bf16 every element of the update below half a bf16 step of its weight (2^-9
    relative) rounds back to W, and an RL update is mostly that small (rms ~4e-5 on weights of
    0.02-0.05), so a bf16 engine would serve a policy that lags the trained one. The merged
    weights are therefore served in fp32: W (exact in fp32) plus the fp32 product of the
    trainer's own A and B, which keeps the update to ~1e-7 of itself (`sync/update_kept`). The
    adapter sync hands the engine the trainer's A and B as they are, and full weights are the
    trainer's tensors, so both serve in the trainer's precision; the HF backend samples with the
    trainer's own module."""
    trained = PRECISION_DTYPES[precision]
    if backend == "hf":
        return trained, "the HF backend samples with the trainer's own module"
    if lora_sync == "merged" and precision != "fp32":
        return "float32", (f"a merged LoRA sync in {precision} would round most of each update away: "
                           "the engine holds the merge in fp32")
    if lora_sync == "adapter":
        return trained, "the engine runs the trainer's own adapter tensors"
    return trained, "the engine receives the trainer's own tensors"


def vllm_cpu_env(kv_cache_gib: int, cpu_count: int, world: int = 1) -> dict[str, str]:
    """vLLM-on-CPU settings: a KV cache size, no core reserved, and with one
    process its OpenMP threads bound to every core (by default vLLM reserves one); several
    ranks on one machine would fight over the same cores, so they leave placement to the OS."""
    bind = (f"0-{cpu_count - 1}" if cpu_count > 1 else "0") if world == 1 else "nobind"
    return {"VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
            "VLLM_CPU_OMP_THREADS_BIND": bind}


ENGINE_IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
"""vLLM's engine in the calling process, not in spawned ones (why: compile/launch.py `process_env`): every vLLM
run's Plan sets it, and `ragen eval` for the engines it opens (eval.runner.open_backend)."""
