"""Regenerate docs/spec.md from the spec models: `python scripts/gen_docs.py` (`--check` exits 1 if stale)."""

from __future__ import annotations

import sys
from pathlib import Path

from ragen_cli.spec.docgen import render

TARGET = Path(__file__).resolve().parents[1] / "docs" / "spec.md"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run python scripts/gen_docs.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
