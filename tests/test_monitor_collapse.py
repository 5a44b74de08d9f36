"""Template-collapse statistics (monitor/collapse.py) and the cross scorer (train/cross_score.py).
Expected values are worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest
import torch

from ragen_cli.monitor.collapse import cross_stats, prompt_entropy, spread_sample
from ragen_cli.rollout.driver import answer_start
from ragen_cli.rollout.types import Trajectory
from ragen_cli.train.step_metrics import in_group_std
from ragen_cli.train.cross_score import common_prefix, cross_matrix, first_turn, pairs, reply_logprobs

LOG2 = math.log(2)


def test_replies_that_identify_their_state_carry_all_of_h_x():
    # two equally likely states; each reply is likely (log p = -1) under its own state and
    # impossible-ish (-50) under the other: matched = -1, marginal = log(0.5 e^-1 + 0.5 e^-50)
    # ~= -1 - log 2, so I ~= log 2 = H(X), mi_norm ~= 1, H(Z|X) = 1, retrieval 1, chance 0.5
    cross = [[-1.0, -50.0], [-1.0, -50.0], [-50.0, -1.0], [-50.0, -1.0]]
    s = cross_stats(cross, [0, 0, 1, 1], [1.0, 1.0])
    assert s["collapse/mi"] == pytest.approx(LOG2, abs=1e-9)
    assert s["collapse/mi_norm"] == pytest.approx(1.0, abs=1e-9)
    assert s["collapse/cond_entropy"] == pytest.approx(1.0)
    assert s["collapse/retrieval_acc"] == 1.0
    assert s["collapse/retrieval_chance"] == 0.5
    assert s["collapse/prompts"] == 2.0


def test_replies_that_ignore_the_state_carry_nothing():
    # every reply scores the same under every prompt: matched = marginal, I = 0; every
    # argmax is a 2-way tie containing the own column: retrieval 1/2 each
    cross = [[-2.0, -2.0], [-3.0, -3.0], [-0.5, -0.5]]
    s = cross_stats(cross, [0, 1, 0], [1.0, 1.0])
    assert s["collapse/mi"] == pytest.approx(0.0, abs=1e-12)
    assert s["collapse/retrieval_acc"] == pytest.approx(0.5)
    assert s["collapse/cond_entropy"] == pytest.approx((2.0 + 3.0 + 0.5) / 3)


def test_weights_are_the_states_empirical_distribution():
    # 3 groups show prompt 0 and 1 shows prompt 1: p = (3/4, 1/4), H(X) = -(.75 ln .75 + .25 ln .25)
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert prompt_entropy([3.0, 1.0]) == pytest.approx(h)
    # one reply from prompt 1 with l = (-10, 0): marginal = log(.75 e^-10 + .25) ; I = 0 - marginal
    s = cross_stats([[-10.0, 0.0]], [1], [3.0, 1.0])
    assert s["collapse/mi"] == pytest.approx(-math.log(0.75 * math.exp(-10) + 0.25))
    assert s["collapse/mi_norm"] == pytest.approx(s["collapse/mi"] / h)
    assert s["collapse/retrieval_chance"] == pytest.approx(0.75 ** 2 + 0.25 ** 2)


def test_one_prompt_or_no_reply_gives_nothing_and_bad_shapes_raise():
    assert cross_stats([[-1.0]], [0], [4.0]) == {}
    assert cross_stats([], [], [1.0, 1.0]) == {}
    with pytest.raises(ValueError):
        cross_stats([[-1.0, -2.0, -3.0]], [0], [1.0, 1.0])


def test_in_group_std_and_spread_sample():
    # group 0: (0, 1) -> std 0.5; group 1: (1, 1) -> 0; mean 0.25
    assert in_group_std([0.0, 1.0, 1.0, 1.0], [0, 0, 1, 1]) == pytest.approx(0.25)
    assert spread_sample(10, 4) == [0, 2, 5, 7]
    assert spread_sample(3, 8) == [0, 1, 2]


def test_answer_start():
    assert answer_start(["Dra", "gon", "<|im_end|>"], think=False) == 0
    # '</think>' completed by the third piece: the answer starts at the fourth
    assert answer_start(["go left", "</", "think>", "<answer>", "Left"], think=True) == 3
    assert answer_start(["no", " close"], think=True) == 2


def _traj(prompt: list[int], reply: list[int], group: int, more: list[int] = ()) -> Trajectory:
    t = Trajectory(group=group)
    t.append(prompt, 0)
    t.append(reply, 1, [0.0] * len(reply))
    t.turn_end.append(len(t.input_ids) - 1)
    t.append([7, 7], 0)  # end of turn, next prompt
    if more:
        t.append(list(more), 1, [0.0] * len(more))
    return t


def test_first_turn_and_pairs_share_identical_prompts():
    a, b = [1, 2, 3], [1, 2, 4]
    trajs = [_traj(a, [10, 11], 0), _traj(a, [12], 0), _traj(b, [13], 1), _traj(a, [14], 2, more=[99])]
    assert first_turn(trajs[3].input_ids, trajs[3].loss_mask, trajs[3].turn_end) == ([1, 2, 3], [14])
    prompts, weights, replies, own = pairs(trajs, 8)
    # groups 0 and 2 show prompt a (weight 2), group 1 prompt b (weight 1)
    assert prompts == [a, b] and weights == [2.0, 1.0]
    assert replies == [[10, 11], [12], [13], [14]] and own == [0, 0, 1, 0]
    assert pairs(trajs, 2)[2] == [[10, 11], [13]]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from ragen_cli.models.load import load_causal_lm

    torch.manual_seed(0)
    return load_causal_lm(tiny_model_dir, "float32")


def test_reply_logprobs_equal_a_plain_forward(tiny):
    prompt = list(range(200, 240))
    replies = [[5, 6, 7], [8], [9, 10, 11, 12, 13]]
    got = reply_logprobs(tiny, prompt, replies, chunk=2).tolist()  # two chunks, padding in each
    for r, value in zip(replies, got):
        ids = torch.tensor([prompt + r])
        with torch.no_grad():
            logsm = torch.log_softmax(tiny(input_ids=ids).logits[0, :-1].float(), -1)
        want = logsm[len(prompt) - 1:].gather(-1, torch.tensor(r)[:, None]).mean().item()
        assert value == pytest.approx(want, abs=1e-4)


def test_common_prefix():
    assert common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert common_prefix([[1, 2, 3], [1, 2, 3]]) == 2  # each keeps its last token
    assert common_prefix([[9, 1], [8, 1]]) == 0


@pytest.mark.parametrize("shared_len", [0, 15])
def test_cross_matrix_columns_are_prompts(tiny, shared_len):
    # prompts sharing their first `shared_len` tokens (the common pass) or nothing
    head = list(range(500, 500 + shared_len))
    prompts = [head + list(range(300, 320)), head + list(range(400, 425)), head + list(range(300, 318))]
    replies = [[5, 6], [7], [8, 9, 10]]
    m = cross_matrix(tiny, prompts, replies)
    assert len(m) == 3 and len(m[0]) == 3
    for j, p in enumerate(prompts):
        col = reply_logprobs(tiny, p, replies).tolist()  # no shared pass
        assert [row[j] for row in m] == pytest.approx(col, abs=1e-4)


def test_pairs_score_under_the_state_prompt_not_the_example():
    # Groups 0 and 1 show the same state with different answer examples (sampled prompts
    # [1, 2, 30] and [1, 2, 31]); their state prompts (placeholder for the example) are both
    # [1, 2, 9]: one column of weight 2, so a reply that copies its example is not "explained"
    # by its own prompt. Group 2 shows another state ([1, 2, 8]); one without a state prompt
    # falls back to its sampled prompt.
    trajs = [_traj([1, 2, 30], [10], 0), _traj([1, 2, 31], [11], 1), _traj([1, 2, 32], [12], 2),
             _traj([1, 2, 33], [13], 3)]
    trajs[0].state_prompt, trajs[1].state_prompt, trajs[2].state_prompt = [1, 2, 9], [1, 2, 9], [1, 2, 8]
    prompts, weights, replies, own = pairs(trajs, 8)
    assert prompts == [[1, 2, 9], [1, 2, 8], [1, 2, 33]] and weights == [2.0, 1.0, 1.0]
    assert replies == [[10], [11], [12], [13]] and own == [0, 0, 1, 2]


def test_pairs_keeps_a_spread_of_groups():
    trajs = [_traj([1, 2, g], [10 + g], g) for g in range(6)]
    prompts, weights, replies, own = pairs(trajs, 8, max_groups=3)
    # spread_sample(6, 3) = groups 0, 2, 4
    assert prompts == [[1, 2, 0], [1, 2, 2], [1, 2, 4]] and weights == [1.0, 1.0, 1.0]
    assert replies == [[10], [12], [14]] and own == [0, 1, 2]
