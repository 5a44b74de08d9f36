"""The model cache's building blocks: checksums, verification, atomic locked builds."""

from __future__ import annotations

import json
import multiprocessing
import stat
import time
from pathlib import Path

import pytest

from ragen_cli.models import cache

# NIST FIPS 180-2 test vector: sha256(b"abc").
SHA256_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _write_model(d: Path, payload: bytes = b"abc") -> None:
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(payload)


def test_checksums_record_size_and_sha256(tmp_path):
    _write_model(tmp_path)
    files = cache.write_checksums(tmp_path)
    assert files["model.safetensors"] == {"size": 3, "sha256": SHA256_ABC}
    # config.json holds the 2 bytes "{}"
    assert files["config.json"]["size"] == 2
    assert json.loads((tmp_path / cache.CHECKSUM_FILE).read_text()) == {"format": cache.FORMAT_VERSION, "files": files}
    assert cache.verify_dir(tmp_path) == []


def test_verify_finds_changed_truncated_and_missing_files(tmp_path):
    _write_model(tmp_path)
    cache.write_checksums(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"abd")  # same size, other content
    assert cache.verify_dir(tmp_path, full=False) == []  # the cheap check only sees sizes
    assert cache.verify_dir(tmp_path) == [f"{tmp_path / 'model.safetensors'} does not match its recorded sha256"]
    (tmp_path / "model.safetensors").write_bytes(b"ab")
    assert cache.verify_dir(tmp_path, full=False) == [f"{tmp_path / 'model.safetensors'} has 2 bytes, expected 3"]
    (tmp_path / "config.json").unlink()
    assert f"{tmp_path / 'config.json'} is missing" in cache.verify_dir(tmp_path)
    record = json.loads((tmp_path / cache.CHECKSUM_FILE).read_text())
    (tmp_path / cache.CHECKSUM_FILE).write_text(json.dumps({**record, "format": cache.FORMAT_VERSION - 1}))
    assert cache.verify_dir(tmp_path) == [f"{tmp_path / cache.CHECKSUM_FILE} is missing, unreadable or of an older format"]
    (tmp_path / cache.CHECKSUM_FILE).unlink()
    assert cache.verify_dir(tmp_path) == [f"{tmp_path / cache.CHECKSUM_FILE} is missing, unreadable or of an older format"]
    assert cache.verify_dir(tmp_path / "nope") == [f"{tmp_path / 'nope'} does not exist"]


def test_cache_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGEN_CACHE", str(tmp_path))
    assert cache.models_dir() == tmp_path / "models"
    monkeypatch.delenv("RAGEN_CACHE")
    assert cache.cache_root() == Path.home() / ".cache" / "ragen"


def _is_valid(d: Path) -> bool:
    return not cache.verify_dir(d)


def test_build_atomic_builds_once_and_keeps_a_valid_dir(tmp_path):
    final = tmp_path / "m-float32"
    calls = []

    def build(d: Path) -> None:
        calls.append(d)
        _write_model(d)

    assert cache.build_atomic(final, build, _is_valid) is True
    assert cache.build_atomic(final, build, _is_valid) is False
    assert len(calls) == 1 and not calls[0].exists()  # the temp dir was renamed away
    assert (final / "model.safetensors").read_bytes() == b"abc"
    assert stat.S_IMODE(final.stat().st_mode) == 0o755
    assert stat.S_IMODE((final / "model.safetensors").stat().st_mode) == 0o644


def test_build_atomic_replaces_a_damaged_dir_and_clears_leftovers(tmp_path):
    final = tmp_path / "m-float32"
    final.mkdir()
    _write_model(final)
    cache.write_checksums(final)
    (final / "model.safetensors").write_bytes(b"xyz")  # damaged after the fact
    stale = tmp_path / ".tmp-m-float32-crashed"
    stale.mkdir()
    assert cache.build_atomic(final, lambda d: _write_model(d, b"new"), _is_valid) is True
    assert (final / "model.safetensors").read_bytes() == b"new"
    assert cache.verify_dir(final) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m-float32.lock", "m-float32"]


def test_failed_build_leaves_nothing_under_the_final_name(tmp_path):
    final = tmp_path / "m-float32"

    def build(d: Path) -> None:
        _write_model(d)
        raise RuntimeError("conversion broke")

    with pytest.raises(RuntimeError, match="conversion broke"):
        cache.build_atomic(final, build, _is_valid)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m-float32.lock"]


def _racer(final: str, log: str, barrier) -> None:
    def build(d: Path) -> None:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(0.5)  # long enough for the other process to arrive while this one builds
        _write_model(d)

    barrier.wait(30)  # both processes ask for the directory at the same moment
    cache.build_atomic(Path(final), build, _is_valid)


def test_two_processes_build_once(tmp_path):
    final, log = tmp_path / "m-float32", tmp_path / "log.txt"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_racer, args=(str(final), str(log), barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert log.read_text() == "built\n"  # the second process found the finished directory
    assert cache.verify_dir(final) == []
