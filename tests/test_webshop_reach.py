"""bench/webshop_reach.py reads how far an episode got from the pages the real WebShop env
rendered: a scripted search-click-buy episode reaches every stage, the placeholder search none."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import webshop_reach  # noqa: E402

from ragen_cli.envs.registry import make_env  # noqa: E402


def _episode(actions: list[str]) -> dict:
    """A trajectory as the rollout saves it: each turn the page shown, then the action taken."""
    env = make_env("webshop", {"split": "val"})
    obs, _ = env.reset(seed=0)
    turns, info = [], {}
    for act in actions:
        act = act.replace("{instruction}", env.goal["instruction_text"])
        if act == "{first product}":
            act = next(a for a in env.valid_actions() if a.startswith("click[b0"))
        turns.append({"obs": obs, "actions": [act]})
        obs, _, done, _, info = env.step(act)
        if done:
            break
    return {"turns": turns, "info": info}


def test_scripted_episode_reaches_every_stage():
    traj = _episode(["search[{instruction}]", "{first product}", "click[buy now]"])
    assert webshop_reach.reach(traj) == {"results": True, "item": True, "bought": True}


def test_placeholder_search_reaches_nothing():
    # "<your query>" matches no product: a results page with 0 results, then the same again
    traj = _episode(["search[<your query>]", "click[back to search]", "search[<your query>]"])
    assert "Total results: 0" in traj["turns"][1]["obs"]
    assert webshop_reach.reach(traj) == {"results": False, "item": False, "bought": False}
    assert webshop_reach.summarise([traj]) == {"episodes": 1, "turns": 3, "searches": 2, "reached_results": 0,
                                                "reached_item": 0, "bought": 0}


def test_results_without_an_item_page():
    traj = _episode(["search[{instruction}]", "click[back to search]"])
    assert webshop_reach.reach(traj) == {"results": True, "item": False, "bought": False}
