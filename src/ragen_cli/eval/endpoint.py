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
- Faults are retried a bounded number of times (`Retry`): timeouts, dropped connections, HTTP
  408 / 429 / 5xx and answers that are not a completions JSON object, with exponential backoff;
  a 429 or 503 with `Retry-After` waits what the server asks, up to `max_wait_s`. Other HTTP
  errors (400, 401, 404, ...) are not retried. The last failure is an EndpointError naming the
  URL, the number of tries and the cause.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable


VLLM_EXTRAS = ("return_token_ids", "stop_token_ids", "skip_special_tokens")
RETRY_STATUS = (408, 429, 500, 502, 503, 504)
DEFAULT_CONCURRENCY = 8


class EndpointError(RuntimeError):
    """The endpoint cannot be reached or answered with something unusable."""


class TransientEndpointError(EndpointError):
    """A failure worth another try; `retry_after`: seconds the server asked to wait, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Retry:
    """How often and how patiently a request is tried again."""

    attempts: int = 5  # tries per request, the first included
    backoff_s: float = 1.0  # wait after the first failed try; doubled after each further one
    max_wait_s: float = 30.0  # the longest single wait, a server's Retry-After included

    def delay(self, failed_tries: int, retry_after: float | None) -> float:
        """Seconds to wait after `failed_tries` (>= 1) failures: Retry-After when given, else
        backoff_s x 2^(failed_tries - 1); never more than max_wait_s."""
        wait = retry_after if retry_after is not None else self.backoff_s * 2 ** (failed_tries - 1)
        return max(0.0, min(self.max_wait_s, wait))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """An HTTP Retry-After header (delta-seconds or an HTTP-date) in seconds; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def completions_url(base: str) -> str:
    """`http://host:port`, `.../v1` or `.../v1/completions` -> the completions URL."""
    base = base.rstrip("/")
    if base.endswith("/v1/completions"):
        return base
    return base + ("/completions" if base.endswith("/v1") else "/v1/completions")


def post_json(url: str, body: dict, timeout: float, api_key: str | None = None) -> dict:
    """POST a JSON body and decode the JSON object answered; HTTP errors carry the server's
    message. Failures worth another try are TransientEndpointError."""
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:500]
        message = f"{url} answered HTTP {err.code}: {detail}"
        if err.code in RETRY_STATUS:
            raise TransientEndpointError(message, retry_after_seconds(err.headers.get("Retry-After"))) from None
        raise EndpointError(message) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", err)
        raise TransientEndpointError(f"cannot reach the endpoint {url}: {reason or type(err).__name__}") from None
    try:
        answer = json.loads(raw.decode())
    except (ValueError, UnicodeDecodeError):
        raise TransientEndpointError(f"{url} answered malformed JSON: {raw[:200]!r}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        raise TransientEndpointError(f"{url} answered JSON without a list of choices: {str(answer)[:200]}")
    return answer


def post_with_retries(url: str, body: dict, timeout: float, api_key: str | None, retry: Retry,
                      sleep: Callable[[float], None] | None = None) -> dict:
    """`post_json`, tried again on transient failures as `retry` says; `sleep` waits (default
    `time.sleep`, looked up at the wait)."""
    for tries in range(1, retry.attempts + 1):
        try:
            return post_json(url, body, timeout, api_key)
        except TransientEndpointError as err:
            if tries == retry.attempts:
                raise EndpointError(f"no usable answer after {tries} tries: {err}") from None
            (sleep or time.sleep)(retry.delay(tries, err.retry_after))
    raise AssertionError("unreachable")


class EndpointBackend:
    """`Backend` (docs/internals.md, rollout/) backed by an OpenAI-compatible completions API."""

    name = "endpoint"

    def __init__(self, url: str, model: str, tokenizer: Any, *, timeout: float = 300.0,
                 api_key: str | None = None, concurrency: int = DEFAULT_CONCURRENCY, retry: Retry = Retry(),
                 sleep: Callable[[float], None] | None = None):
        self.url = completions_url(url)
        self.model = model
        self.tokenizer = tokenizer
        self.timeout = timeout
        self.api_key = api_key
        self.concurrency = concurrency
        self.retry = retry
        self._sleep = sleep
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
            return post_with_retries(self.url, body, self.timeout, self.api_key, self.retry, self._sleep)
        except EndpointError as err:
            if self._extras_ok and "HTTP 400" in str(err) and any(x in str(err) for x in VLLM_EXTRAS):
                self._extras_ok = False
                return post_with_retries(self.url, {k: v for k, v in body.items() if k not in VLLM_EXTRAS},
                                         self.timeout, self.api_key, self.retry, self._sleep)
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
            futures = [pool.submit(self._request, body(i)) for i in range(1, len(prompts))]
            try:
                rest = [f.result() for f in futures]
            except EndpointError:
                for f in futures:  # one request failed for good: do not start the others
                    f.cancel()
                raise
        return [self._samples(a, n) for a in [first, *rest]]

    def sync(self, state_dict_or_adapter_dir: Any) -> None:
        raise EndpointError("an endpoint policy cannot take new weights; restart the server with them")

    def score(self, token_ids: list[int]) -> list[float]:
        raise EndpointError("log-prob scoring is not offered for endpoint policies")

    def score_batch(self, sequences: list[list[int]]) -> list[list[float]]:
        return [self.score(ids) for ids in sequences]

    def close(self) -> None:
        """Nothing to release (each request opens its own connection)."""
