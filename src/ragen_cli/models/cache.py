"""The model cache: atomic, locked, checksummed directories (stdlib only).

A cached model lives in `<cache>/models/<name>-<dtype>/` and is built like this:

1. take an exclusive `fcntl.flock` on `<cache>/models/.<name>-<dtype>.lock` (a second process
   asking for the same model blocks here, then finds the finished directory);
2. build into a temporary directory in the same parent (`.tmp-<name>-<dtype>-XXXX`);
3. write `ragen-checksum.json` (size and sha256 of every file in it);
4. `os.rename` the temporary directory into place (atomic on one file system).

So a directory under its final name is always complete. The checksum file catches later
damage (a truncated copy, a disk error, a hand edit): `verify_dir` re-hashes the files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

CHECKSUM_FILE = "ragen-checksum.json"
# Bump when what a conversion writes changes: directories of another format are rebuilt.
FORMAT_VERSION = 2
_HASH_CHUNK = 1 << 22


def cache_root() -> Path:
    """`$RAGEN_CACHE`, or `~/.cache/ragen` when unset."""
    env = os.environ.get("RAGEN_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ragen"


def models_dir() -> Path:
    return cache_root() / "models"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _content_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name != CHECKSUM_FILE)


def write_checksums(directory: Path) -> dict[str, dict]:
    """Record size and sha256 of each file of `directory` in `directory/ragen-checksum.json`."""
    files = {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in _content_files(directory)}
    if not files:
        raise RuntimeError(f"nothing to record: {directory} is empty")
    record = {"format": FORMAT_VERSION, "files": files}
    (directory / CHECKSUM_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return files


def read_checksums(directory: Path) -> dict[str, dict] | None:
    """The recorded files of a directory in the current format, else None."""
    try:
        record = json.loads((directory / CHECKSUM_FILE).read_text())
        return record["files"] if record.get("format") == FORMAT_VERSION else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def verify_dir(directory: Path, *, full: bool = True) -> list[str]:
    """Problems with a cached model directory; empty when it is intact.

    `full=False` checks presence and sizes only (milliseconds); `full=True` also re-hashes every
    file (about 1 s per 500 MB here).
    """
    if not directory.is_dir():
        return [f"{directory} does not exist"]
    recorded = read_checksums(directory)
    if recorded is None:
        return [f"{directory / CHECKSUM_FILE} is missing, unreadable or of an older format"]
    problems = []
    for name, want in sorted(recorded.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif path.stat().st_size != want["size"]:
            problems.append(f"{path} has {path.stat().st_size} bytes, expected {want['size']}")
        elif full and sha256_file(path) != want["sha256"]:
            problems.append(f"{path} does not match its recorded sha256")
    return problems


def dir_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _make_readable(directory: Path) -> None:
    """mkdtemp makes 0700 directories; a shared cache wants the usual 0755 / 0644."""
    directory.chmod(0o755)
    for p in directory.iterdir():
        p.chmod(0o755 if p.is_dir() else 0o644)


@contextlib.contextmanager
def file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock held for the duration of the `with` block."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def build_atomic(final: Path, build: Callable[[Path], None], is_valid: Callable[[Path], bool]) -> bool:
    """Make `final` by `build(tmp_dir)` unless a valid one already exists. True if built here.

    Runs under a lock on `final`; leftovers of crashed builds and a damaged `final` are removed
    while the lock is held (nobody else can be writing them then).
    """
    parent = final.parent
    with file_lock(parent / f".{final.name.lstrip('.')}.lock"):
        if final.is_dir() and is_valid(final):
            return False
        for stale in parent.glob(f".tmp-{final.name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=parent))
        try:
            build(tmp)
            _make_readable(tmp)
            write_checksums(tmp)
            if final.exists():  # present but damaged: move aside, then drop
                trash = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-old-", dir=parent))
                os.rename(final, trash / "old")
                shutil.rmtree(trash, ignore_errors=True)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return True


# Accepted spellings -> canonical torch dtype name (the spec's `deepspeed.precision` uses fp32/bf16/fp16).
DTYPES: dict[str, str] = {
    "float32": "float32", "fp32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16",
}


class ModelError(ValueError):
    """A model reference that cannot be resolved; the message says what to do."""


def canonical_dtype(dtype: str) -> str:
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ModelError(f"unknown dtype {dtype!r}; use one of: {', '.join(sorted(DTYPES))}") from None
