"""Dataset tasks: prompts from a file, scored by reward functions (`env.train.name: dataset`).

    env:
      train:
        name: dataset
        config:
          path: data/train.jsonl          # .jsonl / .json lines, .csv, .parquet, or a `datasets.save_to_disk` folder
          prompt_field: prompt
          rewards: [my_rewards:correct]   # module:function, imported from the spec's folder (then where ragen runs)
      val:
        envs: [{name: dataset, config: {path: data/val.jsonl, rewards: [my_rewards:correct]}}]

A reward function has the signature TRL users already write,
`fn(prompts, completions, **columns) -> list[float | None]`: ragen calls it with one episode at
a time (`prompts=[prompt]`, `completions=[answer]`, every other column of the row as a
one-element list) and reads the first value. `None` means "does not apply" and is left out of
the weighted sum. The completion is the reply's answer (the text inside `<answer>...</answer>`,
or the whole reply with thinking off); a reply that does not parse gets the format penalty and
no reward call. Each function's mean over the step's episodes is the metric `reward/fn/<fn>`.

Single-turn by default: the episode ends after the answer. With `feedback: module:function`
(`fn(prompt, completion, **columns) -> str | None`) a returned text is the next turn's
observation, up to `max_actions` answers; the rewards of every answer add up.

Row order: episode seed s reads row `perm[s mod rows]`, a fixed permutation (`shuffle`,
`shuffle_seed`), so a run's consecutive seeds walk the file in a random but repeatable order;
validation (its own seeds) reads the same way. Give validation its own file (or `split`), or it
overlaps the training rows.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ragen_cli.envs.base import EnvFailure, TextEnv, import_ref


@dataclass
class DatasetConfig:
    path: str = ""
    """The data: a .jsonl (or .json with one object per line), .csv or .parquet file, or a folder written by `datasets`' save_to_disk; relative paths start where ragen runs."""
    split: str | None = None
    """The split of a saved DatasetDict folder (train, validation, ...); omit for a single Dataset or a file."""
    prompt_field: str = "prompt"
    """The column holding the prompt text (the first observation)."""
    rewards: list[str] = field(default_factory=list)
    """Reward functions, `module:function`, TRL's signature fn(prompts, completions, **columns) -> list[float | None]."""
    weights: list[float] | None = None
    """One weight per reward function (default: 1 each); the episode reward is the weighted sum of the values that are not None."""
    system_prompt: str = "Answer the question."
    """The instruction shown before the first prompt."""
    feedback: str | None = None
    """Optional `module:function`, fn(prompt, completion, **columns) -> str | None: a text makes the next turn (multi-turn)."""
    success_threshold: float = 1.0
    """An episode succeeds when its reward reaches this."""
    shuffle: bool = True
    """Visit rows in a fixed random order (seed s -> row perm[s mod rows]); false: file order."""
    shuffle_seed: int = 0
    """Seed of that order."""
    max_actions: int = 1
    """Answers per episode (1: single-turn; more only with feedback)."""
    judge: dict | None = None
    """A judge model's score as one more reward, `judge` (envs/judge.py; docs/envs.md, "Judge rewards"): {rubric, model or url, scale, weight, max_tokens, timeout_s, api_key_env}."""

    needs_rewards = True  # (not a field) an agent env may score its episodes itself

    def __post_init__(self) -> None:
        if not self.path:
            raise ValueError("path is required: a .jsonl, .csv or .parquet file, or a saved datasets folder")
        if not self.rewards and self.needs_rewards and not self.judge:
            raise ValueError("rewards is required: at least one module:function reward function (or a judge)")
        if self.judge:
            from ragen_cli.envs.judge import JudgeConfig

            try:
                JudgeConfig(**dict(self.judge))
            except TypeError as err:
                raise ValueError(f"judge: {err}".replace("JudgeConfig.__init__() ", "")) from None
        if self.weights is not None and len(self.weights) != len(self.rewards):
            raise ValueError(f"weights has {len(self.weights)} values for {len(self.rewards)} reward functions")
        rows = load_rows(self.path, self.split)
        if not rows:
            raise ValueError(f"{self.path}: no rows")
        if self.prompt_field not in rows[0]:
            raise ValueError(f"{self.path}: no column '{self.prompt_field}' (prompt_field); columns: "
                             f"{', '.join(sorted(rows[0]))}")
        for name in [*self.rewards, *([self.feedback] if self.feedback else [])]:
            load_function(name)
        if self.max_actions > 1 and not self.feedback:
            raise ValueError("max_actions > 1 needs feedback (a function that makes the next turn's text)")


class RewardFunctionError(EnvFailure):
    """A user's reward or feedback function raised or returned something unusable; `function`
    names it (its function part, or "feedback")."""

    def __init__(self, message: str, function: str = ""):
        super().__init__(message)
        self.function = function


_ROWS: dict[tuple[str, str | None, float], list[dict]] = {}


def load_rows(path: str, split: str | None = None) -> list[dict]:
    """The rows of a data file or saved datasets folder as dicts (read once per process and file
    version: the driver makes one env per episode). Raises ValueError naming the file."""
    p = Path(os.path.expanduser(path))
    if not p.exists():
        raise ValueError(f"no such data file or folder: {path} (relative paths start at {Path.cwd()})")
    key = (str(p.resolve()), split, p.stat().st_mtime)
    if key not in _ROWS:
        _ROWS[key] = _read(p, split)
    return _ROWS[key]


