"""The policy behind an OpenAI-compatible endpoint, recording what it samples (issue 74).

An agent program that calls a chat model through the OpenAI client trains unchanged: ragen
serves the policy at `http://127.0.0.1:PORT/e/EPISODE/v1` (`/chat/completions`,
`/completions`, `/models`), one base URL per episode, and records, for each request, the exact
prompt token ids (ragen applies the chat template), the sampled ids and their log-probs.

Stitching (the per-turn rules of rollout/context.py): a chat request whose messages are the
previous request's messages, then the reply ragen returned (as returned), then new messages,
continues the episode's token list: its prompt is that list plus the template's piece for the
new messages (`ChatFormat.messages_delta`), so every earlier token is the one sampled, never
re-tokenised. Any other request (the agent edited its history, dropped a turn, or the template
re-renders) starts a row of its own: its prompt is the template's rendering of its messages,
recorded as the turn's `turn_prompts` entry. `episode_trajectory` lays the requests out in order
(a new row's whole prompt where it starts) and the update trains one row per request
(train/turn_rows.py), each on exactly the prompt it was sampled from.

Sampling is the run's: a request's `temperature` and `top_p` are replaced by the spec's
(counted in `EndpointStats.overridden`, said once in the run's log), `max_tokens` is capped at
`rollout.max_tokens_per_turn`; `n > 1`, `logit_bias`, `stop` and `logprobs` beyond the sampled
token's would change what is sampled or how it is scored, and are refused (HTTP 400, the
OpenAI error shape). Requests of all episodes are queued and sent to the engine together
(`Batcher`): concurrent agents share each engine call.

The backend (HF or vLLM) is the rollout engine of the run: one thread calls it; the HTTP
threads wait on their request's result.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from ragen_cli.rollout.context import ChatFormat
from ragen_cli.rollout.endpoint_http import RequestError, handler
from ragen_cli.rollout.types import Sample, Trajectory, TurnRecord

REFUSED = {"n": "n > 1 (each request samples one reply; run the agent once per sample instead)",
           "logit_bias": "logit_bias (it changes the sampled distribution, so the recorded log-probs would not be the policy's)",
           "stop": "stop sequences (the reply ends at the model's own end-of-turn token)",
           "best_of": "best_of (one sample a request)"}


@dataclass
class Call:
    """One request of an episode as served: the prompt ids the engine saw, what it sampled, the
    end-of-turn tokens the template adds after a reply cut at max_tokens, whether the prompt
    continued the episode's token list, and the messages with the returned reply appended."""

    prompt_ids: list[int]
    sample: Sample
    end_ids: list[int]
    extends: bool
    history: list[dict] | None  # chat: the request's messages + the assistant reply as returned


@dataclass
class EpisodeLog:
    """The requests of one episode, in order; `ids` is the episode's token list so far (the last
    call's prompt, reply and end tokens). `lock`: one request of an episode at a time."""

    calls: list[Call] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    history: list[dict] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass
class EndpointStats:
    requests: int = 0
    refused: int = 0
    overridden: int = 0  # requests whose temperature / top_p the run's replaced
    new_rows: int = 0  # requests that did not continue their episode's token list


class AgentChatFormat(ChatFormat):
    """The run's chat template as an agent's requests use it: plain chat, nothing pre-filled
    after the generation prompt (the paper's `<answer>` belongs to ragen's own prompts)."""

    def __init__(self, tokenizer: Any):
        super().__init__(tokenizer, think=False)
        self.prefill = ""


def _check_params(body: dict, stats: EndpointStats) -> None:
    for key, why in REFUSED.items():
        value = body.get(key)
        if value is None or (key == "n" and value == 1) or (key in ("logit_bias", "stop") and not value):
            continue
        raise RequestError(f"ragen's endpoint does not take {why}")
    if body.get("top_logprobs"):
        raise RequestError("ragen's endpoint does not take top_logprobs (only the sampled token's log-prob is recorded)")
    if any(k in body for k in ("temperature", "top_p")):
        stats.overridden += 1


def chat_prompt(fmt: ChatFormat, log: EpisodeLog, messages: list[dict], tools: list | None) -> tuple[list[int], bool]:
    """(prompt ids, continues the episode) for a chat request (module docstring: stitching)."""
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise RequestError("messages must be a non-empty list of {role, content} objects")
    kwargs = {"tools": tools} if tools else {}
    prev = log.history
    if prev is not None and len(messages) > len(prev) and _same(messages[: len(prev)], prev) and fmt.prefix_stable:
        try:
            delta = _delta(fmt, prev, messages[len(prev):], kwargs)
            return log.ids + delta, True
        except ValueError:  # the template does not render this history as a prefix: a row of its own
            pass
    text = fmt.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **fmt.kwargs, **kwargs)
    return fmt.encode(text), False


