"""`ragen validate --preview`: what the base model replies before any training, and what each
reward pays for it (issue 73, item 12).

A few initial states of the training env (its first seeds) and of each validation env, a few
replies each at the training temperature, sampled by the spec's model through the HF backend
(the trainer's own sampling code; no engine to start). For each reply: the reward, each reward
function's value (`reward/fn/<fn>` for a dataset-style env), and whether the format parsed; per
env, the share of groups whose replies got different rewards: a group where every reply scores
the same teaches GRPO nothing (docs/training.md), so a share near 0 means the reward misreads
the model's style or the task is out of its reach, before a step is spent on it.
"""

from __future__ import annotations

from typing import Any


def preview_envs(spec) -> list[tuple[str, Any, int]]:
    """(label, env ref, first seed) of the training env and each validation env."""
    out = [(f"train: {spec.env.train.name}", spec.env.train, spec.env.train.seed)]
    for env in spec.env.val.envs or []:
        out.append((f"val: {env.name}", env, spec.env.val.seed))
    return out


def spread_share(rewards_by_group: list[list[float]]) -> float:
    """Share of groups whose rewards are not all equal (the ones GRPO's advantage can use)."""
    if not rewards_by_group:
        return 0.0
    return sum(len(set(g)) > 1 for g in rewards_by_group) / len(rewards_by_group)


def _short(text: str, width: int = 90) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 3] + "..."


def preview(spec, groups: int = 3, replies: int = 4) -> list[str]:
    """The preview's lines (module docstring)."""
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend

    path = resolve_model(spec.model.name, "float32")
    tok = load_tokenizer(path, spec.model)
    backend = HFBackend(load_causal_lm(path, "float32"), tok)
    lines = [f"preview: {spec.model.name}, {groups} initial states x {replies} replies per env, temperature "
             f"{spec.rollout.temperature:g} (the training temperature), before any training"]
    for label, env, seed in preview_envs(spec):
        trajs = run_rollouts(backend, tok, env, list(range(seed, seed + groups)), replies, spec.rollout,
                             spec.model.max_context, spec.train.seed)
        by_group: dict[int, list[float]] = {}
        lines.append(f"{label}")
        for t in trajs:
            by_group.setdefault(t.group, []).append(t.episode_reward)
            if len(by_group[t.group]) == 1:
                lines.append(f"  seed {t.seed}: {_short(t.turns[0].obs) if t.turns else '(no turn)'}")
            fns = t.info.get("reward_fns") or {}
            paid = "".join(f", {name} {value:g}" if value is not None else f", {name} None" for name, value in fns.items())
            reply = t.turns[0].reply if t.turns else ""
            fmt = "" if not t.turns or t.turns[0].format_ok else " (format error)"
            lines.append(f"    reward {t.episode_reward:g}{paid}{fmt}: {_short(reply)!r}")
        share = spread_share(list(by_group.values()))
        lines.append(f"  groups with reward spread: {sum(len(set(g)) > 1 for g in by_group.values())} of "
                     f"{len(by_group)} ({share:.0%})" + ("  <- no group would teach GRPO anything" if share == 0 else ""))
    return lines
