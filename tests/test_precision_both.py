"""RAGEN_CPU_BF16 (device.py) makes `precision: auto` resolve as on the other kind of CPU, so the
suite runs its precision-dependent tests under both answers on any machine (tests/conftest.py)."""

from __future__ import annotations

import pytest

from ragen_cli.device import CPU_BF16_FLAGS, cpu_flags, resolve_precision


def test_the_machine_answer_can_be_forced_both_ways(monkeypatch):
    monkeypatch.setenv("RAGEN_CPU_BF16", "1")
    assert set(CPU_BF16_FLAGS) <= cpu_flags()
    assert resolve_precision("auto", "cpu") == ("bf16", "auto: this CPU has native bf16 (amx_bf16, avx512_bf16) [RAGEN_CPU_BF16=1]")
    monkeypatch.setenv("RAGEN_CPU_BF16", "0")
    assert not set(CPU_BF16_FLAGS) & cpu_flags()
    precision, why = resolve_precision("auto", "cpu")
    assert precision == "fp32" and why.endswith("[RAGEN_CPU_BF16=0]")
    assert resolve_precision("bf16", "cpu") == ("bf16", "set in the spec")  # a set precision is never forced
    # text given to cpu_flags is parsed as it is (the override is the machine's, not the text's)
    assert cpu_flags("flags : avx2 avx512_bf16\n") == {"avx2", "avx512_bf16"}
    monkeypatch.setenv("RAGEN_CPU_BF16", "yes")
    with pytest.raises(ValueError, match="RAGEN_CPU_BF16='yes': use 1"):
        cpu_flags()


def test_machine_precision_runs_auto_under_both_answers(machine_precision):
    assert resolve_precision("auto", "cpu")[0] == machine_precision
