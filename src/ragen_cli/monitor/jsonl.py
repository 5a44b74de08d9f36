"""JSON-lines files that one process appends to while others read them.

A writer may be killed in the middle of a line, so readers take only complete lines (ending in
a newline) that parse as a JSON object; anything else is skipped. `JsonlTail` reads a growing
file incrementally and waits for a half-written last line to be completed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def append_jsonl(path: Path, record: dict) -> None:
    """Append one JSON object as one line; flush and fsync so a reader (or a crash) sees it whole.

    If the file ends in a half-written line (a writer killed mid-line), a newline is written
    first, so the new record is not glued to the fragment (readers skip the fragment).
    """
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    with open(path, "a+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def parse_lines(data: bytes) -> tuple[list[dict], int]:
    """Parse the complete lines of `data`; return (records, bytes consumed).

    Bytes after the last newline are a half-written line: not consumed. Complete lines that are
    not a JSON object (e.g. a line cut short by a crash and then continued) are skipped.
    """
    end = data.rfind(b"\n")
    if end < 0:
        return [], 0
    records = []
    for raw in data[: end + 1].split(b"\n"):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict):
            records.append(obj)
    return records, end + 1


def read_jsonl(path: Path) -> list[dict]:
    """All complete JSON-object lines of `path`; [] when the file does not exist."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    return parse_lines(data)[0]


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

    Tolerates a file that does not exist yet (returns []), a half-written last line (returned
    once it is completed), and a file that shrank (e.g. truncated on resume): it then starts
    over from the beginning and counts the restart in `restarts`.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = 0
        self.restarts = 0

    def read_new(self) -> list[dict]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:
            self.offset = 0
            self.restarts += 1
        if size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(size - self.offset)
        records, consumed = parse_lines(data)
        self.offset += consumed
        return records
