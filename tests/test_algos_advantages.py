"""algos/advantages.py and algos/rewards.py against hand-computed tensors and loop references."""

from __future__ import annotations

import random
import typing

import pytest
import torch
from torch.testing import assert_close

from ragen_cli.algos.advantages import bi_level_gae, gae, grpo, reinforce_loo, turn_grpo
from ragen_cli.algos.estimators import ADVANTAGES, AdvantageInputs
from ragen_cli.algos.rewards import token_rewards, turn_end_mask
from ragen_cli.spec.models import AlgorithmSpec

T_ = torch.tensor


# ----------------------------------------------------------------------------- token rewards
def test_token_rewards_turn_level_and_episode_sum():
    ends, rs = [[1, 4], [2]], [[0.5, 1.0], [-0.1]]
    # turn level: each reward on its own turn end.
    assert_close(token_rewards(ends, rs, 5, True), T_([[0, 0.5, 0, 0, 1.0], [0, 0, -0.1, 0, 0]]))
    # outcome: 0.5 + 1.0 = 1.5 on the last turn end (index 4); row 2 has one turn.
    assert_close(token_rewards(ends, rs, 5, False), T_([[0, 0, 0, 0, 1.5], [0, 0, -0.1, 0, 0]]))
    assert turn_end_mask(ends, 5).tolist() == [[False, True, False, False, True], [False, False, True, False, False]]


