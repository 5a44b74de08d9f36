"""The WebShop shortcuts of bench/webshop_baselines.py that read only the prompt: the bar a
trained WebShop agent has to clear (docs/experiments/webshop.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from webshop_baselines import best_title, first_product, named_options, play  # noqa: E402

from ragen_cli.envs.registry import make_env  # noqa: E402

PAGE = ("Instruction: [SEP] i need foldable headphones in silver, and price lower than 180.00 dollars "
        "[SEP] Back to Search [SEP] Page 1 (Total results: 3) [SEP] Next > "
        "[SEP] B0AAAAAAAA [SEP] Foldable Silver Headphones [SEP] $190.00 "
        "[SEP] B0BBBBBBBB [SEP] Sport Headphones [SEP] $99.00 "
        "[SEP] B0CCCCCCCC [SEP] Foldable Headphones [SEP] $150.00 to $200.00")
PRODUCTS = ["click[b0aaaaaaaa]", "click[b0bbbbbbbb]", "click[b0cccccccc]"]
INSTRUCTION = "i need foldable headphones in silver, and price lower than 180.00 dollars"


def test_best_title_prefers_an_affordable_product_then_the_most_shared_words():
    # A shares 3 title words (foldable, silver, headphones) but costs 190 > 180; B (1 word) and
    # C (2 words; its range starts at 150) are affordable: C.
    assert best_title(PAGE, PRODUCTS, INSTRUCTION) == "click[b0cccccccc]"
    assert first_product(PAGE, PRODUCTS, INSTRUCTION) == "click[b0aaaaaaaa]"


def test_best_title_without_a_price_bound_counts_words_only():
    page = PAGE.replace(", and price lower than 180.00 dollars", "")
    assert best_title(page, PRODUCTS, INSTRUCTION.split(",")[0]) == "click[b0aaaaaaaa]"


def test_named_options_search_product_named_option_buy():
    # val goal 0: "i need foldable headphones in silver, and price lower than 180.00 dollars"
    # (attribute foldable, option silver). The first result (b04ybaj8wz, $157.28 to $188.74)
    # lists white and silver; bought with silver it scores 2/3 (docs/experiments/webshop.md).
    env = make_env("webshop", {"split": "val"})
    policy = named_options(first_product)
    obs, _ = env.reset(seed=0)
    actions = []
    for turn in range(6):
        actions.append(policy(env, obs, turn))
        obs, reward, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            break
    assert actions == ["search[i need foldable headphones in silver]", "click[b04ybaj8wz]",
                       "click[silver]", "click[buy now]"]
    assert reward == 2 / 3 and not info["success"]
    score, success, bought = play(env, 0, named_options(best_title), 6)
    assert (score, success, bought) == (1.0, True, True)
