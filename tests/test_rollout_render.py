"""Mask audit (issue 4): no observation token is ever trained, checked on real rollouts of the
tiny model through the HF backend, after a round trip through the run directory's
trajectories file; and the `ragen inspect` view of that file."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.monitor.rundir import RunDir
from ragen_cli.rollout import render
from ragen_cli.spec.models import EnvRef, RolloutSpec


@pytest.fixture(scope="module")
def saved(tiny_model_dir, tmp_path_factory):
    """4 Sokoban episodes (2 seeds x 2) of 3 turns, 12 tokens per turn, written as step 3."""
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend

    tok = load_tokenizer(tiny_model_dir)
    backend = HFBackend(load_causal_lm(tiny_model_dir), tok)
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12)
    trajs = run_rollouts(backend, tok, EnvRef(name="sokoban"), [5, 6], 2, rollout, 4096, sample_seed=1)
    run = RunDir(tmp_path_factory.mktemp("run"))
    run.write_trajectories(3, [t.to_record() for t in trajs])
    return tok, trajs, run


def trained_texts(record: dict, tokenizer) -> list[str]:
    """The decoded text of each run of trained tokens (one per turn in a correct trajectory)."""
    runs = render.mask_runs(record["input_ids"], record["loss_mask"])
    return [tokenizer.decode(ids, skip_special_tokens=False) for m, ids in runs if m]


@pytest.mark.slow
def test_no_observation_token_is_ever_trained(saved):
    tok, trajs, run = saved
    records = run.read_trajectories(3)
    assert len(records) == 4
    for traj, rec in zip(trajs, records):
        # each run of mask-1 tokens decodes to exactly that turn's generated text (the reply
        # minus the pre-filled "<think>", which is prompt)
        assert trained_texts(rec, tok) == [t.reply[len("<think>"):] for t in traj.turns]
        for obs in {t.obs for t in traj.turns}:
            assert all(obs not in text for text in trained_texts(rec, tok))
        assert all(rec["loss_mask"][i] == 1 for i in rec["turn_end"])


@pytest.mark.slow
def test_render_highlights_exactly_the_trained_tokens(saved):
    tok, trajs, _ = saved
    text = render.render_trajectory(trajs[0], tok)
    styled = "".join(text.plain[s.start:s.end] for s in text.spans if s.style == render.TRAINED)
    assert styled == "".join(t.reply[len("<think>"):] for t in trajs[0].turns)
    assert "State:" in text.plain and f"[{trajs[0].num_generated} trained tokens" in text.plain


@pytest.mark.slow
def test_inspect_cli_renders_a_run_directory(saved):
    _, trajs, run = saved
    result = CliRunner().invoke(app, ["inspect", str(run.path), "--index", "1", "--model", "tiny-random"])
    assert result.exit_code == 0, result.output
    assert "1 trajectories" in result.output and "Turn 1:" in result.output
    assert f"[{trajs[1].num_generated} trained tokens" in result.output
    text = CliRunner().invoke(app, ["inspect", str(run.trajectories_path(3)), "--text"])
    assert text.exit_code == 0 and "no token ids or tokenizer" in text.output
    bad = CliRunner().invoke(app, ["inspect", str(run.path), "--step", "9"])
    assert bad.exit_code == 2 and "no trajectories for step 9" in bad.output


def test_mask_runs_and_half_written_files(tmp_path):
    assert render.mask_runs([5, 6, 7, 8], [0, 1, 1, 0]) == [(0, [5]), (1, [6, 7]), (0, [8])]
    with pytest.raises(ValueError):
        render.mask_runs([1, 2], [1])
    file = tmp_path / "step-1.jsonl"
    file.write_text('{"group": 0, "turns": []}\n{"group": 1, "tu')
    assert render.read_records(file) == [{"group": 0, "turns": []}]
