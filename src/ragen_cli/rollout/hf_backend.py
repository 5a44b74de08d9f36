"""HF backend: transformers `generate` on the policy model itself (torch imported lazily).

- Batched and left-padded, KV cache on, in chunks of `batch_size` sequences.
- Sampling is seeded: `torch.manual_seed(seed + chunk)` inside `rng.kept_rng`, so the same call
  gives the same samples and the trainer's CPU and CUDA generators are left untouched.
- The sampling distribution is the model's logits with temperature and top-p (top-k and every
  other processor off, like vLLM's defaults). The recorded log-probs are `log_softmax` of the
  raw logits (`output_logits`, temperature 1): the quantity the trainer recomputes.
- `sync` is a no-op when the backend wraps the trainer's model (it already has the new
  weights); when it owns its model (eval), a state dict is loaded into it.
- Works on a plain `PreTrainedModel`, a DeepSpeed engine's `.module` (ZeRO 0-2) or a peft
  model. Not for ZeRO-3 (partitioned parameters need gathering; use vLLM there).
"""

from __future__ import annotations

from typing import Any

from ragen_cli.rollout.context import stop_token_ids
from ragen_cli.rollout.types import Sample


class HFBackend:
    name = "hf"

    @property
    def needs_sync(self) -> bool:
        """Only a backend with its own copy of the model needs new weights pushed; one built on
        the trainer's module (`owns_model` False) samples from it directly."""
        return self.owns_model

    def sleep(self) -> None:
        """Nothing to release: the HF backend samples with the trainer's own model."""

    def wake_up(self) -> None:
        """See `sleep`."""

    def __init__(self, model: Any, tokenizer: Any, owns_model: bool = False, batch_size: int = 32):
        self.model = model
        self.tokenizer = tokenizer
        self.owns_model = owns_model
        self.batch_size = batch_size
        self.stop_ids = stop_token_ids(tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.stop_ids[0]

    # ------------------------------------------------------------------ interface
    def generate(self, prompts: list[list[int]], *, n: int, max_tokens: int, temperature: float,
                 top_p: float, seed: int) -> list[list[Sample]]:
        if any(not p for p in prompts):
            raise ValueError("every prompt needs at least one token")
        flat = [p for p in prompts for _ in range(n)]
        samples: list[Sample] = []
        with _eval_mode(self.model):
            for start in range(0, len(flat), self.batch_size):
                chunk = flat[start:start + self.batch_size]
                samples += self._generate_chunk(chunk, max_tokens, temperature, top_p, seed + start)
        return [samples[i * n:(i + 1) * n] for i in range(len(prompts))]

    def sync(self, weights: Any) -> None:
        if not self.owns_model:
            return  # the policy itself generates: it already has the new weights
        if isinstance(weights, dict):
            missing, unexpected = self.model.load_state_dict(weights, strict=False)
            if unexpected or [k for k in missing if k != "lm_head.weight"]:
                raise ValueError(f"weights do not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
            return
        from peft import PeftModel

        self._adapters = getattr(self, "_adapters", 0) + 1
        name = f"ragen-v{self._adapters}"
        if isinstance(self.model, PeftModel):  # replace the previous adapter version
            old = self.model.active_adapter
            self.model.load_adapter(str(weights), adapter_name=name)
            self.model.set_adapter(name)
            self.model.delete_adapter(old)
        else:
            self.model = PeftModel.from_pretrained(self.model, str(weights), adapter_name=name)
        self.model.eval()

    def score(self, token_ids: list[int]) -> list[float]:
        import torch

        if len(token_ids) < 2:
            raise ValueError("score needs at least two tokens")
        with _eval_mode(self.model), torch.no_grad():
            ids = torch.tensor([token_ids], device=_device(self.model))
            logits = self.model(input_ids=ids).logits[0, :-1].float()
            logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
        return logp.tolist()

    def score_batch(self, sequences: list[list[int]]) -> list[list[float]]:
        """`score` of each sequence, one forward each (padding them into one would change the numbers)."""
        return [self.score(ids) for ids in sequences]

    # ------------------------------------------------------------------ internals
    def _generate_chunk(self, chunk: list[list[int]], max_tokens: int, temperature: float,
                        top_p: float, seed: int) -> list[Sample]:
        import torch

        width = max(len(p) for p in chunk)
        device = _device(self.model)
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
        config = self._generation_config(max_tokens, temperature, top_p)
        from ragen_cli.rollout.rng import kept_rng

        with kept_rng(), torch.no_grad():  # seeds every generator, CUDA's too: the trainer's come back
            torch.manual_seed(seed)
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        new = out.sequences[:, width:]
        # raw logits (temperature 1), one [B, V] tensor per step: gather step by step (no [B, T, V] copy)
        logp = torch.stack([step.float().log_softmax(-1).gather(-1, new[:, t, None])[:, 0]
                            for t, step in enumerate(out.logits)], dim=1)
        return [self._sample(new[i].tolist(), logp[i].tolist()) for i in range(len(chunk))]

    def _generation_config(self, max_tokens: int, temperature: float, top_p: float):
        from transformers import GenerationConfig

        greedy = temperature <= 0
        return GenerationConfig(
            max_new_tokens=max_tokens, do_sample=not greedy,
            temperature=None if greedy else temperature, top_p=None if greedy else top_p,
            top_k=None if greedy else 0,
            eos_token_id=list(self.stop_ids), pad_token_id=self.pad_id, use_cache=True,
            output_logits=True, return_dict_in_generate=True,
        )

    def _sample(self, ids: list[int], logprobs: list[float]) -> Sample:
        stop = next((i for i, t in enumerate(ids) if t in self.stop_ids), None)
        if stop is not None:
            ids, logprobs, reason = ids[:stop + 1], logprobs[:stop + 1], "stop"
        else:
            reason = "length"
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return Sample(token_ids=ids, logprobs=logprobs, text=text, finish_reason=reason)


def _device(model: Any):
    return next(model.parameters()).device


class _eval_mode:
    """Put a model in eval mode for generation and restore its previous mode afterwards."""

    def __init__(self, model: Any):
        self.model = model

    def __enter__(self):
        self.was_training = self.model.training
        self.model.eval()

    def __exit__(self, *exc):
        self.model.train(self.was_training)