def _delta(fmt: ChatFormat, history: list[dict], new: list[dict], kwargs: dict) -> list[int]:
    if not kwargs:
        return fmt.messages_delta(history, new)
    saved = dict(fmt.kwargs)
    fmt.kwargs.update(kwargs)
    try:
        return fmt.messages_delta(history, new)
    finally:
        fmt.kwargs = saved


def _same(a: list[dict], b: list[dict]) -> bool:
    """Messages equal as the template reads them (role, content, name, tool calls)."""
    keys = ("role", "content", "name", "tool_calls", "tool_call_id")
    norm = lambda m: {k: (m.get(k) or None) for k in keys}  # noqa: E731 (None and "" alike)
    return len(a) == len(b) and all(norm(x) == norm(y) for x, y in zip(a, b))


class Batcher:
    """One thread that sends queued prompts to the backend together; callers block on `submit`."""

    def __init__(self, backend: Any, rollout: Any, seed: int, wait_s: float = 0.005):
        self.backend, self.rollout, self.seed, self.wait_s = backend, rollout, seed, wait_s
        self.queue: queue.Queue = queue.Queue()
        self.calls = 0
        self.thread = threading.Thread(target=self._loop, name="ragen-endpoint-batcher", daemon=True)
        self.thread.start()

    def submit(self, prompt: list[int], max_tokens: int) -> Sample:
        done = threading.Event()
        box: dict = {}
        self.queue.put((prompt, max_tokens, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["sample"]

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            first = self.queue.get()
            if first is None:
                return
            batch = [first]
            time.sleep(self.wait_s)
            while not self.queue.empty():
                item = self.queue.get()
                if item is None:
                    self.queue.put(None)
                    break
                batch.append(item)
            self._run(batch)

    def _run(self, batch: list) -> None:
        r = self.rollout
        try:
            outs = self.backend.generate([b[0] for b in batch], n=1, max_tokens=max(b[1] for b in batch),
                                         temperature=r.temperature, top_p=r.top_p, seed=self.seed + 1000 * self.calls)
            self.calls += 1
            for (prompt, max_tokens, box, done), [sample] in zip(batch, outs):
                box["sample"] = _cut(sample, max_tokens)
                done.set()
        except BaseException as exc:  # noqa: BLE001 (handed to every waiting request)
            for *_, box, done in batch:
                box["error"] = exc
                done.set()


def _cut(sample: Sample, max_tokens: int) -> Sample:
    """A sample of a batch generated to a longer max_tokens, cut to this request's."""
    if len(sample.token_ids) <= max_tokens:
        return sample
    return Sample(sample.token_ids[:max_tokens], sample.logprobs[:max_tokens], "", "length")


class PolicyEndpoint:
    """The HTTP server (module docstring). `fmt`: the run's chat format; `rollout`: the spec's
    rollout section (sampling, max tokens); `parser`: the tool-call format of replies to requests
    that send `tools` (envs/tools/formats.py)."""

    def __init__(self, backend: Any, fmt: ChatFormat, rollout: Any, seed: int = 0, parser: str = "hermes",
                 model_name: str = "ragen-policy", max_context: int | None = None):
        self.fmt, self.rollout, self.parser, self.model_name = fmt, rollout, parser, model_name
        self.max_context = max_context
        self.batcher = Batcher(backend, rollout, seed)
        self.episodes: dict[str, EpisodeLog] = {}
        self.stats = EndpointStats()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="ragen-endpoint", daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def base_url(self, episode: str) -> str:
        """The OpenAI base URL of one episode."""
        return f"http://127.0.0.1:{self.port}/e/{episode}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.batcher.close()

    # ------------------------------------------------------------------ requests
    def chat(self, episode: str, body: dict) -> dict:
        _check_params(body, self.stats)
        messages, tools = body.get("messages"), body.get("tools")
        log = self._episode(episode)
        with log.lock:
            prompt, extends = chat_prompt(self.fmt, log, messages, tools)
            self._fits(prompt, body)
            sample = self.batcher.submit(prompt, self._max_tokens(body))
            text = self.fmt.strip_end(self.fmt.tokenizer.decode(sample.token_ids, skip_special_tokens=False))
            message, finish = self._message(text, sample, bool(tools))
            self._record(log, prompt, sample, extends, list(messages) + [message])
        return {"id": f"chatcmpl-{episode}-{len(log.calls)}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model_name, "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                       "logprobs": None}],
                "usage": _usage(prompt, sample)}

    def completion(self, episode: str, body: dict) -> dict:
        _check_params(body, self.stats)
        prompt_text = body.get("prompt")
        if not isinstance(prompt_text, str) or not prompt_text:
            raise RequestError("prompt must be a non-empty string (one prompt a request)")
        prompt = self.fmt.encode(prompt_text)
        self._fits(prompt, body)
        log = self._episode(episode)
        with log.lock:
            sample = self.batcher.submit(prompt, self._max_tokens(body))
            extends = bool(log.ids) and prompt[: len(log.ids)] == log.ids
            self._record(log, prompt, sample, extends, None)
        text = self.fmt.tokenizer.decode(sample.token_ids, skip_special_tokens=False)
        return {"id": f"cmpl-{episode}-{len(log.calls)}", "object": "text_completion", "created": int(time.time()),
                "model": self.model_name, "choices": [{"index": 0, "text": self.fmt.strip_end(text),
                                                       "finish_reason": sample.finish_reason, "logprobs": None}],
                "usage": _usage(prompt, sample)}

    def _episode(self, episode: str) -> EpisodeLog:
        with self.lock:
            return self.episodes.setdefault(episode, EpisodeLog())

    def _fits(self, prompt: list[int], body: dict) -> None:
        """Refuse a prompt that leaves no room for the reply within model.max_context."""
        if self.max_context is not None and len(prompt) + self._max_tokens(body) > self.max_context:
            raise RequestError(f"the prompt ({len(prompt)} tokens) and the reply ({self._max_tokens(body)}) do not fit "
                               f"model.max_context = {self.max_context}")

    def _max_tokens(self, body: dict) -> int:
        cap = self.rollout.max_tokens_per_turn
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        if asked is None:
            return cap
        if not isinstance(asked, int) or asked < 1:
            raise RequestError("max_tokens must be a positive whole number")
        return min(asked, cap)

    def _message(self, text: str, sample: Sample, tools: bool) -> tuple[dict, str]:
        if tools:
            from ragen_cli.envs.tools.formats import ToolCallError, parse_calls

            try:
                calls = parse_calls(text, self.parser)
            except ToolCallError:
                calls = []  # a malformed call goes back as text: the agent sees what the model wrote
            if calls:
                tool_calls = [{"id": f"call_{i}", "type": "function",
                               "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                              for i, c in enumerate(calls)]
                return {"role": "assistant", "content": text, "tool_calls": tool_calls}, "tool_calls"
        return {"role": "assistant", "content": text}, sample.finish_reason

    def _record(self, log: EpisodeLog, prompt: list[int], sample: Sample, extends: bool, history) -> None:
        stopped = bool(sample.token_ids) and sample.finish_reason == "stop"
        end = self.fmt.end_tokens(stopped)
        log.calls.append(Call(list(prompt), sample, end, extends, history))
        log.ids = list(prompt) + list(sample.token_ids) + end
        log.history = history
        self.stats.requests += 1
        self.stats.new_rows += not extends and len(log.calls) > 1


def _usage(prompt: list[int], sample: Sample) -> dict:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(sample.token_ids),
            "total_tokens": len(prompt) + len(sample.token_ids)}


def episode_trajectory(log: EpisodeLog, reward: float, group: int = 0, seed: int = 0,
                       env_name: str = "agent") -> Trajectory:
    """The episode's requests as one trajectory: each request's prompt piece (mask 0: the new
    part when it continued the token list, its whole prompt when it started a row, recorded in
    `turn_prompts`), its sampled ids (mask 1, their log-probs) and end tokens; the reward on the
    last turn."""
    traj = Trajectory(group=group, seed=seed, env_name=env_name)
    for k, call in enumerate(log.calls):
        s = call.sample
        if call.extends and k > 0:
            prev = log.calls[k - 1]
            traj.append(call.prompt_ids[len(prev.prompt_ids) + len(prev.sample.token_ids) + len(prev.end_ids):], 0)
        else:
            traj.append(call.prompt_ids, 0)
        # the layout so far is this request's prompt until a row of its own started: from then on
        # each turn names the prompt it was sampled from
        traj.turn_prompts.append(None if traj.input_ids == call.prompt_ids else list(call.prompt_ids))
        traj.turn_start.append(len(traj.input_ids))
        traj.append(s.token_ids, 1, s.logprobs)
        traj.turn_end.append(len(traj.input_ids) - 1)
        traj.append(call.end_ids, 0)
        last = k == len(log.calls) - 1
        traj.turn_rewards.append(reward if last else 0.0)
        traj.turns.append(TurnRecord(obs="", reply=s.text, actions=[], reward=reward if last else 0.0,
                                     format_ok=True, finish_reason=s.finish_reason))
    traj.task_reward = reward
    traj.check()
    return traj
