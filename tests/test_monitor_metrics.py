"""The metrics table: names, per-env patterns, validation."""

import pytest

from ragen_cli.monitor.metrics import METRICS, SECTIONS, env_metric, metric_for, validate_metrics

# Issue 5's "Metrics per step" list, one name each (the table may hold more).
ISSUE_5 = [
    "reward/mean", "reward/std", "reward/min", "reward/max", "train/success", "val/<env>/success",
    "filter/in_group_std_before", "filter/in_group_std_after", "filter/zero_std_frac",
    "filter/kept_frac", "actor/entropy", "actor/grad_norm", "critic/grad_norm",
    "actor/clip_frac_low", "actor/clip_frac_high", "actor/approx_kl", "actor/kl_ref",
    "actor/policy_loss", "critic/value_loss", "critic/explained_var",
    "episode/response_tokens_per_turn", "episode/turns", "episode/actions",
    "episode/valid_action_ratio", "episode/effective_action_ratio", "episode/format_error_ratio",
    "episode/truncated", "timing/rollout_s", "timing/update_s", "timing/sync_s", "timing/step_s",
    "perf/rollout_tokens_per_s", "sync/parity_gap", "actor/lr", "diversity/distinct_2",
    "diversity/identical_share", "train/chose_high_ev",
]


def test_issue_5_metrics_are_all_defined():
    assert [n for n in ISSUE_5 if n not in METRICS] == []


def test_every_entry_is_complete():
    for name, m in METRICS.items():
        assert m.name == name
        assert m.unit and m.meaning.endswith(".") and m.section in SECTIONS, name
        assert name.startswith(m.section + "/")


def test_per_env_pattern_resolves_concrete_names():
    assert metric_for("val/bandit/success") is METRICS["val/<env>/success"]
    assert metric_for("val/sokoban-large/reward") is METRICS["val/<env>/reward"]
    assert metric_for("val/mypkg.envs:Maze/success") is METRICS["val/<env>/success"]
    # The placeholder is one path segment: two segments or none do not match.
    assert metric_for("val/a/b/success") is None
    assert metric_for("val//success") is None
    assert metric_for("reward/mean") is METRICS["reward/mean"]


def test_env_metric_builds_names_and_rejects_bad_input():
    assert env_metric("val/<env>/success", "frozenlake") == "val/frozenlake/success"
    with pytest.raises(KeyError):
        env_metric("reward/mean", "bandit")
    with pytest.raises(ValueError):
        env_metric("val/<env>/success", "has space")


def test_validate_metrics_reports_unknown_and_non_numeric():
    ok = {"step": 3, "time": 1.5, "reward/mean": 0.5, "val/bandit/success": 1, "critic/lr": None}
    assert validate_metrics(ok) == []
    problems = validate_metrics({"reward/avg": 1.0, "actor/entropy": "high", "train/success": True})
    assert len(problems) == 3
    assert "unknown metric 'reward/avg'" in problems[0]
    assert "non-numeric" in problems[1] and "non-numeric" in problems[2]