def test_token_rewards_empty_trajectory_is_zero_row():
    assert token_rewards([[]], [[]], 3, True).tolist() == [[0.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    "ends,rs,msg",
    [
        ([[1]], [[1.0], [2.0]], "rows"),
        ([[1, 2]], [[1.0]], "turn rewards"),
        ([[5]], [[1.0]], "inside"),
        ([[3, 1]], [[1.0, 1.0]], "increasing"),
    ],
)
def test_token_rewards_bad_input(ends, rs, msg):
    with pytest.raises(ValueError, match=msg):
        token_rewards(ends, rs, 5, True)


# ------------------------------------------------------------------------------------- GAE
def test_gae_single_turn_by_hand():
    # gamma 0.9, lam 0.5, gamma*lam 0.45, V after the last token = 0:
    # t2: delta = 1 - 0.4 = 0.6, A2 = 0.6
    # t1: delta = 0.9*0.4 - 0.2 = 0.16, A1 = 0.16 + 0.45*0.6 = 0.43
    # t0: delta = 0.9*0.2 - 0.5 = -0.32, A0 = -0.32 + 0.45*0.43 = -0.1265
    # returns = A + V = [0.3735, 0.63, 1.0]
    adv, ret = gae(T_([[0.0, 0, 1]]), T_([[0.5, 0.2, 0.4]]), torch.ones(1, 3), 0.9, 0.5, whiten=False)
    assert_close(adv, T_([[-0.1265, 0.43, 0.6]]))
    assert_close(ret, T_([[0.3735, 0.63, 1.0]]))


def test_gae_multi_turn_skips_observation_gap():
    # mask [1,1,0,0,1,1]: turn 1 = tokens 0-1, observation 2-3 (values 9 ignored), turn 2 = 4-5.
    # gamma 0.5, lam 1. t5: 1 - 0.4 = 0.6. t4: 0.5*0.4 - 0.3 = -0.1; A4 = -0.1 + 0.5*0.6 = 0.2.
    # t1: next masked-in token is t4: delta = 0.5 + 0.5*0.3 - 0.2 = 0.45; A1 = 0.45 + 0.5*0.2 = 0.55.
    # t0: delta = 0.5*0.2 - 0.1 = 0; A0 = 0.5*0.55 = 0.275. Gap positions: 0.
    rewards = T_([[0.0, 0.5, 0, 0, 0, 1.0]])
    values = T_([[0.1, 0.2, 9.0, 9.0, 0.3, 0.4]])
    mask = T_([[1, 1, 0, 0, 1, 1]])
    adv, ret = gae(rewards, values, mask, 0.5, 1.0, whiten=False)
    assert_close(adv, T_([[0.275, 0.55, 0, 0, 0.2, 0.6]]))
    assert_close(ret, T_([[0.375, 0.75, 0, 0, 0.5, 1.0]]))
    # Same as GAE on the sequence with the gap cut out.
    cut = [0, 1, 4, 5]
    adv_cut, _ = gae(rewards[:, cut], values[:, cut], mask[:, cut], 0.5, 1.0, whiten=False)
    assert_close(adv[:, cut], adv_cut)


def _loop_gae(rewards, values, mask, gamma, lam):
    """Plain-Python reference: per row, GAE over the list of masked-in positions."""
    adv = [[0.0] * len(r) for r in rewards]
    for b in range(len(rewards)):
        pos = [t for t, m in enumerate(mask[b]) if m]
        last, next_v = 0.0, 0.0
        for t in reversed(pos):
            delta = rewards[b][t] + gamma * next_v - values[b][t]
            last = delta + gamma * lam * last
            adv[b][t], next_v = last, values[b][t]
    return adv


def test_gae_matches_python_loop_on_random_inputs():
    rng = random.Random(0)
    for _ in range(20):
        B, T = rng.randint(1, 4), rng.randint(1, 12)
        mask = [[int(rng.random() < 0.7) for _ in range(T)] for _ in range(B)]
        rewards = [[rng.gauss(0, 1) * m for m in row] for row in mask]
        values = [[rng.gauss(0, 1) for _ in range(T)] for _ in range(B)]
        gamma, lam = rng.random(), rng.random()
        adv, ret = gae(T_(rewards), T_(values), T_(mask), gamma, lam, whiten=False)
        ref = _loop_gae(rewards, values, mask, gamma, lam)
        assert_close(adv, T_(ref))
        assert_close(ret, (T_(ref) + T_(values)) * T_(mask).float())


def test_gae_gamma_lam_one_is_return_to_go_minus_value():
    # With gamma = lam = 1 the value terms telescope: A_t = sum_{t' >= t} r_t' - V_t.
    g = torch.Generator().manual_seed(1)
    mask = (torch.rand(3, 10, generator=g) < 0.8).float()
    rewards = torch.randn(3, 10, generator=g) * mask
    values = torch.randn(3, 10, generator=g)
    rtg = rewards.flip(1).cumsum(1).flip(1)
    adv, ret = gae(rewards, values, mask, 1.0, 1.0, whiten=False)
    assert_close(adv, (rtg - values) * mask)
    assert_close(ret, rtg * mask)


def test_gae_whitening_over_mask_and_all_masked_rows():
    # Unwhitened adv on the mask = [-0.1265, 0.43, 0.6] (first test); row 2 is all masked out.
    rewards = T_([[0.0, 0, 1], [0, 0, 0]])
    values = T_([[0.5, 0.2, 0.4], [3.0, 3.0, 3.0]])
    mask = T_([[1, 1, 1], [0, 0, 0]])
    adv, ret = gae(rewards, values, mask, 0.9, 0.5)
    raw = T_([-0.1265, 0.43, 0.6])
    expected = (raw - raw.mean()) / (raw.var(unbiased=True) + 1e-8).sqrt()
    assert_close(adv[0], expected)
    assert adv[1].tolist() == [0.0, 0.0, 0.0] and ret[1].tolist() == [0.0, 0.0, 0.0]
    assert_close(ret[0], T_([0.3735, 0.63, 1.0]))  # returns are not whitened
    # Fully masked batch: zeros, not NaN.
    adv0, ret0 = gae(rewards * 0, values, torch.zeros(2, 3), 0.9, 0.5)
    assert adv0.abs().sum() == 0 and ret0.abs().sum() == 0


def test_gae_rejects_reward_on_masked_out_token_and_shape_mismatch():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gae(T_([[0.0, 1.0]]), torch.zeros(1, 2), T_([[1, 0]]), 1.0, 1.0)
    with pytest.raises(ValueError, match="shape mismatch"):
        gae(torch.zeros(1, 2), torch.zeros(1, 3), torch.ones(1, 2), 1.0, 1.0)


# ---------------------------------------------------------------------------- bi-level GAE
def test_bi_level_gae_by_hand():
    # Turns: tokens 0-1 (end 1, r=1) and 3-4 (end 4, r=2); token 2 is an observation.
    # V = [0.1, 0.2, -, 0.3, 0.4]; gamma 0.9, lam 1, high_level_gamma 0.5.
    # Turn level: A(4) = 2 - 0.4 = 1.6; A(1) = 1 + 0.5*0.4 - 0.2 + 0.5*1*1.6 = 1.8.
    #   Turn returns G = A + V: G(4) = 2.0, G(1) = 2.0.
    # Token level (reward G at each end, nothing bootstrapped past an end):
    #   t4: 2.0 - 0.4 = 1.6; t3: 0.9*0.4 - 0.3 + 0.9*1.6 = 1.5;
    #   t1: 2.0 - 0.2 = 1.8; t0: 0.9*0.2 - 0.1 + 0.9*1.8 = 1.7.
    rewards = T_([[0.0, 1.0, 0, 0, 2.0]])
    values = T_([[0.1, 0.2, 7.0, 0.3, 0.4]])
    mask = T_([[1, 1, 0, 1, 1]])
    ends = turn_end_mask([[1, 4]], 5)
    adv, ret = bi_level_gae(rewards, values, mask, ends, 0.9, 1.0, 0.5, whiten=False)
    assert_close(adv, T_([[1.7, 1.8, 0, 1.5, 1.6]]))
    assert_close(ret, T_([[1.8, 2.0, 0, 1.8, 2.0]]))
    # lam 0.5 (hg*lam = 0.25, gamma*lam = 0.45): A(1) = 1.0 + 0.25*1.6 = 1.4, G(1) = 1.6;
    #   t3: 0.06 + 0.45*1.6 = 0.78; t1: 1.6 - 0.2 = 1.4; t0: 0.08 + 0.45*1.4 = 0.71.
    adv, ret = bi_level_gae(rewards, values, mask, ends, 0.9, 0.5, 0.5, whiten=False)
    assert_close(adv, T_([[0.71, 1.4, 0, 0.78, 1.6]]))
    assert_close(ret, T_([[0.81, 1.6, 0, 1.08, 2.0]]))


def test_bi_level_gae_single_turn_equals_gae():
    g = torch.Generator().manual_seed(2)
    mask = T_([[0, 1, 1, 1, 1, 0], [0, 0, 1, 1, 0, 0]])
    ends = turn_end_mask([[4], [3]], 6)
    rewards = torch.where(ends, torch.randn(2, 6, generator=g), 0.0)
    values = torch.randn(2, 6, generator=g)
    for whiten in (False, True):
        expected = gae(rewards, values, mask, 0.8, 0.7, whiten=whiten)
        got = bi_level_gae(rewards, values, mask, ends, 0.8, 0.7, 0.3, whiten=whiten)
        assert_close(got, expected)


def test_bi_level_gae_bad_turn_ends():
    mask = T_([[1, 1, 1]])
    with pytest.raises(ValueError, match="masked-in"):
        bi_level_gae(torch.zeros(1, 3), torch.zeros(1, 3), T_([[1, 1, 0]]), turn_end_mask([[2]], 3), 1, 1, 1)
    with pytest.raises(ValueError, match="after a row's last turn end"):
        bi_level_gae(torch.zeros(1, 3), torch.zeros(1, 3), mask, turn_end_mask([[1]], 3), 1, 1, 1)
    with pytest.raises(ValueError, match="turn-end"):
        bi_level_gae(T_([[1.0, 0, 0]]), torch.zeros(1, 3), mask, turn_end_mask([[2]], 3), 1, 1, 1)


# ------------------------------------------------------------------------- GRPO / RLOO
def test_grpo_by_hand_all_equal_group_is_zero():
    # Group 7: scores [1, 0], mean 0.5, unbiased std sqrt((0.25 + 0.25) / 1) = 0.70711,
    #   adv = +-0.5 / 0.70711 = +-0.70711. Group 3: [0.5, 0.5] all equal -> 0 (not 0/0).
    scores, group = T_([1.0, 0.0, 0.5, 0.5]), T_([7, 7, 3, 3])
    mask = T_([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]])
    adv = grpo(scores, group, mask, norm_std=True)
    a = 0.5 / 0.5**0.5
    assert_close(adv, T_([[a, a, 0], [-a, 0, 0], [0, 0, 0], [0, 0, 0]]))
    # Mean only: +-0.5.
    assert_close(grpo(scores, group, mask, norm_std=False), T_([[0.5, 0.5, 0], [-0.5, 0, 0], [0, 0, 0], [0, 0, 0]]))


