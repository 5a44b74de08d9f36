"""A scripted `Backend` for rollout tests: a real implementation of the backend interface whose
"model" writes fixed texts. It stands in for the language model, never for the code under test."""

from __future__ import annotations

from ragen_cli.rollout.types import Sample


class ScriptedBackend:
    """Replies[k] is the text the 'model' writes in call k (the same for every prompt); it is
    tokenised, cut at max_tokens, and given log-prob -0.5 per token."""

    name = "scripted"

    def __init__(self, tokenizer, replies):
        self.tok, self.replies, self.calls = tokenizer, list(replies), []

    def generate(self, prompts, *, n, max_tokens, temperature, top_p, seed):
        self.calls.append([list(p) for p in prompts])
        ids = self.tok(self.replies[len(self.calls) - 1], add_special_tokens=False)["input_ids"][:max_tokens]
        reason = "stop" if ids[-1] == self.tok.eos_token_id else "length"
        sample = Sample(ids, [-0.5] * len(ids), self.tok.decode(ids), reason)
        return [[sample] * n for _ in prompts]
