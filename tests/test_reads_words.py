"""bench/reads_words.py reads where the state points from the coordinates as the hint sentence
names it: two derivations of the same directions, checked against each other and by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import reads_words  # noqa: E402

from ragen_cli.envs.registry import make_env  # noqa: E402


def test_coordinates_by_hand():
    fl = "Goal: (2, 1)\nPlayer: (2, 0)\nHoles: (0, 2), (2, 3)"
    assert reads_words.coord_toward("frozenlake", fl) == {"Right"}
    assert reads_words.coord_toward("frozenlake", "Goal: (0, 3)\nPlayer: (2, 1)") == {"Up", "Right"}
    sok = "Targets: (4, 4)\nBoxes: (4, 3)\nPlayer: (3, 3)"
    assert reads_words.coord_toward("sokoban", sok) == {"Down"}
    assert reads_words.coord_toward("frozenlake", "__O_\nP_G_") == set()


@pytest.mark.parametrize("env_name,config", [
    ("frozenlake", {"size": 4, "p": 0.8, "is_slippery": False}),
    ("sokoban", {"dim_x": 6, "dim_y": 6, "num_boxes": 1, "search_depth": 4}),
])
def test_coordinates_agree_with_the_hint(env_name, config):
    coord = make_env(env_name, {**config, "observation": "grid_coord"})
    hint = make_env(env_name, {**config, "move_hint": True})
    for seed in range(40):
        coord.reset(seed)
        hint.reset(seed)
        assert reads_words.coord_toward(env_name, coord.render()) == \
            reads_words.toward(env_name, hint.render()), seed
