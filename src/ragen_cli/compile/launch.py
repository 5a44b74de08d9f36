"""vLLM engine arguments, process environment and the launch command of a run.

Placeholders resolved at launch: `{model_dir}` (the local HF directory `models.resolve_model`
returns) and `{run_dir}` (the run directory).

Launching several CPU processes: DeepSpeed's launcher (0.19.8, `launcher/runner.py`) sizes
the local resource pool from the accelerator's device count, which on CPU is `LOCAL_SIZE` or
the number of NUMA nodes (1 here); `--num_gpus G` then replaces each host's slots with
`range(G)`, so `deepspeed --num_gpus 2 --module ...` starts two CPU ranks on one machine. Core
binding (`--bind_cores_to_rank`) needs `numactl`, which is not installed here, so it is not used.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragen_cli.device import PRECISION_DTYPES, resolved
from ragen_cli.spec.models import RunSpec

MODEL_DIR = "{model_dir}"
RUN_DIR = "{run_dir}"
WORKER_MODULE = "ragen_cli.train.worker"
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm.config.lora.MaxLoRARanks
GPU_MEMORY_FRACTION = 0.4  # vLLM shares the GPU with the trainer (not measured here: no GPU)


@dataclass(frozen=True)
class Launch:
    """How the run starts: `in-process` (argv empty) or `deepspeed` (argv is the command)."""

    kind: str
    argv: tuple[str, ...]


def resolve_device(spec: RunSpec) -> str:
    return resolved(spec.deepspeed.device)


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


def lora_sync_mode(spec: RunSpec, device: str) -> str | None:
    """How a LoRA policy reaches vLLM after each update (`rollout.lora_sync`): "merged" or
    "adapter"; None without LoRA. auto: merged on CPU, adapter on GPU."""
    if spec.model.lora is None:
        return None
    if spec.rollout.lora_sync == "auto":
        return "merged" if device == "cpu" else "adapter"
    return spec.rollout.lora_sync


VLLM_EXTENSION = "ragen_cli.rollout.vllm_worker_ext.WeightSyncExtension"
"""vLLM worker extension that receives pushed weights (rollout/vllm_worker_ext.py)."""


def weight_sync_mode(device: str) -> str:
    """How full weights reach vLLM after an update. The engine runs in the trainer's process on
    every device (`process_env`). "tensors" on CUDA: the worker loads the trainer's tensors by
    reference, no file, no copy. "file" on CPU: a safetensors file in /dev/shm that the worker
    memory-maps, the route the CPU parity corpus was recorded with (docs/rollout.md); in a 4-step
    `make train` A/B on 2 cores, tensors pushed in 0.6 s against the file's 1.0 s and no step was
    faster beyond noise."""
    return "tensors" if device == "cuda" else "file"


def vllm_sleeps(spec: RunSpec, device: str) -> bool:
    """Does the run put its vLLM engine to sleep during updates (`rollout.sleep`)? auto: with
    vLLM (or auto) on CUDA, where it shares the GPU with DeepSpeed; never on CPU."""
    if spec.rollout.backend == "hf" or device != "cuda":
        return False
    return spec.rollout.sleep != "off"


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
    (`vllm_args`) and by `VLLMBackend` when it is built without a Plan (eval, benches).
    `model` and `tokenizer` are the MODEL_DIR placeholder; the backend fills in the directory.
    `world`: processes in the training job; above 1 each rank's engine comes up through vLLM's
    external launcher (EXTERNAL_LAUNCHER)."""
    args: dict[str, object] = {
        "model": MODEL_DIR,
        "tokenizer": MODEL_DIR,
        "dtype": dtype,
        "seed": seed,
        "max_model_len": max_model_len,
        "enforce_eager": device == "cpu",  # compiled start-up costs 80-100 s on CPU (FEASIBILITY.md)
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

    The engine must serve the policy the trainer holds (ARCHITECTURE.md, "Precision follows the
    hardware, and never costs on-policy sampling"). A merged LoRA sync folds W + (alpha/r) B A into
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


def vllm_args(spec: RunSpec, device: str) -> dict[str, object]:
    """Keyword arguments of `vllm.LLM(...)` for the run's rollout engine (precision resolved;
    its dtype by `engine_dtype`)."""
    sync = lora_sync_mode(spec, device)
    adapter = sync == "adapter"
    dtype, _ = engine_dtype(spec.deepspeed.precision, sync, spec.rollout.backend)
    return engine_kwargs(dtype=dtype, max_model_len=spec.model.max_context,
                         seed=spec.train.seed, device=device,
                         max_num_seqs=spec.env.train.groups * spec.env.train.group_size,
                         lora_rank=spec.model.lora.rank if adapter else None, sleep=vllm_sleeps(spec, device),
                         world=spec.deepspeed.world)


def vllm_cpu_env(kv_cache_gib: int, cpu_count: int, world: int = 1) -> dict[str, str]:
    """vLLM-on-CPU settings (FEASIBILITY.md): a KV cache size, no core reserved, and with one
    process its OpenMP threads bound to every core (by default vLLM reserves one); several
    ranks on one machine would fight over the same cores, so they leave placement to the OS."""
    bind = (f"0-{cpu_count - 1}" if cpu_count > 1 else "0") if world == 1 else "nobind"
    return {"VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
            "VLLM_CPU_OMP_THREADS_BIND": bind}


ENGINE_IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
"""vLLM's engine in the calling process, not in spawned ones (why: `process_env`): every vLLM
run's Plan sets it, and `ragen eval` for the engines it opens (eval.runner.open_backend)."""


def process_env(spec: RunSpec, device: str, cpu_count: int) -> dict[str, str]:
    """Environment variables every process of the run needs (set before importing torch)."""
    world = spec.deepspeed.world
    env: dict[str, str] = {}
    if device == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
        env.update(vllm_cpu_env(spec.rollout.vllm_kv_cache_gib, cpu_count, world))
    if spec.rollout.backend != "hf":
        # Every vLLM engine runs in the trainer's process: weight_sync_mode "tensors" on CUDA
        # needs it, the external launcher with several ranks too (and would set it itself), and on
        # CPU it starts 2.25x faster: vLLM's default spawns an engine-core and a worker process, each
        # importing torch and vLLM again (2 cores: 40.6 s against 18.0 s, bench/engine_start.py;
        # docs/rollout.md "vLLM processes"). vLLM 0.32's CPU worker binds its OpenMP threads to the
        # cores of VLLM_CPU_OMP_THREADS_BIND and leaves the process's torch threads as they were.
        env.update(ENGINE_IN_PROCESS)
    if world == 1:
        # One in-process rank: DeepSpeed's init_distributed needs these, else it tries MPI. Its
        # MASTER_PORT is a free port picked when the run starts (train.engine.single_process_env),
        # so concurrent runs on one machine do not collide; deepspeed.master_port is the
        # launcher's, for several processes.
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
    return env


def launch_command(spec: RunSpec) -> Launch:
    ds = spec.deepspeed
    if ds.world == 1:
        return Launch("in-process", ())
    argv = ["deepspeed", "--num_nodes", str(ds.nodes), "--num_gpus", str(ds.procs_per_node)]
    if ds.hostfile:
        argv += ["--hostfile", ds.hostfile]
    argv += ["--master_port", str(ds.master_port), "--module", WORKER_MODULE, RUN_DIR]
    return Launch("deepspeed", tuple(argv))
