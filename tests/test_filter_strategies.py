"""RAGEN-2's rollout-filter choices (algorithm.filter: strategy, metric, include_zero, top_p_mode,
empty_stop_steps): the pure selection rule with hand-derived values, the spec rules, the sizes
a varying kept count implies, and a real tiny-random run whose filter keeps nothing."""

from __future__ import annotations

import json
from pathlib import Path
import math

import pytest
import torch

from ragen_cli.algos.filter import filter_groups, group_scores, select_groups
from ragen_cli.spec.sizes import derive_sizes, filter_kept_groups, size_problems

# Five groups' scores (index = group): ordered high to low 3 (1.0), 0 (0.5), 2 (0.25), 4 (0.25), 1 (0).
SCORES = torch.tensor([0.5, 0.0, 0.25, 1.0, 0.25])


def kept(*args, **kw) -> list[int]:
    return select_groups(SCORES, *args, **kw).nonzero().squeeze(-1).tolist()


def test_top_k_fraction_of_all_groups_with_and_without_zero():
    assert kept("top_k", 0.4) == [0, 3]  # floor(0.4 x 5) = 2 best: 1.0, 0.5
    assert kept("top_k", 0.4, "bottom") == [1, 2]  # 0 then 0.25 (group 2 before the tied group 4)
    assert kept("top_k", 0.4, "bottom", include_zero=False) == [2, 4]  # group 1 (score 0) is no candidate
    assert kept("top_k", 0.1) == [3]  # floor(0.5) = 0 -> at least one


def test_top_k_abs_counts_groups_ties_to_the_lower_index():
    assert kept("top_k_abs", 3) == [0, 2, 3]  # 1.0, 0.5, then 0.25 of group 2 (not 4)
    assert kept("top_k_abs", 10) == [0, 1, 2, 3, 4]
    assert kept("top_k_abs", 10, include_zero=False) == [0, 2, 3, 4]


def test_top_p_linear_adds_scores_until_the_share_of_the_total():
    # total 2.0; value 0.6: threshold 1.2 - 0.01 = 1.19 -> 1.0 (< 1.19), 1.0 + 0.5 = 1.5 -> groups 3, 0
    assert kept("top_p", 0.6) == [0, 3]
    # value 0.5: threshold 0.99, reached by 1.0 alone
    assert kept("top_p", 0.5) == [3]
    # value 0.9: threshold 1.79: 1.0, 1.5, 1.75, 2.0 -> the four non-zero groups (stops at score 0)
    assert kept("top_p", 0.9) == [0, 2, 3, 4]
    assert kept("top_p", 1.0) == [0, 1, 2, 3, 4]  # value 1 keeps every candidate
    # eps 0: threshold exactly 1.0 x 0.5 = 1.0 -> 1.0 reaches it
    assert kept("top_p", 0.5, selection_eps=0.0) == [3]


def test_top_p_linear_keeps_nothing_when_every_score_is_zero():
    # all-equal rewards -> every std 0: the walk stops at the first score (<= 0) with sum 0, which
    # reaches the threshold 0.9 x 0 - 0.01 with no group: an empty step
    assert not select_groups(torch.zeros(4), "top_p", 0.9).any()
    assert not select_groups(torch.zeros(4), "top_k", 0.5, include_zero=False).any()
    assert select_groups(torch.zeros(4), "top_k", 0.5).sum() == 2  # with zeros allowed top_k still keeps 2


def test_top_p_softmax_keeps_the_smallest_prefix_reaching_the_mass():
    e = [math.exp(x) for x in SCORES.tolist()]
    p = sorted((v / sum(e) for v in e), reverse=True)  # 0.3426, 0.2078, 0.1618, 0.1618, 0.1260
    assert p[0] == pytest.approx(0.3426, abs=1e-4) and p[0] + p[1] == pytest.approx(0.5503, abs=1e-4)
    assert kept("top_p", 0.3, top_p_mode="softmax") == [3]
    assert kept("top_p", 0.5, top_p_mode="softmax") == [0, 3]  # 0.3426 < 0.5 <= 0.5503
    assert kept("top_p", 0.6, top_p_mode="softmax") == [0, 2, 3]  # 0.5503 < 0.6 <= 0.7122
    # bottom: softmax of minus the scores, so group 1 (score 0) has the most mass: e^0 / sum e^-s
    eb = [math.exp(-x) for x in SCORES.tolist()]
    assert eb[1] / sum(eb) == pytest.approx(0.2831, abs=1e-4)  # 1 / (0.6065 + 1 + 2 x 0.7788 + 0.3679)
    assert kept("top_p", 0.25, "bottom", top_p_mode="softmax") == [1]


def test_min_p_keeps_what_is_close_to_the_best():
    assert kept("min_p", 0.5) == [0, 3]  # >= 0.5 x 1.0
    assert kept("min_p", 0.25) == [0, 2, 3, 4]  # >= 0.25
    assert kept("min_p", 0.5, "bottom") == [1]  # <= 0 / 0.5
    assert kept("min_p", 0.5, "bottom", include_zero=False) == [0, 2, 4]  # <= 0.25 / 0.5 = 0.5


