"""The reward of the tool task in ragen.yaml, in TRL's signature:

    fn(prompts, completions, **columns) -> list[float | None]

ragen calls it once per episode, on the final answer (the first reply without a tool call): the
completion is that reply, and the `answer` column of the data row comes as a keyword argument.
An episode that never answers (it used up max_actions on tool calls) is not scored and gets 0.

    python -c "from my_rewards import correct; print(correct(['3 * 4?'], ['12'], answer=['12']))"
"""

from __future__ import annotations

import re


def correct(prompts, completions, answer, **kwargs):
    """1.0 when the first number of the answer is the product (digits only: "281,136" reads as 281136)."""
    out = []
    for c, a in zip(completions, answer):
        m = re.search(r"\d[\d,]*", c)
        out.append(float(m is not None and m.group().replace(",", "") == a))
    return out
