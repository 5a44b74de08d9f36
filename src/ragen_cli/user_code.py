"""Where the user's own modules (`module:name` in a spec) are imported from: the spec's folder
first, then the directory ragen runs in. Stdlib only: both `spec` (which sets the folder) and
`envs` (which imports the modules, `envs.base.import_ref`) read it."""

from __future__ import annotations

import os
from pathlib import Path

SPEC_DIR_VAR = "RAGEN_SPEC_DIR"
"""The folder of the spec being run: set by `use_spec_folder`, inherited by the processes a run starts."""


def use_spec_folder(spec_file: str | Path) -> None:
    """Import the spec's modules from its folder first. A run directory's spec.yaml (plan.json
    beside it) keeps the folder of the spec that started the run (inherited from `ragen train`)."""
    folder = Path(spec_file).resolve().parent
    if (folder / "plan.json").is_file() and os.environ.get(SPEC_DIR_VAR):
        return
    os.environ[SPEC_DIR_VAR] = str(folder)


def module_dirs() -> list[str]:
    """Where `module:name` references are imported from, first to last: the spec's folder, then
    the directory ragen runs in (then the installed packages)."""
    dirs = [d for d in os.environ.get(SPEC_DIR_VAR, "").split(os.pathsep) if d] + [os.getcwd()]
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))
