"""Cross-field checks on a schema-valid RunSpec: rules no single field can express.

Each check returns [(key path, message)]; the loader turns paths into file:line:col.
"""

from __future__ import annotations

import importlib.util
import re
import os
from pathlib import Path

from ragen_cli.spec.sizes import derive_sizes, filter_args, size_problems
from ragen_cli.device import resolved
from ragen_cli.spec.models import RunSpec
from ragen_cli.spec.refs import env_problems, model_problems

Found = list[tuple[str, str]]


def check_sizes(spec: RunSpec) -> Found:
    ds, env = spec.deepspeed, spec.env.train
    return size_problems(
        groups=env.groups,
        group_size=env.group_size,
        world=ds.world,
        micro_batch=spec.train.micro_batch,
        mini_batch=spec.train.mini_batch,
        mini_batches=spec.algorithm.mini_batches,
        **filter_args(spec.algorithm.filter),
    )


def compiled_sizes(spec: RunSpec):
    """`derive_sizes` of a spec whose sizes divide (`check_sizes` found nothing)."""
    ds, env, a = spec.deepspeed, spec.env.train, spec.algorithm
    return derive_sizes(
        groups=env.groups, group_size=env.group_size, nodes=ds.nodes,
        procs_per_node=ds.procs_per_node, micro_batch=spec.train.micro_batch, mini_batch=spec.train.mini_batch,
        ppo_epochs=a.ppo_epochs, online_k=a.online_k, steps=spec.train.steps, mini_batches=a.mini_batches, **filter_args(a.filter),
    )


def check_schedule(spec: RunSpec) -> Found:
    """Warm-up is counted in optimizer steps and must end within the run."""
    sizes = compiled_sizes(spec)
    if spec.train.warmup_steps <= sizes.total_optimizer_steps:
        return []
    return [(
        "train.warmup_steps",
        f"{spec.train.warmup_steps} warm-up steps, but the run makes only {sizes.total_optimizer_steps} "
        f"optimizer steps ({spec.train.steps} steps x {sizes.optimizer_steps_per_step} per step)",
    )]


def check_context(spec: RunSpec) -> Found:
    """The turns the trainer reads at once (max_turns, or context_window with update_context
    window) x max_tokens_per_turn + prompt_allowance must fit model.max_context; a per-turn
    update needs a window to train on."""
    r = spec.rollout
    if r.update_context == "window" and r.context_window is None:
        return [("rollout.update_context", "window trains each turn on the windowed prompt it was sampled from; "
                 "set rollout.context_window (1: the current turn only, RAGEN-2's single_turn)")]
    turns = min(r.max_turns, r.context_window) if r.update_context == "window" else r.max_turns
    need = turns * r.max_tokens_per_turn + r.prompt_allowance
    if need <= spec.model.max_context:
        return []
    return [(
        "rollout.max_tokens_per_turn",
        f"{turns} turns x {r.max_tokens_per_turn} tokens + {r.prompt_allowance} prompt allowance = "
        f"{need} tokens, more than model.max_context {spec.model.max_context}",
    )]


def check_parity(spec: RunSpec) -> Found:
    """A probe window holds at least one predicted token: 0 (whole rows) or 2 and more."""
    if spec.rollout.parity_window == 1:
        return [("rollout.parity_window", "a 1-token window predicts no token to compare; use 0 (whole "
                 "trajectories) or at least 2")]
    return []


def check_overlap(spec: RunSpec) -> Found:
    """Rollouts that overlap the update (`rollout.max_staleness`) need an engine of their own that
    stays awake during the update, and the importance correction of the lag."""
    r = spec.rollout
    if r.max_staleness == 0:
        return []
    out: Found = []
    if r.backend == "hf":
        out.append(("rollout.max_staleness", "needs the vLLM backend: the HF backend samples with the trainer's own "
                    "module, which the update is changing; set rollout.backend: vllm (or auto) or max_staleness: 0"))
    if r.sleep == "on":
        out.append(("rollout.sleep", "cannot be on with rollout.max_staleness > 0: the engine generates during the "
                    "update; use auto (off with overlap) or max_staleness: 0"))
    if spec.algorithm.rollout_is == "off":
        out.append(("algorithm.rollout_is", "cannot be off with rollout.max_staleness > 0: the update trains on "
                    "trajectories an older policy drew, and the importance weights are what correct for it"))
    return out


