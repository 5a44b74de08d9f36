"""compile_plan: sizes, DeepSpeed JSON, vLLM args, env and launch, against hand-derived numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from ragen_cli.compile.deepspeed_config import scheduler_block
from ragen_cli.rollout.vllm_args import vllm_lora_rank
from ragen_cli.compile.plan import Plan, compile_plan
from ragen_cli.compile.render import print_plan
from ragen_cli.spec.sizes import derive_sizes, kept_groups
from ragen_cli.spec.loader import load, load_spec

ROOT = Path(__file__).resolve().parents[1]

CPU_SPEC = """\
name: cpu-run
model: {name: tiny-random, max_context: 1024, lora: {rank: 12, alpha: 24}}
env:
  train: {name: bandit, groups: 8, group_size: 8}
rollout: {max_turns: 1, max_tokens_per_turn: 128, vllm_kv_cache_gib: 3}
train: {steps: 30, micro_batch: 4, lr_actor: 5.0e-5, lr_critic: 1.0e-4, schedule: cosine, warmup_steps: 3}
deepspeed: {precision: bf16, device: cpu}
"""


@pytest.fixture
def cpu_plan(tmp_path: Path) -> Plan:
    path = tmp_path / "cpu.yaml"
    path.write_text(CPU_SPEC)
    return compile_plan(load_spec(path), device="cpu", cpu_count=2)


def test_cpu_single_process_sizes(cpu_plan: Plan):
    # P x N = 8 x 8 = 64; kept floor(0.25 x 8) = 2 groups x 8 = 16; the starpo-s preset's 4 mini
    # batches: 16 / 4 = 4 per optimizer step, micro 4 -> grad accum 1; 4 optimizer steps per
    # update; 30 steps -> 120; micro batches per update 16 / 4 = 4.
    s = cpu_plan.sizes
    assert (s.world_size, s.trajectories_per_step, s.kept_groups, s.kept_trajectories) == (1, 64, 2, 16)
    assert (s.mini_batch, s.micro_batch, s.grad_accum_steps) == (4, 4, 1)
    assert (s.optimizer_steps_per_update, s.optimizer_steps_per_step, s.total_optimizer_steps) == (4, 4, 120)
    assert s.micro_batches_per_update == 4


def test_cpu_single_process_deepspeed_json(cpu_plan: Plan):
    ds = cpu_plan.deepspeed
    assert ds["train_batch_size"] == 4 == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * 1
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (4, 1)
    assert ds["zero_optimization"] == {"stage": 0}
    assert ds["bf16"] == {"enabled": True} and "fp16" not in ds
    assert ds["gradient_clipping"] == 1.0
    assert ds["optimizer"] == {"type": "AdamW", "params": {
        "lr": 5e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01, "torch_adam": True}}
    assert ds["scheduler"] == {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 120, "warmup_min_ratio": 0.0, "cos_min_ratio": 0.0,  # 30 steps x 4 optimizer steps
        "warmup_num_steps": 3, "warmup_type": "linear"}}
    critic = cpu_plan.critic_deepspeed  # starpo-s: GAE, so a critic with lr_critic
    assert critic is not None and critic["optimizer"]["params"]["lr"] == 1e-4
    assert {k: v for k, v in critic.items() if k != "optimizer"} == {k: v for k, v in ds.items() if k != "optimizer"}


def test_cpu_single_process_vllm_env_launch(cpu_plan: Plan):
    assert cpu_plan.vllm == {
        # a bf16 trainer whose LoRA is merged into the engine's weights: the engine runs fp32
        # (launch.engine_dtype; in bf16 the merge rounds the update away)
        "model": "{model_dir}", "tokenizer": "{model_dir}", "dtype": "float32", "max_model_len": 1024,
        "enforce_eager": True, "enable_prefix_caching": True, "max_num_seqs": 64, "seed": 42, "block_size": 32,
        # whole-prompt prefill (seeded requests on CPU), and the weight-sync extension
        "enable_chunked_prefill": False, "max_num_batched_tokens": 8192,
        "worker_extension_cls": "ragen_cli.rollout.vllm_worker_ext.WeightSyncExtension",
        # LoRA on CPU: rollout.lora_sync auto -> merged weights, so vLLM runs without LoRA
    }
    assert cpu_plan.env == {
        "DS_ACCELERATOR": "cpu", "VLLM_CPU_KVCACHE_SPACE": "3", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CPU_OMP_THREADS_BIND": "0-1", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine in the trainer's process
    }
    assert (cpu_plan.launch.kind, cpu_plan.launch.argv) == ("in-process", ())
    assert (cpu_plan.run_dir, cpu_plan.lora, cpu_plan.needs_reference) == ("runs/cpu-run", True, False)


def test_cluster_2x8_plan(monkeypatch):
    """specs/cluster-2x8.yaml: P=8, N=16 -> 128; kept floor(0.25 x 8) = 2 groups x 16 = 32;
    world 2 x 8 = 16; mini 16 -> 32 / 16 = 2 optimizer steps per update; grad accum =
    16 / (micro 1 x 16) = 1; 200 steps x 2 = 400 optimizer steps; 32 / (1 x 16) = 2 micro batches."""
    monkeypatch.chdir(ROOT)
    plan = compile_plan(load_spec("specs/cluster-2x8.yaml"))  # device: cuda in the spec
    s = plan.sizes
    assert (s.world_size, s.trajectories_per_step, s.kept_trajectories, s.mini_batch) == (16, 128, 32, 16)
    assert (s.grad_accum_steps, s.optimizer_steps_per_update, s.total_optimizer_steps, s.micro_batches_per_update) == (1, 2, 400, 2)
    ds = plan.deepspeed
    assert (ds["train_batch_size"], ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (16, 1, 1)
    assert ds["zero_optimization"] == {"stage": 2}
    assert ds["bf16"] == {"enabled": True}
    assert ds["optimizer"]["params"] == {"lr": 1e-6, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01, "torch_adam": True, "fused": True}
    assert "scheduler" not in ds  # constant schedule without warm-up
    assert plan.critic_deepspeed["optimizer"]["params"]["lr"] == 1e-5
    assert plan.device == "cuda" and plan.env == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # in-process engine: tensor sync
    assert plan.vllm["enforce_eager"] is False and plan.vllm["gpu_memory_utilization"] == 0.4
    assert plan.vllm["max_num_seqs"] == 128 and "enable_lora" not in plan.vllm
    # 16 ranks, each with its own engine on its own GPU: vLLM's external launcher (without it
    # every rank's engine would take local rank 0's device, cuda:0)
    assert plan.vllm["distributed_executor_backend"] == "external_launcher"
    assert plan.placement["actor"] == {"device": "cuda:{local_rank}", "dtype": "bfloat16"}
    assert plan.launch.kind == "deepspeed"
    assert list(plan.launch.argv) == [
        "deepspeed", "--num_nodes", "2", "--num_gpus", "8", "--hostfile", "specs/hostfile.example",
        "--master_port", "29500", "--module", "ragen_cli.train.worker", "{run_dir}"]


def test_cpu_two_processes_use_launcher_without_hostfile(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(CPU_SPEC.replace("device: cpu}", "device: cpu, procs_per_node: 2}"))
    plan = compile_plan(load_spec(path), device="cpu", cpu_count=2)
    # kept 16 / 4 mini batches = 4 per optimizer step = 2 rows per process; micro min(4, 2) = 2 ->
    # 1 accumulation step; threads left to the OS across ranks.
    assert (plan.sizes.mini_batch, plan.sizes.micro_batch, plan.sizes.grad_accum_steps) == (4, 2, 1)
    assert plan.deepspeed["train_batch_size"] == 4
    assert plan.env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind" and "RANK" not in plan.env
    # each rank's vLLM engine in its own process through the external launcher (vllm-cpu runs it:
    # tests/test_train_multiproc.py)
    assert plan.vllm["distributed_executor_backend"] == "external_launcher"
    assert plan.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert list(plan.launch.argv[:5]) == ["deepspeed", "--num_nodes", "1", "--num_gpus", "2"]
    assert "--hostfile" not in plan.launch.argv


def test_reuse_epochs_and_mini_batches():
    # kept 16, mini 8 -> 2 optimizer steps per epoch x 2 epochs = 4 per update; online_k 2 -> 8
    # per step; 30 steps -> 240; grad accum 8 / (4 x 1) = 2; micro batches (16 / 4) x 2 = 8.
    s = derive_sizes(groups=8, group_size=8, keep_ratio=0.25, nodes=1, procs_per_node=1, micro_batch=4,
                     mini_batch=8, ppo_epochs=2, online_k=2, steps=30)
    assert (s.optimizer_steps_per_update, s.optimizer_steps_per_step, s.total_optimizer_steps) == (4, 8, 240)
    assert (s.grad_accum_steps, s.micro_batches_per_update) == (2, 8)


def test_kept_groups_floor_and_minimum():
    assert kept_groups(8, 0.25) == 2  # the reference: int(0.25 * 8)
    assert kept_groups(100, 0.29) == 29  # 0.29 * 100 = 28.999999999999996 in floats
    assert kept_groups(3, 0.25) == 1  # floor(0.75) = 0 -> at least one group
    assert kept_groups(8, 1.0) == 8


def test_schedulers():
    assert scheduler_block("constant", 1e-5, 0, 10) is None
    assert scheduler_block("constant", 1e-5, 2, 10) == {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.0, "warmup_max_lr": 1e-5, "warmup_num_steps": 2, "warmup_type": "linear"}}
    assert scheduler_block("linear", 1e-5, 0, 10) == {"type": "WarmupDecayLR", "params": {
        "total_num_steps": 10, "warmup_min_lr": 0.0, "warmup_max_lr": 1e-5, "warmup_num_steps": 1,
        "warmup_type": "linear"}}


@pytest.mark.parametrize("sync, device, lora_args", [
    ("auto", "cpu", {}),
    ("auto", "cuda", {"enable_lora": True, "max_lora_rank": 16, "max_loras": 1}),  # rank 12 -> 16
    ("adapter", "cpu", {"enable_lora": True, "max_lora_rank": 16, "max_loras": 1}),
    ("merged", "cuda", {}),
])
def test_vllm_lora_only_for_adapter_sync(tmp_path, sync, device, lora_args):
    from ragen_cli.compile.launch import lora_sync_mode, vllm_args, vllm_sleeps

    path = tmp_path / "cpu.yaml"
    path.write_text(CPU_SPEC.replace("vllm_kv_cache_gib: 3}", f"vllm_kv_cache_gib: 3, lora_sync: {sync}}}"))
    spec = load_spec(path)
    assert lora_sync_mode(spec, device) == ("adapter" if lora_args else "merged")
    args = vllm_args(spec, device, lora_sync_mode(spec, device), vllm_sleeps(spec, device))
    assert {k: args[k] for k in ("enable_lora", "max_lora_rank", "max_loras") if k in args} == lora_args


def test_vllm_lora_ranks():
    assert [vllm_lora_rank(r) for r in (1, 2, 8, 9, 64, 300, 512)] == [1, 8, 8, 16, 64, 320, 512]
    with pytest.raises(ValueError, match="above vLLM's largest supported rank 512"):
        vllm_lora_rank(513)


def test_offload_block(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(CPU_SPEC.replace("{precision: bf16, device: cpu}", "{device: cuda, zero_stage: 2, offload: cpu, precision: fp16}"))
    ds = compile_plan(load_spec(path)).deepspeed
    assert ds["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}
    assert ds["fp16"] == {"enabled": True, "loss_scale": 0, "initial_scale_power": 16} and "bf16" not in ds
    # offloaded optimizer state: torch's AdamW on the CPU (DeepSpeedCPUAdam would compile), not fused
    assert ds["optimizer"]["params"]["torch_adam"] is True and "fused" not in ds["optimizer"]["params"]


def test_plan_is_deterministic_and_json_round_trips(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(CPU_SPEC)
    a = compile_plan(load_spec(path), device="cpu", cpu_count=2)
    b = compile_plan(load_spec(path), device="cpu", cpu_count=2)
    assert a == b and a.to_json() == b.to_json()
    assert Plan.from_json(a.to_json()) == a
    assert json.loads(a.to_json())["deepspeed"]["train_batch_size"] == 4


def test_starpo_plan_needs_reference(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(CPU_SPEC + "algorithm: {preset: starpo}\n")
    plan = compile_plan(load_spec(path), device="cpu", cpu_count=2)
    # keep_ratio 1.0 keeps all 8 groups: 64 trajectories in 4 mini batches of 16, 16 / micro 4 = 4 accumulation steps
    assert plan.needs_reference and plan.sizes.kept_trajectories == 64 and plan.sizes.grad_accum_steps == 4
    assert plan.sizes.optimizer_steps_per_update == 4


def test_print_plan_shows_sizes_provenance_and_launch(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(CPU_SPEC + "algorithm: {clip_high: 0.3}\n")
    loaded = load(path, ["algorithm.entropy_coef=0.0"])
    console = Console(record=True, width=120)
    print_plan(compile_plan(loaded.spec, device="cpu", cpu_count=2), loaded.provenance, console=console)
    text = console.export_text()
    assert "gradient accumulation steps" in text and "WarmupCosineLR" in text
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")]
        for i, cell in enumerate(cells[:-2]):
            rows.setdefault(cell, (cells[i + 1], cells[i + 2]))
    assert rows["clip_high"] == ("0.3", "user")
    assert rows["entropy_coef"] == ("0.0", "--set")
    assert rows["clip_low"] == ("0.2", "preset") and rows["gamma"] == ("1.0", "default")
    assert "VLLM_CPU_OMP_THREADS_BIND=0-1" in text and "world size 1" in text


def test_rollout_is_correction_is_on_in_low_precision_and_off_in_fp32(cpu_plan: Plan):
    from ragen_cli.compile.plan import rollout_is_cap

    assert cpu_plan.rollout_is_cap == 2.0  # CPU_SPEC is bf16 with rollout_is auto
    assert json.loads(cpu_plan.to_json())["rollout_is_cap"] == 2.0  # --dry-run --json shows it
    assert Plan.from_json(cpu_plan.to_json()) == cpu_plan
    assert [rollout_is_cap("auto", 2.0, p) for p in ("fp32", "bf16", "fp16")] == [None, 2.0, 2.0]
    assert (rollout_is_cap("on", 3.0, "fp32"), rollout_is_cap("off", 2.0, "bf16")) == (3.0, None)


def test_precision_auto_decision_for_every_machine_kind():
    from ragen_cli.device import choose_precision, cpu_flags

    flags = cpu_flags("processor : 0\nflags : fpu sse avx2 avx512f avx512_bf16\n")
    assert "avx512_bf16" in flags and cpu_flags("no flags line") == set()
    assert choose_precision("auto", "cpu", flags, None)[0] == "bf16"
    assert choose_precision("auto", "cpu", {"amx_bf16"}, None)[0] == "bf16"
    assert choose_precision("auto", "cpu", {"avx2", "avx512f"}, None) == (
        "fp32", "auto: this CPU has no native bf16 (no avx512_bf16 or amx_bf16 flag), where bf16 is emulated and slow")
    assert choose_precision("auto", "cuda", set(), 8.0)[0] == "bf16"  # A100
    assert choose_precision("auto", "cuda", set(), 7.5)[0] == "fp32"  # T4: no bf16
    assert choose_precision("auto", "cuda", set(), None)[0] == "fp32"
    assert choose_precision("fp16", "cuda", set(), 9.0) == ("fp16", "set in the spec")


def test_the_plan_carries_the_resolved_precision_to_deepspeed_vllm_and_the_correction(tmp_path: Path):
    path = tmp_path / "auto.yaml"
    path.write_text(CPU_SPEC.replace("precision: bf16", "precision: auto"))
    spec = load_spec(path)
    assert spec.deepspeed.precision == "auto"
    bf16 = compile_plan(spec, device="cuda", cpu_count=8, precision=("bf16", "auto: GPU compute capability 8 has bf16"))
    fp32 = compile_plan(spec, device="cpu", cpu_count=2, precision=("fp32", "auto: this CPU has no native bf16"))
    assert (bf16.precision, bf16.vllm["dtype"], bf16.deepspeed["bf16"]["enabled"], bf16.rollout_is_cap) == (
        "bf16", "bfloat16", True, 2.0)
    assert (fp32.precision, fp32.vllm["dtype"], "bf16" in fp32.deepspeed, fp32.rollout_is_cap) == (
        "fp32", "float32", False, None)
    assert Plan.from_json(bf16.to_json()) == bf16


def test_a_backend_reads_the_resolved_precision(tmp_path: Path):
    from ragen_cli.device import PRECISION_DTYPES, resolve_precision, with_precision
    from ragen_cli.rollout.backend import spec_dtype

    path = tmp_path / "auto.yaml"
    path.write_text(CPU_SPEC.replace("precision: bf16", "precision: auto"))
    spec = load_spec(path)
    assert spec_dtype(with_precision(spec, "bf16")) == "bfloat16"
    # unresolved: the machine's choice, the same the Plan makes (device cpu in CPU_SPEC)
    assert spec_dtype(spec) == PRECISION_DTYPES[resolve_precision("auto", "cpu")[0]]


@pytest.mark.parametrize("name", ["bandit", "sokoban", "frozenlake"])
def test_gpu_specs_compile_to_the_papers_setting_on_one_gpu(monkeypatch, name):
    """specs/gpu/: Qwen2.5-0.5B, 8 x 16 rollouts, StarPO-S (2 of 8 groups kept), bf16, ZeRO-2,
    vLLM with its GPU memory share and sleep mode, thinking on, 400 tokens a turn."""
    monkeypatch.chdir(ROOT)
    spec = load_spec(f"specs/gpu/{name}.yaml")
    plan = compile_plan(spec)  # device: cuda in the spec; bf16 set in the spec
    assert (spec.model.name, spec.rollout.think, spec.rollout.max_tokens_per_turn) == ("Qwen/Qwen2.5-0.5B-Instruct", True, 400)
    assert spec.rollout.max_turns == (1 if name == "bandit" else 5)
    assert (plan.sizes.trajectories_per_step, plan.sizes.kept_trajectories, plan.sizes.world_size) == (128, 32, 1)
    assert (plan.precision, plan.deepspeed["bf16"], plan.deepspeed["zero_optimization"]) == ("bf16", {"enabled": True}, {"stage": 2})
    assert (plan.vllm["gpu_memory_utilization"], plan.vllm["enable_sleep_mode"], plan.vllm_sleep) == (0.4, True, True)
    assert (plan.vllm["dtype"], plan.vllm["enforce_eager"], plan.rollout_is_cap) == ("bfloat16", False, 2.0)
    assert plan.sizes.optimizer_steps_per_update == 4  # 32 kept / mini-batch 8: the ratio moves, clipping acts
    assert plan.launch.kind == "in-process"
    # on CUDA the engine runs in the trainer's process and takes the weights as tensors
    assert (plan.weight_sync, plan.env["VLLM_ENABLE_V1_MULTIPROCESSING"], plan.lora_sync) == ("tensors", "0", None)


def test_gpu_two_node_spec_launches_deepspeed_with_its_hostfile(monkeypatch):
    monkeypatch.chdir(ROOT)
    plan = compile_plan(load_spec("specs/gpu/sokoban-2node.yaml"))
    assert (plan.sizes.world_size, plan.sizes.kept_trajectories, plan.sizes.optimizer_steps_per_update) == (16, 32, 2)
    assert plan.launch.kind == "deepspeed"
    assert list(plan.launch.argv)[:7] == ["deepspeed", "--num_nodes", "2", "--num_gpus", "8", "--hostfile",
                                          "specs/gpu/hostfile.example"]


def test_vllm_sleeps_only_on_cuda_beside_deepspeed(tmp_path: Path):
    from ragen_cli.compile.launch import vllm_sleeps

    path = tmp_path / "s.yaml"
    for sleep, backend, device, want in [("auto", "vllm", "cuda", True), ("auto", "auto", "cuda", True),
                                         ("auto", "vllm", "cpu", False), ("on", "vllm", "cpu", False),
                                         ("off", "vllm", "cuda", False), ("auto", "hf", "cuda", False)]:
        path.write_text(CPU_SPEC.replace("vllm_kv_cache_gib: 3}", f"vllm_kv_cache_gib: 3, sleep: {sleep}, backend: {backend}}}"))
        spec = load_spec(path)
        assert vllm_sleeps(spec, device) is want, (sleep, backend, device)
        assert ("enable_sleep_mode" in compile_plan(spec, device=device, cpu_count=2).vllm) is want


def test_the_plan_decides_how_weights_reach_the_engine(tmp_path: Path):
    # the engine in the trainer's process on both devices; full weights: a file in /dev/shm on CPU,
    # tensors by reference on CUDA; LoRA: merged on CPU, the adapter on CUDA (rollout.lora_sync auto)
    path = tmp_path / "s.yaml"
    path.write_text(CPU_SPEC)  # LoRA rank 12
    spec = load_spec(path)
    cpu, cuda = compile_plan(spec, device="cpu", cpu_count=2), compile_plan(spec, device="cuda", cpu_count=2)
    assert (cpu.weight_sync, cpu.lora_sync, cpu.env["VLLM_ENABLE_V1_MULTIPROCESSING"]) == ("file", "merged", "0")
    assert (cuda.weight_sync, cuda.lora_sync, cuda.env["VLLM_ENABLE_V1_MULTIPROCESSING"]) == ("tensors", "adapter", "0")
    assert cuda.vllm["enable_lora"] is True and "enable_lora" not in cpu.vllm
    path.write_text(CPU_SPEC.replace("vllm_kv_cache_gib: 3}", "vllm_kv_cache_gib: 3, lora_sync: merged, backend: hf}"))
    hf = compile_plan(load_spec(path), device="cuda", cpu_count=2)
    assert hf.lora_sync == "merged" and "VLLM_ENABLE_V1_MULTIPROCESSING" not in hf.env  # no vLLM engine
    path.write_text(CPU_SPEC.replace(", lora: {rank: 12, alpha: 24}", ""))
    full = compile_plan(load_spec(path), device="cuda", cpu_count=2)
    assert (full.lora_sync, full.weight_sync) == (None, "tensors")
