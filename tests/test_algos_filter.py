"""algos/filter.py: the StarPO-S in-group reward-std filter keeps exactly the right groups."""

from __future__ import annotations

import pytest
import torch

from ragen_cli.algos.filter import filter_groups, kept_group_count

T_ = torch.tensor

# G = 4 groups of N = 2, population stds by hand:
#   group 0 [0, 0] -> 0;  group 1 [0, 1] -> 0.5;  group 2 [1, 1] -> 0;  group 3 [0, 0.5] -> 0.25.
REWARDS = T_([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.5])
GROUP = T_([0, 0, 1, 1, 2, 2, 3, 3])


def test_top_keeps_highest_std_groups_and_reports_stats():
    # keep floor(0.5 * 4) = 2 groups: stds 0.5 (group 1) and 0.25 (group 3) -> trajectories 2, 3, 6, 7.
    keep, stats = filter_groups(REWARDS, GROUP, 0.5, "top")
    assert keep.dtype == torch.long and keep.tolist() == [2, 3, 6, 7]
    assert stats == pytest.approx(
        {
            "in_group_std_before": (0 + 0.5 + 0 + 0.25) / 4,  # 0.1875
            "in_group_std_after": (0.5 + 0.25) / 2,  # 0.375
            "zero_std_frac": 0.5,  # groups 0 and 2
            "kept_groups": 2.0,
            "kept_fraction": 0.5,
        }
    )


def test_bottom_keeps_lowest_std_and_breaks_ties_by_lower_group():
    # bottom, 2 groups: groups 0 and 2 (both std 0) -> 0, 1, 4, 5.
    assert filter_groups(REWARDS, GROUP, 0.5, "bottom")[0].tolist() == [0, 1, 4, 5]
    # bottom, 1 group: tie between groups 0 and 2 at std 0 -> the lower id, group 0.
    keep, stats = filter_groups(REWARDS, GROUP, 0.25, "bottom")
    assert keep.tolist() == [0, 1] and stats["in_group_std_after"] == 0.0


def test_top_tie_keeps_lower_group_id():
    # groups 0 and 1 both [0, 1] (std 0.5), group 2 [2, 2] (0); keep floor(0.34 * 3) = 1 -> group 0.
    keep, _ = filter_groups(T_([0.0, 1.0, 1.0, 0.0, 2.0, 2.0]), T_([0, 0, 1, 1, 2, 2]), 0.34, "top")
    assert keep.tolist() == [0, 1]


def test_many_ties_keep_the_lowest_group_ids():
    # 32 groups of 2: groups 0-15 all [0, 1] (std 0.5), groups 16-31 all [1, 1] (std 0).
    # top floor(0.25 * 32) = 8 -> groups 0-7 (trajectories 0-15); bottom 8 -> groups 16-23.
    rewards = T_([0.0, 1.0] * 16 + [1.0, 1.0] * 16)
    group = torch.arange(32).repeat_interleave(2)
    assert filter_groups(rewards, group, 0.25, "top")[0].tolist() == list(range(16))
    assert filter_groups(rewards, group, 0.25, "bottom")[0].tolist() == list(range(32, 48))


def test_keeps_at_least_one_group_and_all_at_ratio_one():
    # floor(0.1 * 4) = 0 -> at least 1: the top group is group 1.
    assert filter_groups(REWARDS, GROUP, 0.1, "top")[0].tolist() == [2, 3]
    keep, stats = filter_groups(REWARDS, GROUP, 1.0, "top")
    assert keep.tolist() == list(range(8)) and stats["in_group_std_after"] == pytest.approx(0.1875)


def test_arbitrary_interleaved_group_ids_keep_batch_order():
    # ids 9 and 5 interleaved; group 5 rewards [0, 0] (std 0), group 9 [1, 3] (std 1) -> keep 9: idx 1, 3.
    keep, stats = filter_groups(T_([0.0, 1.0, 0.0, 3.0]), T_([5, 9, 5, 9]), 0.5, "top")
    assert keep.tolist() == [1, 3] and stats["in_group_std_after"] == 1.0


def test_unequal_group_sizes_population_std():
    # group 0 [0, 3, 3]: mean 2, pop var (4 + 1 + 1) / 3 = 2 -> std 1.41421; group 1 [0, 2]: std 1;
    # group 2 alone: 0. Top 1 -> group 0.
    keep, stats = filter_groups(T_([0.0, 3.0, 3.0, 0.0, 2.0, 7.0]), T_([0, 0, 0, 1, 1, 2]), 0.34, "top")
    assert keep.tolist() == [0, 1, 2]
    assert stats["in_group_std_after"] == pytest.approx(2**0.5)
    assert stats["zero_std_frac"] == pytest.approx(1 / 3)


def test_equal_rewards_that_do_not_average_exactly_are_zero_std():
    _, stats = filter_groups(T_([0.1, 0.1, 0.1, 0.7, 0.7, 0.7]), T_([0, 0, 0, 1, 1, 1]), 0.5, "top")
    assert stats["zero_std_frac"] == 1.0 and stats["in_group_std_before"] == 0.0


def test_kept_group_count_floor_with_round_off_slack():
    assert kept_group_count(8, 0.25) == 2  # RAGEN default: P = 8, ratio 0.25
    assert kept_group_count(100, 0.29) == 29  # 0.29 * 100 = 28.999999999999996 in floating point
    assert kept_group_count(10, 0.35) == 3  # floor, not round
    assert kept_group_count(3, 1.0) == 3


@pytest.mark.parametrize(
    "rewards,group,ratio,direction,msg",
    [
        (REWARDS, GROUP, 0.0, "top", "keep_ratio"),
        (REWARDS, GROUP, 1.5, "top", "keep_ratio"),
        (REWARDS, GROUP, 0.5, "max_mean", "direction"),
        (REWARDS, GROUP[:4], 0.5, "top", "group"),
        (T_([]), T_([], dtype=torch.long), 0.5, "top", "empty"),
        (REWARDS, GROUP.float(), 0.5, "top", "integer"),
    ],
)
def test_bad_input(rewards, group, ratio, direction, msg):
    with pytest.raises(ValueError, match=msg):
        filter_groups(rewards, group, ratio, direction)