def check_answer_example(spec: RunSpec) -> Found:
    """A fading example needs an example to fade."""
    r = spec.rollout
    if r.answer_example_steps is None or r.answer_example != "none":
        return []
    return [(
        "rollout.answer_example_steps",
        "fades the answer example out, but rollout.answer_example is none: set it to first or random "
        "(or random-per-rollout), or remove answer_example_steps",
    )]


def check_algorithm(spec: RunSpec) -> Found:
    a = spec.algorithm
    out: Found = []
    if a.bi_level_gae and not a.turn_rewards:
        out.append(("algorithm.bi_level_gae", "needs algorithm.turn_rewards: true (bi-level GAE finds turns by their rewards)"))
    if a.bi_level_gae and a.adv_estimator != "gae":
        out.append(("algorithm.bi_level_gae", f"needs adv_estimator 'gae', got '{a.adv_estimator}'"))
    if a.turn_rewards and a.adv_estimator == "reinforce":
        out.append(("algorithm.turn_rewards", "is not implemented for adv_estimator 'reinforce'; use grpo or gae"))
    if a.kl_coef > 0 and a.kl_estimator == "k1":
        out.append(("algorithm.kl_estimator", "k1 used as a loss has zero expected gradient (E_pi[grad log pi] = 0): "
                    "the KL term would do nothing; use low_var_kl (verl's default for a KL loss) or k3"))
    return out


def check_filter(spec: RunSpec) -> Found:
    """Each strategy has its own threshold: top_k reads keep_ratio, the others `value`."""
    f = spec.algorithm.filter
    if f.strategy == "top_k":
        return [] if f.value is None else [(
            "algorithm.filter.value", "top_k keeps keep_ratio of the groups and reads no value: set keep_ratio, "
            "or choose strategy top_k_abs, top_p or min_p")]
    if f.value is None:
        return [("algorithm.filter.strategy", f"{f.strategy} needs algorithm.filter.value ("
                 + ("a number of groups" if f.strategy == "top_k_abs" else "a fraction in (0, 1]") + ")")]
    if f.strategy == "top_k_abs" and f.value != int(f.value):
        return [("algorithm.filter.value", f"top_k_abs keeps a whole number of groups, got {f.value:g}")]
    if f.strategy != "top_k_abs" and f.value > 1:
        return [("algorithm.filter.value", f"{f.strategy} takes a fraction in (0, 1], got {f.value:g}")]
    return []


def check_deepspeed(spec: RunSpec) -> Found:
    """Offload vs ZeRO stage, precision vs device, multi-node layout vs hostfile.

    LoRA trains at stages 0-2 (0 and 2 work with peft; stage 1 shards only
    optimizer state, which LoRA does not change). ZeRO-3 is refused: nothing gathers its
    partitioned parameters for the weight sync, the merged LoRA weights, checkpoints or export.
    """
    ds = spec.deepspeed
    out: Found = []
    if ds.offload == "cpu" and ds.zero_stage == 0:
        out.append(("deepspeed.offload", "offloading optimizer state needs zero_stage 1 or 2 (got 0)"))
    device = resolved(ds.device)  # `auto` on a machine without a GPU trains on the CPU: same rules
    how = " (device auto: this machine has no GPU)" if ds.device == "auto" and device == "cpu" else ""
    if ds.precision == "fp16" and device == "cpu":
        out.append(("deepspeed.precision", f"fp16 does not train on CPU with DeepSpeed{how}; use bf16 or fp32"))
    if device == "cpu" and ds.offload == "cpu":
        out.append(("deepspeed.offload", f"offload to CPU means nothing when training on CPU{how}; use offload: none"))
    if ds.zero_stage == 3:
        out.append(("deepspeed.zero_stage", "ZeRO-3 is not supported yet: the weight sync to the rollout engine, "
                    "merged LoRA weights, checkpoints' model/ and `ragen export` read each rank's parameters, "
                    "which ZeRO-3 partitions across ranks (they would read empty shards); use zero_stage 2 "
                    "(with offload: cpu on a GPU to save optimizer memory)"))
    if ds.nodes > 1 and not ds.hostfile:
        out.append(("deepspeed.nodes", f"{ds.nodes} nodes need deepspeed.hostfile (lines `hostname slots=N`)"))
    if ds.hostfile:
        out.extend(_hostfile_problems(ds.hostfile, ds.nodes))
    return out


