"""Cross-field checks on a schema-valid RunSpec: rules no single field can express.

Each check returns [(key path, message)]; the loader turns paths into file:line:col.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragen_cli.compile.sizes import size_problems
from ragen_cli.spec.models import RunSpec
from ragen_cli.spec.refs import env_problems, model_problems

Found = list[tuple[str, str]]


def check_sizes(spec: RunSpec) -> Found:
    ds, env = spec.deepspeed, spec.env.train
    return size_problems(
        groups=env.groups,
        group_size=env.group_size,
        keep_ratio=spec.algorithm.filter.keep_ratio,
        world=ds.nodes * ds.procs_per_node,
        micro_batch=spec.train.micro_batch,
        mini_batch=spec.train.mini_batch,
    )


def check_context(spec: RunSpec) -> Found:
    """max_turns x max_tokens_per_turn + prompt_allowance must fit model.max_context."""
    r = spec.rollout
    need = r.max_turns * r.max_tokens_per_turn + r.prompt_allowance
    if need <= spec.model.max_context:
        return []
    return [(
        "rollout.max_tokens_per_turn",
        f"{r.max_turns} turns x {r.max_tokens_per_turn} tokens + {r.prompt_allowance} prompt allowance = "
        f"{need} tokens, more than model.max_context {spec.model.max_context}",
    )]


def check_algorithm(spec: RunSpec) -> Found:
    a = spec.algorithm
    out: Found = []
    if a.bi_level_gae and not a.turn_rewards:
        out.append(("algorithm.bi_level_gae", "needs algorithm.turn_rewards: true (bi-level GAE finds turns by their rewards)"))
    if a.bi_level_gae and a.adv_estimator != "gae":
        out.append(("algorithm.bi_level_gae", f"needs adv_estimator 'gae', got '{a.adv_estimator}'"))
    return out


def check_deepspeed(spec: RunSpec) -> Found:
    """Offload vs ZeRO stage, precision vs device, multi-node layout vs hostfile.

    LoRA trains at every ZeRO stage DeepSpeed 0.19.8 offers: FEASIBILITY.md saw stages 0, 2, 3
    work with peft; stage 1 shards only optimizer state, which LoRA does not change, so it is
    allowed too. LoRA with ZeRO-3 gathers the frozen base weights every forward: slow, but valid.
    """
    ds = spec.deepspeed
    out: Found = []
    if ds.offload == "cpu" and ds.zero_stage == 0:
        out.append(("deepspeed.offload", "offloading optimizer state needs zero_stage 1, 2 or 3 (got 0)"))
    if ds.precision == "fp16" and ds.device == "cpu":
        out.append(("deepspeed.precision", "fp16 does not train on CPU with DeepSpeed; use bf16 or fp32"))
    if ds.device == "cpu" and ds.offload == "cpu":
        out.append(("deepspeed.offload", "offload to CPU means nothing when training on CPU; use offload: none"))
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


def check_refs(spec: RunSpec) -> Found:
    """The model and every env name must resolve on this machine."""
    out = [("model.name", m) for m in model_problems(spec.model.name)]
    out += [("env.train.name", m) for m in env_problems(spec.env.train.name, spec.env.train.config)]
    for i, ref in enumerate(spec.env.val.envs):
        out += [(f"env.val.envs[{i}].name", m) for m in env_problems(ref.name, ref.config)]
    return out


CHECKS = (check_sizes, check_context, check_algorithm, check_deepspeed, check_refs)


def cross_field_problems(spec: RunSpec) -> Found:
    """Every cross-field problem of `spec`, in a stable order."""
    return [found for check in CHECKS for found in check(spec)]