def test_grpo_three_member_group_and_group_of_one():
    # [0, 1, 2]: mean 1, unbiased std 1 -> [-1, 0, 1] (eps 1e-6 changes it by 1e-6). Group 9 alone -> 0.
    adv = grpo(T_([0.0, 1.0, 2.0, 5.0]), T_([0, 0, 0, 9]), torch.ones(4, 1))
    assert_close(adv, T_([[-1.0], [0.0], [1.0], [0.0]]))
    # 16 x 0.1 (the paper's N = 16): the float32 mean is off by 7e-9, which over eps = 1e-6
    # would give |adv| = 0.007; all-equal groups must still be exactly 0.
    same = torch.full((16,), 0.1)
    assert (same - same.mean()).abs().max() > 0  # the premise of this test
    assert grpo(same, torch.zeros(16, dtype=torch.long), torch.ones(16, 2)).abs().sum() == 0


def test_reinforce_loo_by_hand():
    # Group 0: [1, 2, 6]: baselines (2+6)/2 = 4, (1+6)/2 = 3.5, (1+2)/2 = 1.5 -> [-3, -1.5, 4.5].
    # Group 4 alone: no baseline -> 0. Group 5 [0.3, 0.3]: 0.
    scores, group = T_([1.0, 2.0, 6.0, 8.0, 0.3, 0.3]), T_([0, 0, 0, 4, 5, 5])
    mask = T_([[1, 1], [1, 0], [1, 1], [1, 1], [1, 1], [1, 1]])
    adv = reinforce_loo(scores, group, mask)
    assert_close(adv, T_([[-3.0, -3.0], [-1.5, 0], [4.5, 4.5], [0, 0], [0, 0], [0, 0]]))
    same = torch.full((16,), 0.1)
    assert reinforce_loo(same, torch.zeros(16, dtype=torch.long), torch.ones(16, 1)).abs().sum() == 0


