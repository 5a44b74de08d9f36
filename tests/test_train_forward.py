"""The trainer's scoring forward (train/batch.py): logits only at sampled columns, and the
prompt shared by the rows of a group run once. Both must give the plain forward's log-probs,
entropies and gradients."""

from __future__ import annotations

import pytest
import torch

from ragen_cli.train.batch import Batch, MIN_SHARED_PREFIX, policy_forward, sampled_columns, shared_prefixes


def _batch(rows: list[list[int]], sampled_from: list[int], group: list[int]) -> Batch:
    """Right-padded batch; row r's tokens from index sampled_from[r] on are 'sampled'."""
    L = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), L, dtype=torch.long)
    attn = torch.zeros(len(rows), L, dtype=torch.long)
    mask = torch.zeros(len(rows), L)
    for b, r in enumerate(rows):
        ids[b, : len(r)] = torch.tensor(r)
        attn[b, : len(r)] = 1
        mask[b, sampled_from[b]: len(r)] = 1
    return Batch(ids, attn, mask[:, 1:], torch.zeros(len(rows), L - 1), [[len(r) - 2] for r in rows],
                 [[0.0] for _ in rows], group)


PROMPT = list(range(100, 130))  # 30 prompt tokens


def test_sampled_columns_are_the_union_over_rows():
    b = _batch([PROMPT + [1, 2], PROMPT[:28] + [3, 4, 5, 6]], [30, 28], [0, 1])
    # row 0 samples tokens 30, 31 -> shifted columns 29, 30; row 1 tokens 28..31 -> 27..30
    assert sampled_columns(b.mask).tolist() == [27, 28, 29, 30]


def test_sampled_columns_never_empty():
    b = _batch([PROMPT], [30], [0])  # nothing sampled
    assert sampled_columns(b.mask).tolist() == [28]


def test_shared_prefixes_by_group_cut_before_the_first_sampled_logit():
    rows = [PROMPT + [1, 2, 3], PROMPT + [4, 5], PROMPT[:-1] + [7, 8, 9], PROMPT + [1]]
    b = _batch(rows, [30, 30, 30, 30], [0, 0, 1, 1])
    # group 0: common prefix 30 tokens + token 30 differs; first sampled token is 30, whose
    # logits come from position 29, so the shared pass takes tokens 0..28 (29 tokens).
    # group 1: the rows differ at token 29, so they share tokens 0..28 as well.
    assert shared_prefixes(b) == [([0, 1], 29), ([2, 3], 29)]


def test_shared_prefix_stops_where_the_prompts_differ():
    other = PROMPT[:20] + [999] + PROMPT[21:]
    b = _batch([PROMPT + [1], other + [2]], [30, 30], [0, 0])
    assert shared_prefixes(b) == [([0, 1], 20)]


def test_short_or_single_prefixes_are_not_shared():
    short = [5] * (MIN_SHARED_PREFIX - 1)
    b = _batch([short + [1, 2], short + [3], PROMPT + [4]], [MIN_SHARED_PREFIX - 1] * 2 + [30], [0, 0, 1])
    assert shared_prefixes(b) == [([0, 1], 0), ([2], 0)]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from ragen_cli.models.load import load_causal_lm

    torch.manual_seed(0)
    return load_causal_lm(tiny_model_dir, "float32")


def _plain_logp(model, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference: full logits at every position, log-softmax, gather."""
    logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask, use_cache=False).logits[:, :-1]
    logsm = torch.log_softmax(logits.float(), -1)
    logp = logsm.gather(-1, b.input_ids[:, 1:, None])[..., 0]
    ent = -(logsm.exp() * logsm).sum(-1)
    return logp * b.mask, ent * b.mask


def _mixed_batch() -> Batch:
    g = torch.Generator().manual_seed(1)
    prompt_a = torch.randint(5, 500, (40,), generator=g).tolist()
    prompt_b = torch.randint(5, 500, (33,), generator=g).tolist()
    rows = [prompt_a + [11, 12, 13, 14], prompt_a + [21, 22], prompt_b + [31, 32, 33],
            prompt_a + [41, 42, 43, 44, 45, 46], prompt_b + [51]]
    return _batch(rows, [40, 40, 33, 40, 33], [0, 0, 1, 0, 1])


@pytest.mark.parametrize("share", [False, True])
def test_policy_forward_matches_the_plain_forward(tiny, share):
    b = _mixed_batch()
    ref_logp, ref_ent = _plain_logp(tiny, b)
    logp, ent = policy_forward(tiny, b, with_entropy=True, share_prefix=share)
    assert logp.shape == b.mask.shape
    torch.testing.assert_close(logp * b.mask, ref_logp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent * b.mask, ref_ent, atol=1e-5, rtol=1e-5)  # entropy ~ ln V = 10.8
    # the prompt columns before any sampled token (0..31: no row samples before token 33) are 0
    assert logp[:, :32].abs().sum() == 0 and ent[:, :32].abs().sum() == 0


def test_shared_prefix_gives_the_same_gradients(tiny):
    b = _mixed_batch()
    adv = torch.linspace(-1, 1, b.mask.numel()).reshape(b.mask.shape)

    def grads(share: bool) -> dict[str, torch.Tensor]:
        tiny.zero_grad()
        logp, ent = policy_forward(tiny, b, with_entropy=True, share_prefix=share)
        ((logp * adv + 0.1 * ent) * b.mask).sum().backward()
        return {n: p.grad.clone() for n, p in tiny.named_parameters() if p.grad is not None}

    plain, shared = grads(False), grads(True)
    assert plain.keys() == shared.keys()
    # the prompt pass must receive gradient through the cache: first-layer attention weights
    # see prompt tokens only through the cached keys/values
    assert any("layers.0" in n and plain[n].abs().sum() > 0 for n in plain)
    for n in plain:
        torch.testing.assert_close(shared[n], plain[n], atol=1e-5, rtol=1e-4, msg=n)
    tiny.zero_grad()


def test_single_pass_update_needs_no_scoring_pass(tiny):
    """stages.single_pass: with one optimizer step over the whole batch, the update's own
    detached log-probs are the old log-probs: same loss and gradients as a separate pass."""
    from ragen_cli.spec.models import RunSpec
    from ragen_cli.train.batch import score
    from ragen_cli.train.stages import single_pass
    from ragen_cli.train.update import _actor_micro

    spec = RunSpec(name="t", env={"train": {"name": "bandit"}}, algorithm={"adv_estimator": "grpo"})
    assert single_pass(spec, rows=5, mini_rows=5) and not single_pass(spec, rows=5, mini_rows=2)
    assert not single_pass(spec.model_copy(update={"algorithm": spec.algorithm.model_copy(update={"ppo_epochs": 2})}), 5, 5)

    b = _mixed_batch()
    adv = torch.linspace(-1, 1, b.mask.numel()).reshape(b.mask.shape)
    rows = list(range(len(b)))

    def run(old):
        tiny.zero_grad()
        loss, stats = _actor_micro(tiny, b, rows, old, adv, None, spec)
        loss.backward()
        return loss.item(), {n: p.grad.clone() for n, p in tiny.named_parameters() if p.grad is not None}

    loss_sep, g_sep = run(score(tiny, b, micro=2))
    loss_own, g_own = run(None)
    assert loss_own == pytest.approx(loss_sep, rel=1e-5, abs=1e-7)
    for n in g_sep:
        torch.testing.assert_close(g_own[n], g_sep[n], atol=1e-6, rtol=1e-4, msg=n)
    tiny.zero_grad()
