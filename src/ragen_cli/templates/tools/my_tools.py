"""The tool of the run in ragen.yaml: a Python function the model calls by name.

ragen builds its JSON schema from the type hints and the docstring (transformers'
`get_json_schema`: a Google-style docstring with an `Args:` line per argument), renders it through
the model's chat template (or, for a template without tool support, into the system prompt), and
calls it with exactly the arguments the model wrote, after checking them against that schema.
Check the schema by hand:

    python -c "from transformers.utils import get_json_schema; from my_tools import multiply; print(get_json_schema(multiply))"
"""

from __future__ import annotations


def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b
