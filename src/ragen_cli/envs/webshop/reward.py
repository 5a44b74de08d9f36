"""WebShop's purchase reward (Yao et al. 2022, "WebShop", sec. 3.2), following the original
`web_agent_site/engine/goal.py::get_reward` (princeton-nlp/WebShop):

    reward = r_type * (n_attr_match + n_option_match + r_price) / (|U_att| + |U_opt| + 1)

- `n_attr_match`: goal attributes found in the product's attributes (fuzzy token-set ratio
  > 85) or as substrings of its title, bullet points or description;
- `n_option_match`: chosen options matching a goal option (exact for `size`, fuzzy otherwise,
  else a substring of title / bullets / description), colours normalised first;
- `r_price`: 1 when the price paid is <= the goal's price upper bound;
- `r_type` in {0, 0.1, 0.5, 1}: product-type match from query, category and title overlap.

Departures (no spaCy model and no thefuzz on this machine):
1. `title_score` takes the lower-cased content words (alphabetic, not stop words) of the two
   names instead of spaCy's NOUN/PROPN tokens.
2. `token_set_ratio` is re-implemented here with the Indel ratio 2*LCS/(|a|+|b|) that
   rapidfuzz (thefuzz's backend) uses; `normalize_color` uses a short colour list.
3. The total is clipped to 1.0 (the original can exceed 1 when more options are chosen than the
   goal names).
"""

from __future__ import annotations

import re

EXACT_MATCH_OPTS = ("size",)
COLORS = ("black", "white", "gray", "grey", "red", "blue", "navy", "green", "yellow", "orange",
          "pink", "purple", "brown", "beige", "silver", "gold", "khaki", "ivory", "teal")
STOPWORDS = frozenset(
    "a an and the of for with in on to by from at or as is are be this that it its s men women "
    "mens womens unisex pack count ounce oz inch x".split())


def normalize_color(text: str) -> str:
    """'Navy Blue' -> 'navy' (first known colour contained), else the text unchanged."""
    low = text.lower()
    for color in COLORS:
        if color in low:
            return color
    return text


def _process(text: str) -> list[str]:
    """thefuzz's default processing: lower-case, non-alphanumerics to spaces, split."""
    return re.sub(r"[^0-9a-z]+", " ", str(text).lower()).split()


def _lcs(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for ch in a:
        cur = [0]
        for j, bj in enumerate(b):
            cur.append(prev[j] + 1 if ch == bj else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def ratio(a: str, b: str) -> float:
    """Indel similarity in [0, 100]: 100 * 2 * LCS(a, b) / (|a| + |b|)."""
    if not a and not b:
        return 100.0
    return 200.0 * _lcs(a, b) / (len(a) + len(b))


def token_set_ratio(a: str, b: str) -> float:
    """Token-set similarity (thefuzz / rapidfuzz definition): 100 when one token set contains
    the other, else the best ratio among intersection and intersection + remainders."""
    ta, tb = set(_process(a)), set(_process(b))
    if not ta or not tb:
        return 0.0
    common = " ".join(sorted(ta & tb))
    rest_a, rest_b = " ".join(sorted(ta - tb)), " ".join(sorted(tb - ta))
    if common and (not rest_a or not rest_b):
        return 100.0
    comb_a = f"{common} {rest_a}".strip()
    comb_b = f"{common} {rest_b}".strip()
    scores = [ratio(comb_a, comb_b)]
    if common:
        scores += [ratio(common, comb_a), ratio(common, comb_b)]
    return max(scores)


def _content_words(name: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z'-]*", name.lower()) if w not in STOPWORDS and len(w) > 1}


def type_reward(product: dict, goal: dict) -> dict:
    """r_type from query match, category overlap (>= 2 shared levels) and title word overlap."""
    query_match = product["query"] == goal["query"]
    cat_p = {x.strip() for x in product["product_category"].split("›")}
    cat_g = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(cat_p & cat_g) >= 2
    desired, purchased = _content_words(goal["name"]), _content_words(product["name"])
    title_score = 0.2 if not desired else len(desired & purchased) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def _in_text(value: str, product: dict) -> bool:
    return (value in product["Title"].lower() or value in " ".join(product["BulletPoints"]).lower()
            or value in product["Description"].lower())


def attribute_matches(product: dict, goal_attrs: list[str]) -> int:
    """Goal attributes matched by the product (fuzzy on its attributes, else in its text)."""
    n = 0
    for g_attr in goal_attrs:
        if any(token_set_ratio(p_attr, g_attr) > 85 for p_attr in product["Attributes"]) or _in_text(g_attr, product):
            n += 1
    return n


def option_matches(product: dict, goal_options: list[str], chosen: dict[str, str]) -> int:
    """Chosen options that match a goal option (`size` exactly, others fuzzily, else text)."""
    goal_norm = [normalize_color(o) for o in goal_options]
    n = 0
    for key, value in chosen.items():
        value = normalize_color(value)
        if key.lower() in EXACT_MATCH_OPTS:
            matched = value in goal_norm
        else:
            matched = any(token_set_ratio(g, value) > 85 for g in goal_norm)
        if matched or _in_text(value, product):
            n += 1
    return n


def get_reward(product: dict, goal: dict, price: float, options: dict[str, str]) -> tuple[float, dict]:
    """WebShop reward of buying `product` at `price` with chosen `options` for `goal`."""
    goal_options = list(goal["goal_options"].values()) if isinstance(goal["goal_options"], dict) else list(goal["goal_options"])
    r_type = type_reward(product, goal)
    r_price = float(price <= goal["price_upper"])
    n_attr = attribute_matches(product, goal["attributes"])
    n_opt = option_matches(product, goal_options, options)
    denom = len(goal["attributes"]) + len(goal_options) + 1
    total = min(1.0, r_type["r_type"] * (n_attr + n_opt + r_price) / denom)
    return total, {**r_type, "n_attr": n_attr, "n_option": n_opt, "r_price": r_price, "denominator": denom}
