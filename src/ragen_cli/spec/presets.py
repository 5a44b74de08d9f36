"""Algorithm presets from the paper, and where each algorithm value came from.

StarPO-S (RAGEN, arXiv 2504.20073, Sec. 4 and the reference `base.yaml`): keep the 25% of groups
with the highest in-group reward std, decoupled clip 0.2 / 0.28 (DAPO clip-higher), no KL, PPO
with a critic (GAE). Vanilla StarPO (`train_all.sh` USE_BASE): KL 0.001, clip 0.2 / 0.2, no
filter (keep_ratio 1.0), GAE. Both split each rollout batch into 4 optimizer steps (the
reference's ppo_mini_batch_size = train batch / 4), so the PPO ratio moves and clipping acts. The reference adds the KL as a loss with `low_var_kl`
(verl `use_kl_loss`); so does this preset (k1 as a loss would do nothing: its expected
gradient is zero).

A preset only fills the `algorithm` fields the user did not write; the user always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Source = Literal["default", "preset", "user", "--set"]

PRESETS: dict[str, dict[str, Any]] = {
    "starpo-s": {
        "adv_estimator": "gae",
        "clip_low": 0.2,
        "clip_high": 0.28,
        "kl_coef": 0.0,
        "mini_batches": 4,
        "filter": {"metric": "reward_std", "keep_ratio": 0.25, "direction": "top"},
    },
    "starpo": {
        "adv_estimator": "gae",
        "clip_low": 0.2,
        "clip_high": 0.2,
        "kl_coef": 0.001,
        "kl_estimator": "low_var_kl",
        "mini_batches": 4,
        "filter": {"metric": "reward_std", "keep_ratio": 1.0, "direction": "top"},
    },
}


def merge_under(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge: values in `top` win; `base` fills what `top` does not say."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_under(out[key], value)
        else:
            out[key] = value
    return out


def leaf_paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Key paths of the non-mapping values in a nested dict."""
    out: list[tuple[str, ...]] = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.extend(leaf_paths(value, (*prefix, key)))
        else:
            out.append((*prefix, key))
    return out


def _has(data: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def resolve_provenance(
    algorithm_fields: list[tuple[str, ...]],
    preset: str | None,
    user: dict[str, Any],
    overrides: dict[str, Any],
) -> dict[str, Source]:
    """For each algorithm field path ("filter.keep_ratio"), who set its value.

    `user` is the spec file's `algorithm` mapping, `overrides` the `--set algorithm.*` ones
    (nested the same way); a later source wins: default < preset < user < --set.
    """
    preset_values = PRESETS.get(preset or "", {})
    out: dict[str, Source] = {}
    for path in algorithm_fields:
        source: Source = "default"
        if _has(preset_values, path):
            source = "preset"
        if _has(user, path):
            source = "user"
        if _has(overrides, path):
            source = "--set"
        out[".".join(path)] = source
    return out


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: the dotted key paths that provenance and --set use."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
