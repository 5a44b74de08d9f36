"""Reward functions for the dataset task in ragen.yaml, in TRL's signature:

    fn(prompts, completions, **columns) -> list[float | None]

ragen calls each with one episode at a time: `prompts` and `completions` are one-element lists
(the completion is the reply's answer), and every other column of the data row comes as a
keyword argument (here `answer`). Return None where a function does not apply. Check one by
hand:

    python -c "from my_rewards import correct; print(correct(['2 + 2?'], ['2 + 2 = 4'], answer=['4']))"
"""

from __future__ import annotations

import re


def correct(prompts, completions, answer, **kwargs):
    """1.0 when the last number in the reply is the answer ("9", "6 + 3 = 9."), else 0.0."""
    return [float(bool(nums := re.findall(r"-?\d+", c)) and nums[-1] == a) for c, a in zip(completions, answer)]