def test_group_scores_std_mean_sum():
    inverse = torch.tensor([0, 0, 1, 1, 1])
    values = torch.tensor([1.0, 3.0, 2.0, 2.0, 5.0])
    assert group_scores(values, inverse, 2, "std").tolist() == pytest.approx([1.0, math.sqrt(2.0)])  # pop. var (1+1+4)/3
    assert group_scores(values, inverse, 2, "mean").tolist() == pytest.approx([2.0, 3.0])
    assert group_scores(values, inverse, 2, "sum").tolist() == pytest.approx([4.0, 9.0])


def test_filter_groups_ranks_by_another_value_but_reports_reward_std():
    # rewards: group 0 [0, 1] (std 0.5), group 1 [1, 1] (std 0); lengths: group 0 [2, 2], group 1 [8, 6]
    rewards = torch.tensor([0.0, 1.0, 1.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    lengths = torch.tensor([2.0, 2.0, 8.0, 6.0])
    keep, stats = filter_groups(rewards, group, 0.5, values=lengths, stat="mean")  # longest mean: group 1
    assert keep.tolist() == [2, 3]
    assert stats["in_group_std_after"] == 0.0 and stats["in_group_std_before"] == 0.25
    keep, stats = filter_groups(rewards, group, 0.5, strategy="top_p", value=0.9)  # std: only group 0 > 0
    assert keep.tolist() == [0, 1] and stats["kept_groups"] == 1.0
    keep, stats = filter_groups(torch.ones(4), group, 0.5, strategy="top_p", value=0.9)
    assert keep.numel() == 0 and stats["kept_fraction"] == 0.0 and stats["in_group_std_after"] == 0.0
    with pytest.raises(ValueError, match="top_k keeps keep_ratio"):
        filter_groups(rewards, group, 0.5, strategy="top_k", value=0.3)
    with pytest.raises(ValueError, match="unknown filter strategy"):
        select_groups(SCORES, "best", 0.5)


def test_select_kept_reads_entropy_and_length_from_the_trajectories():
    from types import SimpleNamespace

    from ragen_cli.rollout.types import Trajectory
    from ragen_cli.train.stages import select_kept

    def traj(group, logps, reward):
        # prompt token (mask 0, log-prob 0) + sampled tokens with their sampler log-probs
        return Trajectory(input_ids=[1] * (1 + len(logps)), loss_mask=[0] + [1] * len(logps),
                          old_logprobs=[0.0] + logps, turn_rewards=[reward], task_reward=reward, group=group)

    # entropy estimates (mean -log p): group 0: 2.0 and 1.0 (mean 1.5, std 0.5); group 1: 0.5 and 0.5
    trajs = [traj(0, [-1.0, -3.0], 0.0), traj(0, [-1.0], 1.0), traj(1, [-0.5, -0.5, -0.5], 1.0), traj(1, [-0.5], 1.0)]
    f = SimpleNamespace(metric="entropy", reward="task", direction="top", strategy="top_k", value=None,
                        include_zero=True, top_p_mode="linear", selection_eps=0.01)
    out, _ = select_kept(trajs, f, 0.5)
    assert out == trajs[:2]  # mean entropy 1.5 > 0.5
    f.direction = "bottom"
    assert select_kept(trajs, f, 0.5)[0] == trajs[2:]
    f.metric, f.direction = "length", "top"  # lengths 2, 1 (mean 1.5) vs 3, 1 (mean 2)
    assert select_kept(trajs, f, 0.5)[0] == trajs[2:]
    f.metric, f.strategy, f.value = "entropy_std", "min_p", 0.5  # stds 0.5 and 0: >= 0.25 keeps group 0
    assert select_kept(trajs, f, 0.5)[0] == trajs[:2]


def test_sizes_with_a_varying_kept_count():
    assert filter_kept_groups(8, 0.25) == 2
    assert filter_kept_groups(8, 0.25, "top_k_abs", 3) == 3
    assert filter_kept_groups(8, 0.25, "top_k_abs", 30) == 8
    assert filter_kept_groups(8, 0.25, "top_k", None, include_zero=False) is None
    assert filter_kept_groups(8, 0.25, "top_p", 0.9) is None and filter_kept_groups(8, 0.25, "min_p", 0.5) is None
    s = derive_sizes(groups=8, group_size=4, keep_ratio=0.25, nodes=1, procs_per_node=1, micro_batch=4,
                     mini_batch=None, ppo_epochs=1, online_k=1, steps=10, strategy="top_p", value=0.9)
    assert (s.kept_groups, s.kept_trajectories, s.kept_groups_vary) == (8, 32, 1)  # the most it can keep
    common = dict(groups=8, keep_ratio=0.25, micro_batch=4, mini_batch=None, strategy="top_p", value=0.9)
    assert size_problems(group_size=4, world=2, **common) == []
    (path, msg), = size_problems(group_size=3, world=2, **common)
    assert path == "env.train.group_size" and "multiple of the world size 2" in msg
    # fixed top_k_abs: 3 groups x 4 = 12 kept, not a multiple of micro 8
    (path, msg), = size_problems(group_size=4, world=1, groups=8, keep_ratio=0.25, micro_batch=8, mini_batch=None,
                                 strategy="top_k_abs", value=3)
    assert "top_k_abs 3 of 8 = 3 groups x 4 = 12" in msg


@pytest.mark.parametrize(("sets", "key", "words"), [
    (["algorithm.filter.value=0.5"], "algorithm.filter.value", "top_k keeps keep_ratio"),
    (["algorithm.filter.strategy=top_p"], "algorithm.filter.strategy", "needs algorithm.filter.value"),
    (["algorithm.filter.strategy=top_k_abs", "algorithm.filter.value=2.5"], "algorithm.filter.value", "whole number"),
    (["algorithm.filter.strategy=min_p", "algorithm.filter.value=2"], "algorithm.filter.value", "fraction in (0, 1]"),
])
def test_spec_rules_name_the_field(sets, key, words):
    from ragen_cli.spec.errors import SpecError
    from ragen_cli.spec.loader import load_spec

    with pytest.raises(SpecError) as err:
        load_spec("specs/bandit.yaml", sets)
    text = err.value.render()
    assert "1 problem" in text and f"{key}: " in text and words in text


def test_shipped_spec_accepts_each_strategy():
    from ragen_cli.spec.checks import check_filter
    from ragen_cli.spec.loader import load_spec

    for sets in (["algorithm.filter.strategy=top_p", "algorithm.filter.value=0.9", "algorithm.filter.include_zero=false"],
                 ["algorithm.filter.strategy=top_k_abs", "algorithm.filter.value=2"],
                 ["algorithm.filter.strategy=min_p", "algorithm.filter.value=0.5", "algorithm.filter.metric=entropy"]):
        assert check_filter(load_spec("specs/bandit.yaml", sets)) == []


@pytest.mark.slow
def test_a_filter_that_keeps_nothing_skips_the_update_and_stops(tmp_path, tiny_model_dir, capsys):
    """Greedy sampling makes a group's rollouts identical, so every reward std is 0 and top_p
    (linear, 0.9) keeps no group: no update, filter/empty_steps counts 1, 2, and
    empty_stop_steps 2 ends the run at step 2 with a checkpoint and a message."""
    from test_train_e2e import run_tiny

    out = tmp_path / "empty"
    summary = run_tiny(out, [
        "rollout.temperature=0", "env.train.groups=4", "algorithm.adv_estimator=grpo", "model.lora=null",
        "algorithm.filter.strategy=top_p", "algorithm.filter.value=0.9", "algorithm.filter.empty_stop_steps=2",
        "monitor.health.no_signal_steps=0", "train.steps=4", "checkpoint.every=0",
    ])
    assert summary["stopped"] is True and summary["step"] == 2
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["filter/kept_frac"], m["filter/empty_steps"]) for m in lines] == [(1, 0.0, 1), (2, 0.0, 2)]
    assert all("actor/grad_norm" not in m for m in lines)  # no update was made
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2"]
    state = json.loads((out / "checkpoints" / "step-2" / "state.json").read_text())
    assert state["empty_steps"] == 2
    said = capsys.readouterr().out
    assert "the filter kept no group in the last 2 steps (algorithm.filter.empty_stop_steps 2)" in said