def _hostfile_problems(hostfile: str, nodes: int) -> Found:
    """DeepSpeed's hostfile format: one `hostname slots=N` per line, `#` comments."""
    path = Path(os.path.expanduser(hostfile))
    if not path.is_file():
        return [("deepspeed.hostfile", f"no such file: {hostfile} (relative paths start at {Path.cwd()})")]
    lines = [ln.split("#")[0].strip() for ln in path.read_text().splitlines()]
    lines = [ln for ln in lines if ln]
    bad = [ln for ln in lines if len(ln.split()) != 2 or not _slots_ok(ln.split()[1])]
    if bad:
        return [("deepspeed.hostfile", f"{hostfile}: bad line '{b}' (expected `hostname slots=N`)") for b in bad]
    if len(lines) < nodes:
        return [("deepspeed.hostfile", f"{hostfile} lists {len(lines)} host(s), fewer than deepspeed.nodes = {nodes}")]
    return []


def _slots_ok(word: str) -> bool:
    key, _, value = word.partition("=")
    return key == "slots" and value.isdigit() and int(value) > 0


# logger -> the modules it writes with (space-separated; MLflow's local store is a SQLite file) and
# what to pip install for them (the `trackers` extra of pyproject.toml pins the tested versions)
LOGGER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio",
                   "mlflow": "mlflow sqlalchemy alembic"}
LOGGER_PIP = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio",
              "mlflow": "mlflow-skinny sqlalchemy alembic"}


def check_loggers(spec: RunSpec) -> Found:
    """A logger other than jsonl needs its packages installed here (found without importing them)."""
    out: Found = []
    for i, logger in enumerate(spec.monitor.loggers):
        missing = [m for m in LOGGER_PACKAGES.get(logger, "").split() if not _installed(m)]
        if missing:
            out.append((f"monitor.loggers[{i}]", f"logger '{logger}' needs the '{missing[0]}' package: "
                                                 f"pip install {LOGGER_PIP.get(logger, missing[0])} "
                                                 f"(all trackers: pip install 'ragen-cli[trackers]')"))
    return out


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or hidden install, a module without a spec
        return False


def check_warm_start(spec: RunSpec) -> Found:
    """One source of demonstrations; its seeds are not validation seeds of the same env; no KL
    term (its reference would be the model before the warm start)."""
    w = spec.warm_start
    if w is None:
        return []
    sources = [k for k in ("demos", "policy", "rejection") if getattr(w, k)]
    if len(sources) != 1:
        return [("warm_start", "name one source of demonstrations: demos (a file), policy (module:function) or "
                 f"rejection: true; got {', '.join(sources) or 'none'}")]
    out: Found = []
    if spec.algorithm.kl_coef > 0:
        out.append(("algorithm.kl_coef", "a warm start with a KL term: its reference model would be the model before "
                    "the warm start, not its checkpoint; set kl_coef: 0 (StarPO-S drops it) or remove warm_start"))
    if w.policy is not None:
        from ragen_cli.envs.base import import_ref

        try:
            if not callable(import_ref(w.policy, "warm_start.policy")):
                out.append(("warm_start.policy", f"{w.policy} is not callable"))
        except ValueError as err:
            out.append(("warm_start.policy", str(err)))
    if w.demos is not None and not Path(w.demos).expanduser().exists():
        out.append(("warm_start.demos", f"no such file or folder: {w.demos} (relative paths start at {Path.cwd()})"))
    if w.demos is None:
        first = warm_seed(spec)
        played = set(range(first, first + w.episodes * (w.rounds if w.rejection else 1)))
        train = spec.env.train
        for i, ref in enumerate(spec.env.val.envs or [train]):
            same = ref.name == train.name and dict(ref.config) == dict(train.config)
            seen = played & set(range(spec.env.val.seed, spec.env.val.seed + spec.env.val.episodes))
            if same and seen:
                out.append(("warm_start.seed", f"the warm start plays seeds {first}..{first + w.episodes - 1}, which "
                            f"include {len(seen)} validation seeds of the same env (from {min(seen)}): move "
                            "warm_start.seed so validation measures episodes the warm start never saw"))
    return out


def warm_seed(spec: RunSpec) -> int:
    """The first seed the warm start plays: warm_start.seed, or env.train.seed + 1000000."""
    w = spec.warm_start
    return w.seed if w is not None and w.seed is not None else spec.env.train.seed + 1_000_000


