"""An OpenAI-compatible server as the policy: the rollout `Backend` protocol over HTTP.

The driver builds each prompt with the same chat-template code as for local models
(rollout/context.py) and hands token ids; this backend posts them to `/v1/completions` (the
OpenAI API accepts a token-id array as `prompt`), so prompts are token-identical to a local run
and the same parser reads the replies. The server must serve a model whose tokenizer is the
local one given to the driver (`--tokenizer`, default: `--model` resolved locally).

- vLLM extensions are asked for: the sampled token ids (`return_token_ids`), the same stop
  tokens as the local backends (`stop_token_ids`: eos and the template's end-of-turn token) and
  special tokens kept in the text. Other servers reject unknown fields, so on an HTTP 400
  naming one the backend drops them all, keeps the server's own stop tokens and re-tokenizes
  the reply text (token exactness does not matter for eval).
- One request per prompt (each with its own seed, so identical prompts get different samples),
  sent concurrently so the server can batch them. Stdlib `urllib` only.
- `sync` is refused (a remote server's weights cannot be pushed); `score` is not offered.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any


VLLM_EXTRAS = ("return_token_ids", "stop_token_ids", "skip_special_tokens")


class EndpointError(RuntimeError):
    """The endpoint cannot be reached or answered with something unusable."""


def completions_url(base: str) -> str:
    """`http://host:port`, `.../v1` or `.../v1/completions` -> the completions URL."""
    base = base.rstrip("/")
    if base.endswith("/v1/completions"):
        return base
    return base + ("/completions" if base.endswith("/v1") else "/v1/completions")


def post_json(url: str, body: dict, timeout: float, api_key: str | None = None) -> dict:
    """POST a JSON body and decode the JSON answer; HTTP errors carry the server's message."""
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:500]
        raise EndpointError(f"{url} answered HTTP {err.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        reason = getattr(err, "reason", err)
        raise EndpointError(f"cannot reach the endpoint {url}: {reason}") from None


class EndpointBackend:
    """`Backend` (docs/internals.md, rollout/) backed by an OpenAI-compatible completions API."""

    name = "endpoint"

    def __init__(self, url: str, model: str, tokenizer: Any, *, timeout: float = 300.0,
                 api_key: str | None = None, concurrency: int = 8):
        self.url = completions_url(url)
        self.model = model
        self.tokenizer = tokenizer
        self.timeout = timeout
        self.api_key = api_key
        self.concurrency = concurrency
        self._extras_ok = True  # the server accepts the vLLM extensions (VLLM_EXTRAS)
        from ragen_cli.rollout.context import stop_token_ids

        self._stop_ids = stop_token_ids(tokenizer)

    def _body(self, prompt: list[int], n: int, max_tokens: int, temperature: float,
              top_p: float, seed: int) -> dict:
        body = {"model": self.model, "prompt": list(prompt), "n": n, "max_tokens": max_tokens,
                "temperature": temperature, "top_p": top_p if temperature > 0 else 1.0,
                "seed": seed, "logprobs": 0}
        if self._extras_ok:
            body.update(return_token_ids=True, stop_token_ids=list(self._stop_ids), skip_special_tokens=False)
        return body

    def _request(self, body: dict) -> dict:
        try:
            return post_json(self.url, body, self.timeout, self.api_key)
        except EndpointError as err:
            if self._extras_ok and "HTTP 400" in str(err) and any(x in str(err) for x in VLLM_EXTRAS):
                self._extras_ok = False
                return post_json(self.url, {k: v for k, v in body.items() if k not in VLLM_EXTRAS},
                                 self.timeout, self.api_key)
            raise

    def _samples(self, answer: dict, n: int):
        from ragen_cli.rollout.backend import Sample

        choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != n:
            raise EndpointError(f"{self.url} returned {len(choices)} choices, asked for {n}: {str(answer)[:300]}")
        out = []
        for choice in choices:
            text = choice.get("text") or ""
            ids = choice.get("token_ids")
            if ids is None:
                ids = self.tokenizer.encode(text, add_special_tokens=False)
            lps = ((choice.get("logprobs") or {}).get("token_logprobs")) or []
            lps = [float(x) if x is not None else 0.0 for x in lps]
            if len(lps) != len(ids):
                lps = [0.0] * len(ids)  # logprobs of re-tokenized text are unknown
            out.append(Sample(token_ids=list(ids), logprobs=lps, text=text,
                              finish_reason=choice.get("finish_reason") or "stop"))
        return out

    def generate(self, prompts: list[list[int]], *, n: int, max_tokens: int, temperature: float,
                 top_p: float, seed: int) -> list:
        """n samples for each prompt (`list[list[Sample]]`, in prompt order)."""
        if not prompts:
            return []
        if any(not p or not all(isinstance(t, int) for t in p) for p in prompts):
            raise ValueError("every prompt must be a non-empty list of token ids")

        def body(i: int) -> dict:  # distinct per-prompt seeds, also across turns (seed + 1)
            return self._body(prompts[i], n, max_tokens, temperature, top_p, (seed * 1_000_003 + i) % 2**63)

        first = self._request(body(0))  # settles the vLLM extensions before the fan-out
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            rest = list(pool.map(self._request, [body(i) for i in range(1, len(prompts))]))
        return [self._samples(a, n) for a in [first, *rest]]

    def sync(self, state_dict_or_adapter_dir: Any) -> None:
        raise EndpointError("an endpoint policy cannot take new weights; restart the server with them")

    def score(self, token_ids: list[int]) -> list[float]:
        raise EndpointError("log-prob scoring is not offered for endpoint policies")

    def close(self) -> None:
        """Nothing to release (each request opens its own connection)."""
