"""Regenerate docs/spec.md from the spec models, and the data adapters' option tables in
docs/envs.md from their config classes: `python scripts/gen_docs.py` (`--check` exits 1 if stale)."""

from __future__ import annotations

import sys
from pathlib import Path

from ragen_cli.spec.docgen import render

DOCS = Path(__file__).resolve().parents[1] / "docs"
TARGET = DOCS / "spec.md"
ENVS = DOCS / "envs.md"


def main() -> int:
    from ragen_cli.envs.config_doc import update

    pages = {TARGET: render(), ENVS: update(ENVS.read_text(encoding="utf-8"))}
    if "--check" in sys.argv[1:]:
        stale = [p for p, text in pages.items() if (p.read_text(encoding="utf-8") if p.exists() else "") != text]
        for p in stale:
            print(f"{p} is out of date: run python scripts/gen_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for p, text in pages.items():
        p.write_text(text, encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
