"""The run's answer to Ctrl-C / SIGTERM (`train.loop.StopRequest`): the first asks to finish the
step, the second aborts; once the loop is over, one lets the engine's shutdown go on and another
aborts it (a second Ctrl-C that landed after `end` used to make the CLI print "aborted" for a run
that had saved its step).
The real signals in a real run: tests/test_train_signals.py, tests/test_train_default_path.py."""

from __future__ import annotations

import signal

import pytest

from ragen_cli.train.loop import StopRequest


def test_first_signal_asks_to_finish_the_step_the_second_aborts():
    said = []
    stop = StopRequest(said.append)
    stop(signal.SIGINT)
    assert stop.requested and said == ["ragen: Ctrl-C: finishing this step, saving a checkpoint, then exiting (again to abort)"]
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGINT)


def test_sigterm_is_named():
    said = []
    StopRequest(said.append)(signal.SIGTERM)
    assert said[0].startswith("ragen: SIGTERM: finishing this step")


@pytest.mark.parametrize("asked_before", [False, True])
def test_once_the_loop_is_over_a_signal_lets_the_shutdown_finish_and_another_aborts_it(asked_before):
    said = []
    stop = StopRequest(said.append)
    if asked_before:
        stop(signal.SIGINT)
    stop.closing = True  # the loop ended (or failed): teardown
    stop(signal.SIGINT)  # no KeyboardInterrupt: the engine's shutdown goes on
    assert said[-1] == "ragen: Ctrl-C: the run is over; closing the rollout engine (again to abort)"
    assert stop.requested is asked_before
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGINT)


def test_an_aborted_run_names_what_it_kept(tmp_path):
    from ragen_cli.train.commands import _last_saved

    assert _last_saved(tmp_path) == "no checkpoint was saved."
    (tmp_path / "checkpoints" / "step-2").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-2" / "state.json").write_text("{}")
    (tmp_path / "checkpoints" / "step-4").mkdir()  # unfinished: no state.json
    assert _last_saved(tmp_path) == (f"the newest checkpoint is {tmp_path}/checkpoints/step-2 "
                                     f"(resume with: ragen train --resume {tmp_path}).")
