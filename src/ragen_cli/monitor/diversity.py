"""Response diversity of one step's replies (Echo Trap signal: repeated templates).

The paper (RAGEN, arXiv 2504.20073, Sec. 4.1, "Echo Trap") describes collapsed policies that
repeat the same reasoning template across trajectories. Two cheap text measures catch that:
the distinct-n ratio (Li et al. 2016, "A Diversity-Promoting Objective...": distinct n-grams /
all n-grams, pooled over the replies) and the share of replies identical to another one.
"""

from __future__ import annotations

import re
from collections import Counter

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks (`"Go!!"` -> `["go", "!", "!"]`)."""
    return _TOKEN.findall(text.lower())


def distinct_n(texts: list[str], n: int = 2) -> float | None:
    """Distinct n-grams / total n-grams over all texts; None when the texts hold no n-gram.

    N-grams do not cross text boundaries. 1.0 means no n-gram repeats; a policy that writes the
    same reply every time tends to 1 / (number of replies).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    grams: list[tuple[str, ...]] = []
    for text in texts:
        toks = tokens(text)
        grams.extend(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))
    if not grams:
        return None
    return len(set(grams)) / len(grams)


def identical_share(texts: list[str]) -> float | None:
    """Share of texts (whitespace-stripped) equal to at least one other text; None for no texts."""
    if not texts:
        return None
    counts = Counter(t.strip() for t in texts)
    return sum(c for c in counts.values() if c > 1) / len(texts)
