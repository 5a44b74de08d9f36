"""The update moves the policy the right way (issue 38, section 4): the project's own advantages
(`stages.advantages`) and update (`update.actor_update`) on a real DeepSpeed engine (tiny-random,
fp32, CPU), first on a fixed hand-made batch, then in a short learning loop with the engine's own
samples. An advantage of the wrong sign, or advantages landing on the wrong rows, fails both.

fp32 is pinned: the checks are about the direction of a change (~0.05 nats per token after one
step at lr 1e-3), far above fp32 rounding (~1e-6), not about precision."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ragen_cli.rollout.types import Trajectory
from ragen_cli.train.batch import collate, score

STEPS = 20
SPEC = Path(__file__).resolve().parents[1] / "specs" / "bandit.yaml"
# GRPO without the std division and no filter, entropy bonus or KL: the advantage is the reward
# minus its group's mean, and the loss is the clipped policy gradient alone. One pass, one
# mini-batch: one optimizer step per update.
SETS = ["model.name=tiny-random", "model.lora=null", "deepspeed.precision=fp32", "algorithm.adv_estimator=grpo",
        "algorithm.grpo_norm_std=false", "algorithm.entropy_coef=0", "algorithm.kl_coef=0",
        "algorithm.ppo_epochs=1", "algorithm.online_k=1", "algorithm.mini_batches=1",
        "algorithm.filter.keep_ratio=1.0", "algorithm.turn_rewards=false", "train.micro_batch=4",
        "train.lr_actor=1e-3", "env.val.every=0"]


@pytest.fixture(scope="module")
def actor(tiny_model_dir):
    """make(*sets) -> (spec, a fresh DeepSpeed actor engine over tiny-random) for SETS + sets."""
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.engine import build_engines, init_distributed

    init_distributed({})

    def make(*sets: str):
        spec = load_spec(SPEC, SETS + list(sets))
        return spec, build_engines(spec, compile_plan(spec, device="cpu"), tiny_model_dir, 1).actor

    return make


def episode(prompt: list[int], reply: list[int], reward: float, group: int) -> Trajectory:
    """A one-turn episode: `prompt` then the sampled `reply` (all trained), reward at its end."""
    n = len(prompt)
    return Trajectory(input_ids=prompt + reply, loss_mask=[0] * n + [1] * len(reply),
                      old_logprobs=[0.0] * n + [-10.0] * len(reply), turn_start=[n], turn_end=[n + len(reply) - 1],
                      turn_rewards=[reward], group=group)


def update(engine, spec, trajs) -> tuple[torch.Tensor, torch.Tensor]:
    """One update on `trajs` as the loop runs it; returns (advantages, per-row change of the
    reply's summed log-prob)."""
    from ragen_cli.train.stages import advantages
    from ragen_cli.train.update import actor_update

    batch = collate(trajs)
    old = score(engine, batch, micro=4)
    adv, _ = advantages(spec, batch, None)
    actor_update(engine, batch, old, adv, None, spec, mini_rows=len(batch))
    new = score(engine, batch, micro=4)
    return adv, ((new - old) * batch.mask).sum(-1)


def test_one_update_raises_the_advantaged_replies_and_lowers_the_others(actor):
    spec, engine = actor()
    # two groups (two prompts of different lengths), two replies each with disjoint tokens; the
    # signs alternate over the rows, so rows shifted by one or taken in reverse order get the
    # opposite sign everywhere
    p0, p1 = [1, 504, 3058, 314, 260], [1, 30, 31, 32]
    trajs = [episode(p0, [100, 101, 102], 1.0, 0), episode(p0, [200, 201, 202], 0.0, 0),
             episode(p1, [300, 301, 302], 0.5, 1), episode(p1, [400, 401, 402], 0.0, 1)]
    adv, change = update(engine, spec, trajs)
    # GRPO, mean only: group rewards (1, 0), mean 0.5 -> +0.5, -0.5; (0.5, 0), mean 0.25 ->
    # +0.25, -0.25; on every reply token (3 per row), 0 elsewhere
    mask = collate(trajs).mask.bool()
    assert [adv[b][mask[b]].tolist() for b in range(4)] == [[0.5] * 3, [-0.5] * 3, [0.25] * 3, [-0.25] * 3]
    assert adv[~mask].abs().sum() == 0
    # one Adam step at lr 1e-3 moves each weight by about 1e-3 along its gradient's sign; a
    # logit of this 64-wide model (hidden elements ~1) by up to ~64 x 1e-3, so each reply's
    # summed log-prob moves by several 1e-2 nats: 1e-3 is far above fp32 rounding and below that
    assert change[0] > 1e-3 and change[2] > 1e-3, change
    assert change[1] < -1e-3 and change[3] < -1e-3, change


@pytest.mark.slow
def test_a_few_steps_of_a_token_bandit_raise_the_reward(actor, tiny_model_dir):
    """A bandit over the vocabulary: the "good arm" is the half of the tokens whose LM-head row
    points along a fixed direction v (W_i . v > 0); a reply earns the share of its tokens in that
    half. The random model picks either half about equally, and raising one half as a whole is
    learnable (move the hidden state along v). STEPS steps of 2 prompts x 8 samples of 4 tokens
    at lr 3e-2, sampled by the engine's own model through the HF backend: the probability that
    the first reply token is good (exact, from the logits) must rise by 0.1 from about 0.5."""
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend

    spec, engine = actor("train.lr_actor=3e-2")
    lm = engine.module
    head = lm.get_output_embeddings().weight.detach()
    v = torch.randn(head.shape[1], generator=torch.Generator().manual_seed(0))
    good = (head @ v) > 0
    assert 0.45 < good.float().mean() < 0.55  # a random direction halves the vocabulary
    prompts = [[1, 504, 3058, 314, 260], [1, 30, 31, 32]]

    def p_good() -> float:
        """Mean over the prompts of P(first reply token is good)."""
        with torch.no_grad():
            probs = [lm(input_ids=torch.tensor([p])).logits[0, -1].softmax(-1) for p in prompts]
        return float(sum(pr[good].sum() for pr in probs) / len(probs))

    before = p_good()
    backend = HFBackend(lm, load_tokenizer(tiny_model_dir))
    for step in range(STEPS):
        samples = backend.generate(prompts, n=8, max_tokens=4, temperature=1.0, top_p=1.0, seed=step)
        trajs = [episode(p, s.token_ids, float(good[s.token_ids].float().mean()), g)
                 for g, (p, group) in enumerate(zip(prompts, samples)) for s in group]
        update(engine, spec, trajs)
    after = p_good()
    assert 0.4 < before < 0.6 and after > before + 0.1, (before, after)
