"""Pure tensor maths of StarPO / StarPO-S (RAGEN, arXiv 2504.20073). torch only, no state.

Where each piece of the paper lives:

- ``rewards.py``: per-turn rewards onto tokens (turn-level or outcome).
- ``advantages.py``: GAE with a critic (PPO), bi-level GAE, GRPO, REINFORCE leave-one-out;
  ``estimators.py``: ``ADVANTAGES`` keyed by ``AlgorithmSpec.adv_estimator``.
- ``losses.py``: PPO clipped surrogate (clip-low / clip-high, dual clip), loss aggregation,
  clipped value loss, KL estimators (k1, k3, low_var_kl); ``logits.py``: log-probs and entropy from logits.
- ``filter.py``: StarPO-S uncertainty filtering (keep the groups with the highest reward std).
- ``masked.py``: masked reductions and group statistics shared by the above.

Rollout reuse (online-k), PPO epochs and micro-batch accumulation are the loop's, in
``train/update.py`` (they are scheduling, not maths).

Nothing is imported here, so ``import ragen_cli.algos`` does not import torch.
"""