def check_refs(spec: RunSpec) -> Found:
    """The model and every env name must resolve on this machine."""
    out = [("model.name", m) for m in model_problems(spec.model.name)]
    out += [(_env_key("env.train", spec.env.train.config, m), m) for m in env_problems(spec.env.train.name, spec.env.train.config)]
    for i, ref in enumerate(spec.env.val.envs):
        out += [(_env_key(f"env.val.envs[{i}]", ref.config, m), m) for m in env_problems(ref.name, ref.config)]
    return out


def _env_key(prefix: str, config: dict, message: str) -> str:
    """Where an env problem belongs: the config key the message names (the first word after the
    env's name, "env 'bandit': high_arm_prob must be ...", quoted, "unknown key 'x'", or in
    brackets, "(prompt_field)"), else the key whose text value the message quotes (a data file's
    path, `rewards[1]`'s function), else the env's `name`."""
    text = message.split(": ", 1)[-1]
    named = [k for k in config if re.match(rf"{re.escape(str(k))}\b", text) or f"'{k}'" in text or f"({k})" in text]
    if named:
        return f"{prefix}.config.{named[0]}"
    if re.match(r"\w+ is required", text):  # a key the config lacks: the config mapping itself
        return f"{prefix}.config"
    for key, value in config.items():
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            if isinstance(item, str) and item and (f"'{item}'" in text or f" {item} " in f" {text} " or f"{item}:" in text):
                return f"{prefix}.config.{key}" + (f"[{i}]" if i is not None else "")
    return f"{prefix}.name"


# What the checks above enforce, one line each (docs/spec.md lists these).
RULES = (
    "Kept trajectories, floor(keep_ratio x P) groups (at least 1) x N, are at least one micro batch on every "
    "process (micro_batch x nodes x procs_per_node).",
    "With algorithm.mini_batches M > 1 and no train.mini_batch, the kept trajectories are a multiple of M x world "
    "size, and a mini batch's rows per process split into micro batches (a micro batch is at most those rows).",
    "Without mini_batch (and M = 1), the kept trajectories are a multiple of micro_batch x world size; with it, mini_batch is "
    "such a multiple and divides the kept trajectories.",
    "A filter that keeps a varying number of groups (top_p, min_p, include_zero false) needs group_size to be a "
    "multiple of the world size (and mini_batch, if set, a multiple of micro_batch x world size).",
    "algorithm.filter: top_k reads keep_ratio and no value; top_k_abs needs a whole number value; top_p and min_p "
    "a value in (0, 1].",
    "train.warmup_steps is at most the run's optimizer steps (steps x optimizer steps per step).",
    "max_turns x max_tokens_per_turn + prompt_allowance fits model.max_context; with rollout.update_context "
    "window, min(max_turns, context_window) turns instead, and context_window must be set. These batch rules count "
    "trajectories; with update_context window the update trains per-turn rows, padded to a multiple of the world size.",
    "rollout.parity_window is 0 (whole trajectories) or at least 2.",
    "bi_level_gae needs turn_rewards: true and adv_estimator: gae; turn_rewards works with gae and grpo, not reinforce.",
    "offload: cpu needs zero_stage 1 or 2 and a CUDA device; fp16 does not train on device: cpu. "
    "zero_stage 3 is refused (partitioned parameters are not gathered for the weight sync, LoRA merge, "
    "checkpoints and export). LoRA is allowed at stages 0-2.",
    "nodes > 1 needs a hostfile; a hostfile must exist, hold `hostname slots=N` lines, and list at least `nodes` hosts; "
    "the run directory (output.dir) must be on a filesystem every node mounts at the same path (each rank "
    "checks at start, and stops naming its host if it cannot see the run's spec and plan).",
    "Each logger besides jsonl has its packages installed (tensorboard; wandb, trackio, mlflow: `pip install 'ragen-cli[trackers]'`).",
    "model.name is a built-in, a local directory with config.json, or a hub id org/name.",
    "Every env (train and val) resolves and accepts its config (`ragen envs`).",
    "warm_start names one source (demos, policy or rejection: true), plays no validation seed of the same env, and "
    "runs with algorithm.kl_coef 0.",
)

CHECKS = (check_sizes, check_context, check_parity, check_overlap, check_answer_example, check_algorithm, check_filter, check_deepspeed, check_loggers, check_warm_start, check_refs)


def cross_field_problems(spec: RunSpec) -> Found:
    """Every cross-field problem of `spec`, in a stable order (schedule only once sizes divide)."""
    sizes = check_sizes(spec)
    rest = [found for check in CHECKS[1:] for found in check(spec)]
    return sizes + (check_schedule(spec) if not sizes else []) + rest
