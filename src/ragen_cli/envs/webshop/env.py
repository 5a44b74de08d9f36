"""WebShop-compatible shopping env: `search[query]` and `click[element]` over search, results
(10 per page), item and item sub-pages (description, features, reviews); buying ends the
episode with WebShop's reward (see `reward.py`); success = reward 1."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragen_cli.envs.base import TextEnv, normalise_action
from ragen_cli.envs.webshop import pages
from ragen_cli.envs.webshop.catalogue import load_catalogue, split_range
from ragen_cli.envs.webshop.reward import get_reward

_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class WebShopConfig:
    data_dir: str | None = None
    """Directory with original WebShop files (items_shuffle*.json, items_ins_v2*.json, ...); omit for the shipped catalogue."""
    products_file: str | None = None
    """Product file name in data_dir (e.g. items_shuffle_1000.json); omit when only one items_shuffle*.json is there."""
    attributes_file: str | None = None
    """Attribute file name in data_dir (e.g. items_ins_v2_1000.json); omit when only one items_ins_v2*.json is there."""
    num_products: int | None = None
    """Use only the first N products of the file (as WebShop's num_products)."""
    human_goals: bool = True
    """Goals from items_human_ins.json when present, else synthetic goals from items_ins_v2."""
    split: str = "train"
    """Goal split: train, val or test (goal index = split start + seed mod split size)."""
    max_actions: int = 9
    """Actions per episode; the episode is truncated after that many."""

    def __post_init__(self):
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.max_actions < 1 or (self.num_products is not None and self.num_products < 1):
            raise ValueError("max_actions and num_products must be >= 1")
        if self.data_dir is not None:
            root = Path(self.data_dir).expanduser()
            if not root.is_dir() or not any(root.glob("items_shuffle*.json")):
                raise ValueError(f"data_dir {self.data_dir} has no items_shuffle*.json (WebShop product file)")
            for name in (self.products_file, self.attributes_file):
                if name and not (root / name).is_file():
                    raise ValueError(f"data_dir {self.data_dir} has no file '{name}'")


class WebShopEnv(TextEnv):
    name = "webshop"
    description = "WebShop-style shopping: find and buy the product an instruction asks for."
    config_class = WebShopConfig

    def __init__(self, config=None):
        super().__init__(config)
        cfg = self.config
        self.catalogue = load_catalogue(cfg.data_dir, cfg.num_products, cfg.human_goals,
                                        cfg.products_file, cfg.attributes_file)
        self.goal_range = split_range(len(self.catalogue.goals), cfg.split)

    def _reset(self, rng: np.random.Generator) -> dict:
        n = len(self.goal_range)
        offset = self.episode_seed % n if self.episode_seed is not None else int(rng.integers(n))
        self.goal_index = self.goal_range.start + offset
        self.goal = self.catalogue.goals[self.goal_index]
        self.page, self.results, self.page_no = "search", [], 1
        self.product: dict | None = None
        self.chosen: dict[str, str] = {}
        self.sub = ""
        self.reward_info: dict = {}
        self._reward = 0.0
        return {"goal_index": self.goal_index, "goal_asin": self.goal["asin"]}

    def _clickables(self) -> list[str]:
        if self.page == "results":
            return pages.results_clickables(self.results, self.page_no)
        if self.page == "item":
            return pages.item_clickables(self.product)
        if self.page == "sub":
            return ["back to search", "< prev"]
        return []

    def _step(self, action: str) -> tuple[float, bool, dict]:
        invalid = (0.0, False, {"action_is_valid": False, "action_is_effective": False})
        m = _ACTION.match(action)
        if m is None:
            return invalid
        kind, arg = m.group(1).lower(), normalise_action(m.group(2))
        before = (self.page, self.page_no, self.product and self.product["asin"], dict(self.chosen), self.sub)
        if kind == "search":
            if self.page != "search" or not arg:
                return invalid
            self.results, self.page_no, self.page = self.catalogue.search(arg), 1, "results"
        else:
            if arg not in self._clickables():
                return invalid
            if arg == "buy now":
                return self._buy()
            self._click(arg)
        after = (self.page, self.page_no, self.product and self.product["asin"], dict(self.chosen), self.sub)
        return 0.0, False, {"action_is_valid": True, "action_is_effective": after != before}

    def _click(self, arg: str) -> None:
        if arg == "back to search":
            self.page, self.product, self.chosen = "search", None, {}
        elif arg == "next >":
            self.page_no += 1
        elif arg == "< prev":
            if self.page == "results":
                self.page_no -= 1
            elif self.page == "item":
                self.page, self.product, self.chosen = "results", None, {}
            else:
                self.page = "item"
        elif self.page == "results":
            product = next(p for p in self.results if p["asin"].lower() == arg)
            self.page, self.product, self.chosen = "item", product, {}
        elif arg in pages.SUB_PAGES:
            self.page, self.sub = "sub", arg
        else:  # an option value
            name = next(k for k, vals in self.product["options"].items() if arg in vals)
            self.chosen[name] = arg

    def _buy(self) -> tuple[float, bool, dict]:
        reward, self.reward_info = get_reward(self.product, self.goal, self.product["_price"], self.chosen)
        self._reward, self.page = reward, "done"
        return reward, True, {"action_is_valid": True, "action_is_effective": True, "reward_info": self.reward_info}

    def _success(self) -> bool:
        return self.page == "done" and self._reward >= 1.0 - 1e-9

    def _render(self) -> str:
        instruction = self.goal["instruction_text"]
        if self.page == "search":
            text = pages.search_page(instruction)
        elif self.page == "results":
            text = pages.results_page(instruction, self.results, self.page_no)
        elif self.page == "item":
            text = pages.item_page(instruction, self.product, self.chosen)
        elif self.page == "sub":
            text = pages.sub_page(instruction, self.product, self.sub)
        else:
            return pages.done_page(self.product["asin"], self.chosen, self._reward)
        return f"{text}\nYou must choose from these actions: {', '.join(self.valid_actions())}."  # the reference's line

    def instruction(self) -> str:
        return (
            "You are web shopping. You are given an instruction; find the product that matches it "
            "(attributes, options such as size or colour, and price) and buy it.\n"
            "Actions: search[your query] on the search page, and click[element] where element is "
            "one of the clickable elements listed after 'You must choose from these actions' (e.g. click[b0abc12345] "
            "for a product, click[large] for an option, click[description], click[< prev], "
            "click[next >], click[back to search], click[buy now]). One action at a time."
        )

    def valid_actions(self) -> list[str]:
        if self.page == "search":
            return ["search[<your query>]"]
        return [f"click[{c}]" for c in self._clickables()]
