"""How far bf16 rounding can move a causal LM's logits and log-probs: the one derivation that the
bf16 bounds of the tests use (fp32 bounds are stated in each test).

bf16 keeps 8 significant bits, so storing a value x rounds it by at most u |x| with u = 2^-8
(half a step; the step is 2^-7 relative). A logit is a dot product z_i = sum_j h_j W_ij of the
final hidden state h (the last RMSNorm's output) with a row of the LM head; on CPU the products
are accumulated in fp32, so in bf16 its error comes from three roundings: h is stored in bf16
(the roundings of the layers before reach the logits through the final RMSNorm, which rescales
its input to unit RMS, so to first order they enter as h's own relative error u), W is stored in
bf16 (u) and z itself is stored in bf16 (u |z| <= u S). Each is relative to the dot product's
scale S = max_i sum_j |h_j W_ij|, so

    |dz_i| <= 3 u S                                  for every logit of one bf16 evaluation,
    |d log p_i| = |dz_i - d logsumexp(z)| <= 2 max |dz| = 6 u S,

since logsumexp moves by at most the largest logit change. S is the model's own number on the
given tokens (read from the fp32 model, never from a bf16 result): about 1.4 for tiny-random,
3.7 after perturbing its weights by N(0, 0.05^2).
"""

from __future__ import annotations

U = 2.0 ** -8
"""bf16's unit roundoff: 8 significant bits, round to nearest."""


def logit_scale(model, ids: list[int]) -> float:
    """S = max over positions and vocabulary of sum_j |h_j W_ij| for `model` (fp32) on `ids`."""
    import torch

    lm_head = model.get_output_embeddings()
    with torch.no_grad():
        h = model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].float()
        return float((h.abs() @ lm_head.weight.float().abs().T).max())


def logprob_bound(model, ids: list[int]) -> float:
    """6 u S: how far one bf16 evaluation's log-probs on `ids` can lie from the fp32 ones."""
    return 6 * U * logit_scale(model, ids)