def test_group_ids_must_be_integers():
    with pytest.raises(ValueError, match="integer"):
        grpo(T_([1.0, 2.0]), T_([0.0, 1.0]), torch.ones(2, 1))


# -------------------------------------------------------------------------------- dispatch
def _inputs(values=True):
    mask = T_([[1, 1, 0, 1, 1], [0, 1, 1, 0, 0]])
    return AdvantageInputs.from_turns(
        [[1, 4], [2]],
        [[0.5, 1.0], [-0.1]],
        [0, 0],
        mask,
        torch.full((2, 5), 0.25) if values else None,
        turn_level=True,
    )


def test_advantages_keys_match_spec_literal():
    assert set(ADVANTAGES) == set(typing.get_args(AlgorithmSpec.model_fields["adv_estimator"].annotation))


def test_from_turns_builds_rewards_scores_and_turn_ends():
    inp = _inputs()
    assert_close(inp.rewards, T_([[0, 0.5, 0, 0, 1.0], [0, 0, -0.1, 0, 0]]))
    assert_close(inp.scores, T_([1.5, -0.1]))
    assert inp.turn_ends.nonzero().tolist() == [[0, 1], [0, 4], [1, 2]]


def test_dispatch_routes_to_the_right_estimator():
    inp, spec = _inputs(), AlgorithmSpec(preset=None)
    assert_close(ADVANTAGES["gae"](inp, spec), gae(inp.rewards, inp.values, inp.mask, spec.gamma, spec.lam))
    bi = AlgorithmSpec(preset=None, bi_level_gae=True, turn_rewards=True, high_level_gamma=0.5, gamma=0.9)
    assert_close(
        ADVANTAGES["gae"](inp, bi), bi_level_gae(inp.rewards, inp.values, inp.mask, inp.turn_ends, 0.9, 1.0, 0.5)
    )
    adv, ret = ADVANTAGES["grpo"](inp, spec)
    assert_close(adv, grpo(inp.scores, inp.group, inp.mask))
    # returns of critic-free estimators: the episode return on each sampled token.
    assert_close(ret, T_([[1.5, 1.5, 0, 1.5, 1.5], [0, -0.1, -0.1, 0, 0]]))
    assert_close(ADVANTAGES["reinforce"](inp, spec)[0], reinforce_loo(inp.scores, inp.group, inp.mask))


