"""The run's decisions about its rollout engine (how LoRA and full weights reach it, whether it
sleeps, its arguments through rollout/vllm_args.py), its process environment and its launch command.

Placeholders resolved at launch: `{model_dir}` (the local HF directory `models.resolve_model`
returns, rollout/vllm_args.MODEL_DIR) and `{run_dir}` (the run directory).

Launching several CPU processes: DeepSpeed's launcher (0.19.8, `launcher/runner.py`) sizes
the local resource pool from the accelerator's device count, which on CPU is `LOCAL_SIZE` or
the number of NUMA nodes (1 here); `--num_gpus G` then replaces each host's slots with
`range(G)`, so `deepspeed --num_gpus 2 --module ...` starts two CPU ranks on one machine. Core
binding (`--bind_cores_to_rank`) needs `numactl`, which is not installed here, so it is not used.

Several nodes, two ways (`launch_command`): without a node rank, `ragen train` on the first host
starts every node through ssh (DeepSpeed's pdsh runner); with `ragen train --node-rank R` every
node runs the same command and starts its own ranks (`--no_ssh --node_rank R`). Node 0 is then the
hostfile's first host and the others reach its rendezvous by that name (`--master_addr`); DeepSpeed
numbers the ranks node by node in hostfile order (its launch.py: `global_rank_mapping`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ragen_cli.device import resolved
from ragen_cli.rollout.vllm_args import ENGINE_IN_PROCESS, engine_dtype, engine_kwargs, vllm_cpu_env
from ragen_cli.spec.models import RunSpec

RUN_DIR = "{run_dir}"
WORKER_MODULE = "ragen_cli.train.worker"


@dataclass(frozen=True)
class Launch:
    """How the run starts: `in-process` (argv empty) or `deepspeed` (argv is the command)."""

    kind: str
    argv: tuple[str, ...]


def resolve_device(spec: RunSpec) -> str:
    return resolved(spec.deepspeed.device)


def lora_sync_mode(spec: RunSpec, device: str) -> str | None:
    """How a LoRA policy reaches vLLM after each update (`rollout.lora_sync`): "merged" or
    "adapter"; None without LoRA. auto: merged on CPU, adapter on GPU."""
    if spec.model.lora is None:
        return None
    if spec.rollout.lora_sync == "auto":
        return "merged" if device == "cpu" else "adapter"
    return spec.rollout.lora_sync


def weight_sync_mode(device: str) -> str:
    """How full weights reach vLLM after an update. The engine runs in the trainer's process on
    every device (`process_env`). "tensors" on CUDA: the worker loads the trainer's tensors by
    reference, no file, no copy. "file" on CPU: a safetensors file in /dev/shm that the worker
    memory-maps, the route the CPU parity corpus was recorded with; on CPU tensors push faster
    but no step is (docs/rollout.md)."""
    return "tensors" if device == "cuda" else "file"


def vllm_sleeps(spec: RunSpec, device: str) -> bool:
    """Does the run put its vLLM engine to sleep during updates (`rollout.sleep`)? auto: with
    vLLM (or auto) on CUDA, where it shares the GPU with DeepSpeed; never on CPU, and never while
    it generates during the update (`rollout.max_staleness` > 0)."""
    if spec.rollout.backend == "hf" or device != "cuda" or spec.rollout.max_staleness > 0:
        return False
    return spec.rollout.sleep != "off"


def vllm_args(spec: RunSpec, device: str, lora_sync: str | None, sleep: bool) -> dict[str, object]:
    """Keyword arguments of `vllm.LLM(...)` for the run's rollout engine (precision resolved;
    its dtype by `engine_dtype`), given the Plan's `lora_sync` and `vllm_sleep`."""
    lora = spec.model.lora
    dtype, _ = engine_dtype(spec.deepspeed.precision, lora_sync, spec.rollout.backend)
    return engine_kwargs(dtype=dtype, max_model_len=spec.model.max_context,
                         seed=spec.train.seed, device=device,
                         max_num_seqs=spec.env.train.groups * spec.env.train.group_size,
                         lora_rank=lora.rank if lora is not None and lora_sync == "adapter" else None, sleep=sleep,
                         world=spec.deepspeed.world)


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


def node_rank_problem(spec: RunSpec, node_rank: int | None) -> str:
    """Why `ragen train --node-rank node_rank` cannot run `spec`, or ''."""
    nodes = spec.deepspeed.nodes
    if node_rank is None:
        return ""
    if nodes == 1:
        return "--node-rank is for a run on several nodes, and deepspeed.nodes is 1"
    if not 0 <= node_rank < nodes:
        return f"--node-rank {node_rank} is not a node of this run: deepspeed.nodes = {nodes}, so 0 to {nodes - 1}"
    return ""


def hostfile_hosts(hostfile: str) -> list[str]:
    """The hosts of a DeepSpeed hostfile, in order (`host slots=N` lines; `#` comments)."""
    lines = [ln.split("#")[0].strip() for ln in Path(os.path.expanduser(hostfile)).read_text().splitlines()]
    return [ln.split()[0] for ln in lines if ln]


def launch_command(spec: RunSpec, node_rank: int | None = None) -> Launch:
    """The run's launch: in-process for one process; else the `deepspeed` launcher running the
    worker, from the first host through ssh, or (with `node_rank`) this node's own ranks only."""
    ds = spec.deepspeed
    if ds.world == 1:
        return Launch("in-process", ())
    argv = ["deepspeed", "--num_nodes", str(ds.nodes), "--num_gpus", str(ds.procs_per_node)]
    if ds.hostfile:
        argv += ["--hostfile", ds.hostfile]
    if node_rank is not None:
        assert ds.hostfile and not node_rank_problem(spec, node_rank), "checked by spec validation and the CLI"
        argv += ["--no_ssh", "--node_rank", str(node_rank), "--master_addr", hostfile_hosts(ds.hostfile)[0]]
    argv += ["--master_port", str(ds.master_port), "--module", WORKER_MODULE, RUN_DIR]
    return Launch("deepspeed", tuple(argv))
