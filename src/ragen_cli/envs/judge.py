"""Judge rewards: a model scores a completion against a rubric (docs/envs.md, "Judge rewards").

    env:
      train:
        name: dataset                   # or tools, agent: any env on the dataset adapter
        config:
          path: data/train.jsonl
          rewards: [my_rewards:format]  # optional beside a judge
          judge:
            rubric: "Question: {prompt}\\nAnswer: {completion}\\nReference: {answer}\\nScore the answer from 0 to 10. Score:"
            model: smollm2-135m-instruct   # a built-in or local model ragen runs (greedy), or the model at url
            url: null                      # an OpenAI-compatible base URL (http://host:8000/v1) instead
            scale: 10                      # the number read from the reply, divided by this: the reward
            weight: 1.0

The rubric is a Python format string over the row's columns, `prompt` and `completion`. The
judge's reply is read for its first number (`parse_score`); the reward is that number / `scale`,
clipped to [0, 1], under the reward-function name `judge` (`reward/fn/judge`). A reply without a
number, an HTTP error, a timeout or a judge model that fails is no reward for that episode
(`None`: left out of the weighted sum, as a reward function's None), counted in
`judge/failed_ratio`, never a crash. Each episode's judge reply is saved with its trajectory
(`info.judge_reply` in trajectories/step-K.jsonl).

A local judge runs in the trainer's process through transformers, greedy, one prompt at a time
(the episodes of a step are scored as their answers arrive); a URL judge is called through the
`openai` client with temperature 0.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass
class JudgeConfig:
    rubric: str = ""
    """The judge's prompt: a format string over the row's columns, {prompt} and {completion}."""
    model: str = "smollm2-135m-instruct"
    """With no url: a built-in model name or a local model directory ragen runs as the judge (greedy). With a url: the model name sent to it."""
    url: str | None = None
    """An OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1); the key comes from api_key_env."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the URL judge's API key (unset: a placeholder key)."""
    scale: float = 10.0
    """The judge's number is divided by this to make the reward (then clipped to [0, 1])."""
    weight: float = 1.0
    """The judge reward's weight in the episode reward."""
    max_tokens: int = 16
    """Longest judge reply."""
    timeout_s: float = 60.0
    """Longest wait for a URL judge's reply; past it the episode gets no judge reward."""

    def __post_init__(self) -> None:
        if not self.rubric or "{completion}" not in self.rubric:
            raise ValueError("judge.rubric is required and must contain {completion} (where the answer goes)")
        if not self.scale > 0 or self.max_tokens < 1 or not self.timeout_s > 0:
            raise ValueError("judge.scale, judge.max_tokens and judge.timeout_s must be positive")


def parse_score(reply: str, scale: float) -> float | None:
    """The first number in `reply` / `scale`, clipped to [0, 1]; None when there is no number."""
    m = _NUMBER.search(reply or "")
    if m is None:
        return None
    return min(1.0, max(0.0, float(m.group()) / scale))


def judge_prompt(rubric: str, prompt: str, completion: str, columns: dict) -> str:
    """The rubric filled in; a column the rubric names but the row lacks is a ValueError."""
    try:
        return rubric.format(**{**{k: v for k, v in columns.items()}, "prompt": prompt, "completion": completion})
    except KeyError as err:
        raise ValueError(f"judge.rubric names {{{err.args[0]}}}, which the row has no column for "
                         f"(columns: {', '.join(sorted(columns))}, prompt, completion)") from None


class Judge:
    """A reward function in TRL's signature that asks the judge (module docstring). `failures`
    and `calls` count its episodes; `last_reply` is the judge's reply to the last call."""

    __name__ = "judge"

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.calls = self.failures = 0
        self.last_reply = ""

    def __call__(self, prompts, completions, **columns) -> list[float | None]:
        out = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            row = {k: v[i] for k, v in columns.items()}
            text = judge_prompt(self.config.rubric, prompt, completion, row)  # a rubric error is the user's: raised
            self.calls += 1
            try:
                self.last_reply = _ask(self.config, text)
                score = parse_score(self.last_reply, self.config.scale)
            except Exception as exc:  # noqa: BLE001 (a judge that fails is no reward, never a crash)
                self.last_reply, score = f"(judge failed: {type(exc).__name__}: {exc})", None
            self.failures += score is None
            out.append(score)
        return out


def _ask(config: JudgeConfig, text: str) -> str:
    if config.url:
        import os

        import openai

        client = openai.OpenAI(base_url=config.url, api_key=os.environ.get(config.api_key_env) or "none",
                               max_retries=0, timeout=config.timeout_s)
        reply = client.chat.completions.create(model=config.model, messages=[{"role": "user", "content": text}],
                                               temperature=0.0, max_tokens=config.max_tokens)
        return reply.choices[0].message.content or ""
    return _local(config.model).reply(text, config.max_tokens)


class _LocalJudge:
    """A model ragen loads (fp32, CPU or the trainer's device) and asks greedily."""

    def __init__(self, name: str):
        from ragen_cli.models.builtin import resolve_model
        from ragen_cli.models.load import load_causal_lm, load_tokenizer

        path = resolve_model(name, "float32")
        self.tokenizer = load_tokenizer(path)
        self.model = load_causal_lm(path, "float32").eval()
        self.lock = threading.Lock()

    def reply(self, text: str, max_tokens: int) -> str:
        import torch

        ids = self.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                 return_tensors="pt", return_dict=True)
        with self.lock, torch.no_grad():
            out = self.model.generate(**ids, max_new_tokens=max_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        return self.tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


_JUDGES: dict[str, _LocalJudge] = {}
_JUDGES_LOCK = threading.Lock()


def _local(name: str) -> _LocalJudge:
    with _JUDGES_LOCK:
        if name not in _JUDGES:
            _JUDGES[name] = _LocalJudge(name)
        return _JUDGES[name]


def judge_metrics(trajs: list) -> dict[str, float]:
    """`judge/failed_ratio` over the step's episodes a judge scored (`info["judge_failed"]`); {} when none."""
    judged = [t.info["judge_failed"] for t in trajs if "judge_failed" in t.info]
    return {"judge/failed_ratio": sum(judged) / len(judged)} if judged else {}


def judge_from(config: Any) -> Judge | None:
    """The env config's judge (a dict from the spec, or a JudgeConfig), or None."""
    if not config:
        return None
    return Judge(config if isinstance(config, JudgeConfig) else JudgeConfig(**dict(config)))