def test_gae_estimator_needs_values_and_inputs_check_shapes():
    with pytest.raises(ValueError, match="critic values"):
        ADVANTAGES["gae"](_inputs(values=False), AlgorithmSpec(preset=None))
    with pytest.raises(ValueError, match="scores"):
        bool_zeros = torch.zeros(2, 3, dtype=torch.bool)
        AdvantageInputs(torch.ones(2, 3), torch.zeros(2, 3), bool_zeros, torch.zeros(3), T_([0, 0]))


def test_grpo_std_normalisation_hides_the_payout_of_a_lone_risky_pull():
    """Why specs/bandit.yaml sets grpo_norm_std: false. A group of 8 with 7 safe pulls (0.1)
    and one risky pull that pays 1.0 (prob. 0.25) or 0.0: with the unbiased group std, a lone
    outlier always gets z = (n-1)/sqrt(n) = 7/sqrt(8) = 2.4749 in size, whatever it paid, so the
    expected risky advantage is 0.25 x 2.4749 - 0.75 x 2.4749 < 0 (pushes toward the safe arm).
    Mean only: +0.7875 (win) and -0.0875 (loss), expectation 0.25 x 0.7875 - 0.75 x 0.0875
    = +0.13125 (toward the arm with the higher expected value, 0.25 > 0.1)."""
    from ragen_cli.algos.advantages import grpo

    mask = torch.ones(8, 1)
    group = torch.zeros(8, dtype=torch.long)
    win = torch.tensor([1.0] + [0.1] * 7)
    loss = torch.tensor([0.0] + [0.1] * 7)
    z = 7 / 8 ** 0.5
    assert grpo(win, group, mask)[0, 0].item() == pytest.approx(z, rel=1e-4)  # eps 1e-6 in the denominator
    assert grpo(loss, group, mask)[0, 0].item() == pytest.approx(-z, rel=1e-4)
    a_win = grpo(win, group, mask, norm_std=False)[0, 0].item()
    a_loss = grpo(loss, group, mask, norm_std=False)[0, 0].item()
    assert (a_win, a_loss) == (pytest.approx(0.7875), pytest.approx(-0.0875))
    assert 0.25 * a_win + 0.75 * a_loss == pytest.approx(0.13125)