def test_the_stop_message_says_whether_a_settled_run_is_solved_or_dead():
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.stages import filter_exhausted

    spec = load_spec(Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml")  # include_zero false, stop after 5
    assert filter_exhausted(spec, 4, 0.0) == ""
    dead = filter_exhausted(spec, 5, 0.0)
    assert "kept no group in the last 5 steps" in dead and "train success 0.00" in dead and "the run is dead" in dead
    assert "keep_best" in dead
    solved = filter_exhausted(spec, 5, 1.0)
    assert "the run is solved" in solved and "Try other seeds" not in solved
    plain = filter_exhausted(load_spec(Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml",
                                       ["algorithm.filter.include_zero=true"]), 5, 0.0)
    assert "lower algorithm.filter.value" in plain


@pytest.mark.slow
def test_a_run_stopped_by_the_filter_is_validated_at_its_last_step(tmp_path, tiny_model_dir):
    """The same stop with validation every 3 steps: the run ends at step 2, off the schedule, and
    still validates there (its last metrics line has the validation success), so its final
    result and best checkpoint are known."""
    from test_train_e2e import run_tiny

    out = tmp_path / "empty-val"
    run_tiny(out, [
        "rollout.temperature=0", "env.train.groups=4", "algorithm.adv_estimator=grpo", "model.lora=null",
        "algorithm.filter.strategy=top_p", "algorithm.filter.value=0.9", "algorithm.filter.empty_stop_steps=2",
        "monitor.health.no_signal_steps=0", "train.steps=4", "checkpoint.every=0", "env.val.every=3",
        "env.val.episodes=4",
    ])
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines if "val/bandit/success" in m] == [0, 2]
