"""The RNG states of a checkpoint (issue 32, item 8): CUDA's are kept when CUDA is in use and
restored only onto as many devices; rng.pt loads with weights_only, old files included."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ragen_cli.train.rng import cuda_rng_warning, read_rng, rng_file_problems, rng_state, set_rng_state


def _draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_cuda_states_are_saved_when_a_getter_is_given_and_round_trip_weights_only(tmp_path):
    # stand-ins for torch.cuda.get_rng_state_all() on 2 devices: CUDA generator states are
    # uint8 tensors (16 bytes: seed and offset)
    devices = [torch.arange(16, dtype=torch.uint8), torch.arange(16, 32, dtype=torch.uint8)]
    assert "cuda" not in rng_state(None)  # CPU run: no key
    payload = rng_state(lambda: devices)
    torch.save(payload, tmp_path / "rng.pt")
    back = read_rng(tmp_path / "rng.pt")
    assert [t.tolist() for t in back["cuda"]] == [list(range(16)), list(range(16, 32))]
    assert rng_file_problems(tmp_path / "rng.pt") == []


@pytest.mark.parametrize("saved, available, count, expected", [
    (None, False, 0, None),  # CPU checkpoint, CPU resume: nothing to say
    ([b"s0", b"s1"], True, 2, None),  # same device count: restored
    (None, True, 1, "the checkpoint holds no CUDA RNG state"),
    ([b"s0"], False, 0, "the CUDA RNG states of 1 device(s) and CUDA is not available here: not restored"),
    ([b"s0", b"s1"], True, 1, "the CUDA RNG states of 2 device(s), this process sees 1: not restored"),
])
def test_cuda_restore_needs_cuda_and_the_same_device_count(saved, available, count, expected):
    warning = cuda_rng_warning(saved, available, count)
    assert warning is None if expected is None else expected in warning


def test_an_old_rng_file_without_cuda_loads_and_restores_exactly(tmp_path):
    """rng.pt as ragen wrote it before: python, numpy (an ndarray: allowed for weights_only) and
    torch states, no "cuda" key. Restoring it repeats the draws made right after saving."""
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
               tmp_path / "rng.pt")
    expected = _draws()
    _draws()  # move every generator on
    warning = set_rng_state(read_rng(tmp_path / "rng.pt"))
    assert _draws() == expected
    if not torch.cuda.is_available():
        assert warning is None  # a CPU checkpoint resumed on CPU: nothing to warn about
    assert rng_file_problems(tmp_path / "rng.pt") == []


def test_rng_files_that_are_not_rng_states_are_problems(tmp_path):
    torch.save({"python": random.getstate()}, tmp_path / "partial.pt")
    torch.save({"python": 1, "numpy": 2, "torch": torch.zeros(3)}, tmp_path / "float.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "float.pt").read_bytes()[:40])
    assert rng_file_problems(tmp_path / "partial.pt") == ["rng.pt does not hold the python, numpy and torch RNG states"]
    assert rng_file_problems(tmp_path / "float.pt") == ["rng.pt: the torch RNG state is not a uint8 tensor"]
    assert rng_file_problems(tmp_path / "cut.pt")[0].startswith("rng.pt cannot be read (")
    assert rng_file_problems(tmp_path / "absent.pt") == ["rng.pt is missing"]
