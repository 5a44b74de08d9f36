"""JSON-lines files that one process appends to while others read them.

A writer may be killed in the middle of a line, so readers take only complete lines (ending in
a newline) that parse as a JSON object; anything else is skipped and, for readers that report,
named as `FILE:LINE: what is wrong`. `JsonlTail` reads a growing file incrementally and waits
for a half-written last line to be completed.

A write that fails (disk full, file-size limit) is undone: the file is cut back to its size
before the write, so it never holds a partial line of this process's making.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

Check = Callable[[dict], "str | None"]  # why a parsed record is unusable (it is then skipped), or None


class JsonlWriteError(OSError):
    """A line could not be appended (the file is as it was before); the message names the file."""


def append_jsonl(path: Path, record: dict) -> None:
    """Append one JSON object as one line; fsync so a reader (or a crash) sees it whole.

    If the file ends in a half-written line (a writer killed mid-line), a newline is written
    first, so the new record is not glued to the fragment (readers skip the fragment). If the
    write fails part-way (a short write, then ENOSPC or EFBIG), the file is cut back to its size
    before it and JsonlWriteError raised. Unbuffered: no buffer is left to flush on close.
    """
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise JsonlWriteError(exc.errno, f"cannot append a line to {path} ({exc.strerror or exc}); "
                                  "the file is as it was before this write") from exc
    finally:
        os.close(fd)


@dataclass
class Scan:
    """What `scan_lines` found in a chunk of a JSONL file."""

    records: list[dict] = field(default_factory=list)
    consumed: int = 0  # bytes up to and including the last newline
    lines: int = 0  # complete lines consumed
    problems: list[str] = field(default_factory=list)  # "FILE:LINE: ..." for each skipped line
    partial: int | None = None  # line number of an incomplete last line (no newline yet)


def scan_lines(data: bytes, name: str = "", first_line: int = 1, check: Check | None = None) -> Scan:
    """Parse the complete lines of `data` (whose first line is `first_line` of file `name`).

    Bytes after the last newline are a half-written line: not consumed, its number in
    `partial`. Complete lines that are not a JSON object (e.g. a line cut short by a crash and
    then continued), or objects `check` rejects, are skipped and named in `problems`.
    """
    end = data.rfind(b"\n")
    scan = Scan()
    raws = data[: end + 1].split(b"\n")[:-1] if end >= 0 else []
    for k, raw in enumerate(raws):
        if not raw.strip():
            continue
        where = f"{name}:{first_line + k}"
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            scan.problems.append(f"{where}: not JSON ({_short(exc)}): skipped")
            continue
        if isinstance(obj, dict):
            why = check(obj) if check else None
            if why:
                scan.problems.append(f"{where}: {why}: skipped")
            else:
                scan.records.append(obj)
        else:
            scan.problems.append(f"{where}: a JSON {type(obj).__name__}, not an object: skipped")
    scan.consumed, scan.lines = end + 1, len(raws)
    if data[end + 1:].strip():
        scan.partial = first_line + len(raws)
    return scan


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__


def read_jsonl(path: Path) -> list[dict]:
    """All complete JSON-object lines of `path`; [] when the file does not exist."""
    return read_jsonl_checked(path)[0]


def read_jsonl_checked(path: Path, check: Check | None = None) -> tuple[list[dict], list[str]]:
    """(records, problems) of `path`: each skipped line named `FILE:LINE: ...`, an incomplete
    last line included; ([], []) when the file does not exist."""
    try:
        data = Path(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    scan = scan_lines(data, str(path), check=check)
    problems = list(scan.problems)
    if scan.partial is not None:
        problems.append(f"{path}:{scan.partial}: incomplete last line (being written, or cut off by a crash): skipped")
    return scan.records, problems


def truncate_partial_tail(path: Path) -> int:
    """Cut a half-written last line (no trailing newline) off `path`; return bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep == len(data):
        return 0
    with open(path, "r+b") as f:
        f.truncate(keep)
    return len(data) - keep


class JsonlTail:
    """Incremental reader: each `read_new()` returns the records completed since the last call.

    Tolerates a file that does not exist yet or any more (returns []), a half-written last line
    (returned once it is completed; its number in `partial` meanwhile), and a file that shrank
    (e.g. truncated on resume): it then starts over from the beginning and counts the restart in
    `restarts`. Skipped lines are named in `problems` (`FILE:LINE: ...`).
    """

    def __init__(self, path: Path, check: Check | None = None) -> None:
        self.path = Path(path)
        self.check = check
        self.offset = 0
        self.line = 0  # complete lines consumed
        self.restarts = 0
        self.problems: list[str] = []
        self.partial: int | None = None

    def read_new(self) -> list[dict]:
        try:
            size = self.path.stat().st_size
            if size < self.offset:
                self.offset, self.line, self.problems = 0, 0, []
                self.restarts += 1
            if size == self.offset:
                return []
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(size - self.offset)
        except (FileNotFoundError, NotADirectoryError):  # not there yet, or deleted
            return []
        scan = scan_lines(data, str(self.path), self.line + 1, self.check)
        self.offset += scan.consumed
        self.line += scan.lines
        self.problems += scan.problems
        self.partial = scan.partial
        return scan.records