def _read(p: Path, split: str | None) -> list[dict]:
    try:
        if p.is_dir():
            from datasets import DatasetDict, load_from_disk

            data = load_from_disk(str(p))
            if isinstance(data, DatasetDict):
                if split is None or split not in data:
                    raise ValueError(f"{p} holds splits {', '.join(data)}: set split to one of them")
                data = data[split]
            elif split is not None:
                raise ValueError(f"{p} holds a single dataset: remove split ({split!r})")
            return [dict(r) for r in data]
        suffix = p.suffix.lower()
        if suffix in (".jsonl", ".json"):
            rows = []
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{p}:{n}: not a JSON object ({err.msg})") from None
                    if not isinstance(row, dict):
                        raise ValueError(f"{p}:{n}: not a JSON object")
                    rows.append(row)
            return rows
        if suffix == ".csv":
            with p.open(newline="", encoding="utf-8") as f:
                return [dict(r) for r in csv.DictReader(f)]
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(str(p)).to_pylist()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read {p}: {err}") from None
    raise ValueError(f"{p}: unknown data format {p.suffix!r} (use .jsonl, .csv, .parquet or a saved datasets folder)")


def load_function(name: str) -> Callable:
    """A reward or feedback function, `module:function` (`base.import_ref`)."""
    fn = import_ref(name, "reward function")
    if not callable(fn):
        raise ValueError(f"reward function '{name}' is not callable")
    return fn


def function_name(name: str) -> str:
    """The metric name of a reward function: its function part (`my_rewards:correct` -> correct)."""
    return name.partition(":")[2]


class DatasetEnv(TextEnv):
    name = "dataset"
    description = "Prompts from a data file, scored by reward functions."
    config_class = DatasetConfig

    def __init__(self, config: Any = None):
        super().__init__(config)
        c = self.config
        self.rows = load_rows(c.path, c.split)
        order = np.random.default_rng(c.shuffle_seed).permutation(len(self.rows)) if c.shuffle else np.arange(len(self.rows))
        self.order = [int(i) for i in order]
        from ragen_cli.envs.judge import judge_from

        self.fns = [(function_name(n), load_function(n)) for n in c.rewards]
        self.weights = list(c.weights) if c.weights is not None else [1.0] * len(self.fns)
        self.judge = judge_from(c.judge)
        if self.judge is not None:  # one more reward function, `judge`
            self.fns.append(("judge", self.judge))
            self.weights.append(self.judge.config.weight)
        self.feedback = load_function(c.feedback) if c.feedback else None
        self.row_index = 0
        self.row: dict = {}
        self.text = ""
        self.total = 0.0

    def _reset(self, rng: np.random.Generator) -> dict:
        seed = self.episode_seed or 0
        self.row_index = self.order[seed % len(self.rows)]
        self.row = self.rows[self.row_index]
        self.text = str(self.row[self.config.prompt_field])
        self.total = 0.0
        self.fn_totals: dict[str, float] = {}
        return {"row": self.row_index}

    def _columns(self) -> dict[str, Any]:
        return {k: v for k, v in self.row.items() if k != self.config.prompt_field}

    def _call(self, name: str, fn: Callable, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            raise RewardFunctionError(
                f"{name} raised on row {self.row_index} of {self.config.path} (episode seed {self.episode_seed}): "
                f"{type(err).__name__}: {err}", name) from err

    def _step(self, action: str) -> tuple[float, bool, dict]:
        prompt = str(self.row[self.config.prompt_field])
        columns = self._columns()
        values: dict[str, float | None] = {}
        reward = 0.0
        for (name, fn), weight in zip(self.fns, self.weights):
            out = self._call(name, fn, [prompt], [action], **{k: [v] for k, v in columns.items()})
            if not isinstance(out, (list, tuple)) or len(out) != 1:
                raise RewardFunctionError(f"{name} must return a list with one value per completion, got "
                                          f"{out!r:.80} on row {self.row_index} of {self.config.path}", name)
            value = out[0]
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                    raise RewardFunctionError(f"{name} returned {value!r:.40} (not a finite number or None) on row "
                                              f"{self.row_index} of {self.config.path}", name)
                reward += weight * float(value)
            values[name] = None if value is None else float(value)
        self.total += reward
        for name, value in values.items():  # the episode's sum per function (None until one applies)
            if value is not None:
                self.fn_totals[name] = (self.fn_totals.get(name) or 0.0) + value
        terminated = True
        if self.feedback is not None:  # on the last allowed answer the base class truncates
            text = self._call("feedback", self.feedback, prompt, action, **columns)
            if text is not None:
                self.text, terminated = str(text), False
        info = {"action_is_valid": True, "action_is_effective": True,
                "reward_fns": {name: self.fn_totals.get(name) for name, _ in self.fns}}
        if self.judge is not None:  # saved with the trajectory (envs/judge.py)
            info.update(judge_reply=self.judge.last_reply, judge_failed=int(values.get("judge") is None))
        return reward, terminated, info

    def _render(self) -> str:
        return self.text

    def probe_completion(self) -> str:
        """A plausible completion for `ragen validate`'s probe (envs/probe.py): the row's `answer`
        column as text where it has one, else "42"."""
        answer = self.row.get("answer")
        return "42" if answer is None else str(answer)

    def _success(self) -> bool:
        return self.total >= self.config.success_threshold

    def instruction(self) -> str:
        return self.config.system_prompt

    def valid_actions(self) -> list[str]:
        return []  # free-form answers