# ----------------------------------------------------------------------------- turn-level GRPO
def _turn_batch():
    """Group 0: A (turns rewarded 0.5, 1.0), B (0, 0), C (one turn, -0.5); group 1: D alone.
    Each row: turn 1 = tokens 0-1 (end 1), observation at 2, turn 2 = tokens 3-4 (end 4), padding 5."""
    ends = [[1, 4], [1, 4], [1], [1, 4]]
    rewards = token_rewards(ends, [[0.5, 1.0], [0.0, 0.0], [-0.5], [1.0, 1.0]], 6, turn_level=True)
    mask = T_([[1, 1, 0, 1, 1, 0]] * 2 + [[1, 1, 0, 0, 0, 0]] + [[1, 1, 0, 1, 1, 0]]).float()
    return rewards, turn_end_mask(ends, 6), T_([0, 0, 0, 1]), mask


def test_turn_grpo_by_hand():
    rewards, turn_ends, group, mask = _turn_batch()
    adv, ret = turn_grpo(rewards, turn_ends, group, mask)
    # turn 1, group 0: returns 1.5, 0, -0.5; mean 1/3; unbiased var (49 + 4 + 25) / 36 / 2 = 13/12.
    s1 = (13 / 12) ** 0.5 + 1e-6
    a1, b1, c1 = (7 / 6) / s1, (-1 / 3) / s1, (-5 / 6) / s1
    # turn 2, group 0: only A and B have one; returns 1.0, 0; mean 0.5, std sqrt(0.5). C has no turn 2.
    a2, b2 = 0.5 / (0.5 ** 0.5 + 1e-6), -0.5 / (0.5 ** 0.5 + 1e-6)
    assert_close(adv, T_([[a1, a1, 0, a2, a2, 0], [b1, b1, 0, b2, b2, 0], [c1, c1, 0, 0, 0, 0], [0.0] * 6]))
    # group 1 is a group of one: no baseline, advantage 0. Returns: G of each token's turn.
    assert_close(ret, T_([[1.5, 1.5, 0, 1, 1, 0], [0.0] * 6, [-0.5, -0.5, 0, 0, 0, 0], [2, 2, 0, 1, 1, 0]]))
    # mean only: the differences themselves.
    adv_mean, _ = turn_grpo(rewards, turn_ends, group, mask, norm_std=False)
    assert_close(adv_mean[:3, [0, 3]], T_([[7 / 6, 0.5], [-1 / 3, -0.5], [-5 / 6, 0.0]]))


def test_turn_grpo_first_turn_is_episode_grpo():
    rewards, turn_ends, group, mask = _turn_batch()
    scores = rewards.sum(1)
    adv, _ = turn_grpo(rewards, turn_ends, group, mask)
    assert_close(adv[:, :2], grpo(scores, group, mask)[:, :2])


def test_turn_grpo_equal_returns_give_zero_and_bad_layouts_raise():
    _, turn_ends, group, mask = _turn_batch()
    same = token_rewards([[1, 4], [1, 4], [1], [1, 4]], [[1.0, 0.0], [1.0, 0.0], [1.0], [0.0, 0.0]], 6, True)
    adv, _ = turn_grpo(same, turn_ends, group, mask)
    assert adv.abs().sum() == 0  # turn 1: 1, 1, 1; turn 2: 0, 0: nothing to prefer
    with pytest.raises(ValueError, match="turn-end"):
        turn_grpo(torch.ones(4, 6) * mask, turn_ends, group, mask)
    late = mask.clone()
    late[0, 5] = 1.0  # a sampled token after row 0's last turn end
    with pytest.raises(ValueError, match="last turn end"):
        turn_grpo(torch.zeros(4, 6), turn_ends, group, late)


def test_dispatch_grpo_with_turn_rewards_is_turn_level():
    inp = _inputs()
    spec = AlgorithmSpec(preset=None, adv_estimator="grpo", turn_rewards=True)
    adv, ret = ADVANTAGES["grpo"](inp, spec)
    want, want_ret = turn_grpo(inp.rewards, inp.turn_ends, inp.group, inp.mask)
    assert_close(adv, want)
    assert_close(ret, want_ret)
