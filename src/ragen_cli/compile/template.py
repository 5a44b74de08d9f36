"""Whether the run's chat template renders earlier turns as a prefix of later ones, decided
before the run starts so that the Plan (and the dry run) say how the update reads episodes.

A prefix-stable template (ChatML as SmolLM2 and Qwen2.5 use it, Llama 3, Gemma) lets an episode
train as one token sequence. One that re-renders history (Qwen3 drops the reasoning of earlier
replies) makes the update train one row per turn on exactly the prompt that turn was sampled
from (`Plan.turn_rows`; rollout/context.py, train/turn_rows.py). The check renders a probe
conversation with the run's template, its variables and reply tags (`ChatFormat`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragen_cli.spec.models import RunSpec

STABLE = "renders earlier turns as a prefix of later ones: an episode trains as one sequence"
RERENDERS = ("re-renders earlier turns (e.g. drops their reasoning): the update trains one row per turn, on exactly "
             "the prompt that turn was sampled from")
UNKNOWN = "not checked: the model's tokenizer is not on this machine yet; the run checks it when it starts"


@dataclass(frozen=True)
class TemplateCheck:
    stable: bool | None  # None: not known before the run loads the tokenizer
    why: str


def template_check(spec: RunSpec) -> TemplateCheck:
    """Load the run's tokenizer (only what is on this machine: a built-in's, a local directory's or
    one in the Hugging Face cache) with the spec's template, and probe it."""
    try:
        tokenizer = _local_tokenizer(spec)
    except LookupError:
        return TemplateCheck(None, UNKNOWN)
    return TemplateCheck(True, STABLE) if tokenizer is None else check_tokenizer(spec, tokenizer)


def check_tokenizer(spec: RunSpec, tokenizer) -> TemplateCheck:
    """The probe on a tokenizer already loaded (with `models.load.load_tokenizer(dir, spec.model)`)."""
    from ragen_cli.rollout.context import ChatFormat
    from ragen_cli.rollout.parse import ReplyTags

    stable = ChatFormat(tokenizer, spec.rollout.think, ReplyTags.of(spec.rollout)).prefix_stable
    return TemplateCheck(stable, STABLE if stable else RERENDERS)


def _local_tokenizer(spec: RunSpec):
    """The tokenizer as the run loads it, or None for a built-in model with its own template (ChatML,
    prefix-stable: nothing to load); LookupError when it is not on this machine."""
    from pathlib import Path

    from ragen_cli.models.builtin import BUILTIN_MODELS
    from ragen_cli.models.load import load_tokenizer

    name = spec.model.name
    if name in BUILTIN_MODELS:
        if spec.model.chat_template is None and not spec.model.chat_template_kwargs:
            return None
        from ragen_cli.models.convert import tokenizer_dir

        return load_tokenizer(tokenizer_dir(), spec.model)
    path = Path(name).expanduser()
    if path.is_dir():
        return load_tokenizer(path, spec.model)
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(name, local_files_only=True)
    except Exception as exc:  # not in the cache (huggingface_hub raises several types)
        raise LookupError(name) from exc
    return load_tokenizer(local, spec.model)
