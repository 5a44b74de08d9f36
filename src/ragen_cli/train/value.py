"""The critic: the policy's backbone with a scalar value head on every position.

`AutoModelForTokenClassification(num_labels=1)` over the same checkpoint (verl and RAGEN do
the same): the backbone weights load from the causal-LM directory, the head `score` is a new
Linear(hidden, 1) drawn from torch's seeded RNG. Dropout before the head is turned off so a
value is a function of the state only. With LoRA the critic gets its own adapter (same rank /
alpha / targets) and the head is trained in full (peft `modules_to_save`).
"""

from __future__ import annotations

from pathlib import Path


def load_value_model(model_dir: str | Path, lora_spec=None):
    """The critic module (train mode), optionally LoRA-wrapped."""
    from transformers import AutoConfig, AutoModelForTokenClassification

    config = AutoConfig.from_pretrained(str(model_dir), num_labels=1)
    config.classifier_dropout = 0.0
    config.hidden_dropout = 0.0
    model = AutoModelForTokenClassification.from_pretrained(str(model_dir), config=config)
    if lora_spec is not None:
        from ragen_cli.train.lora import wrap

        model = wrap(model, lora_spec, task_type="TOKEN_CLS")
    return model.train()
