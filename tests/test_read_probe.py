"""bench/read_probe.py: the correct first moves it trains and scores against, derived by hand on
Gymnasium's 4x4 map, and the probe's prompt is the one a rollout shows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import read_probe  # noqa: E402

BOARD = ["SFFF", "FHFH", "FFFH", "HFFG"]


def test_correct_moves_by_hand():
    # fewest moves to G at (3, 3): (3,2) 1, (2,2) 2, (1,2)/(2,1) 3, (0,2)/(2,0) 4, (0,1)/(0,3)/(1,0) 5, (0,0) 6
    assert read_probe.correct_moves(BOARD, 0) == {"Right", "Down"}
    assert read_probe.correct_moves(BOARD, 10) == {"Down"}  # (2, 2): Right is a hole, Up/Left farther
    assert read_probe.correct_moves(BOARD, 3) == {"Left"}  # (0, 3): Down is a hole
    assert read_probe.correct_moves(BOARD, 14) == {"Right"}  # (3, 2): next to the goal


def test_probe_prompt_is_the_rollouts_first_prompt(tmp_path):
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer

    spec = read_probe.shipped_spec("frozenlake")
    tok = load_tokenizer(resolve_model(spec.model.name))
    (ids, ok), = read_probe.states(spec, [spec.env.val.seed], tok)
    text = tok.decode(ids)
    assert text.endswith("<|im_start|>assistant\n<answer>") and "Player: (" in text and "Goal: (" in text
    assert ok and ok <= set(read_probe.MOVES)
    assert all(len(v) == 2 for v in read_probe.move_token_ids(tok).values())  # "Left" and " Left" differ
