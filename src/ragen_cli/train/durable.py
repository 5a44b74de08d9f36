"""Writing to disk so that a crash leaves the old state or the new one, never half of either:
fsync of files and directories, a directory removed by renaming it aside first, and what to say
when the disk refused a write."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path


def storage_hint(ckpt_root: Path, exc: Exception) -> str:
    """For a failed write (EFBIG, ENOSPC, EDQUOT, or torch's writer failing, whose messages do
    not say why): the free space and the file-size limit, and the way out."""
    import resource

    written = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) or \
        re.search(r"inline_container|PytorchStreamWriter|file write", str(exc)) is not None
    if not written:
        return ""
    facts = [f"{shutil.disk_usage(ckpt_root).free / 2**30:.1f} GiB free on its disk"]
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        facts.append(f"files limited to {limit} bytes (ulimit -f)")
    return f"; {', '.join(facts)}: free space or raise the limit, then resume (ragen train --resume)"


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file, then every directory (deepest first), so the rename publishes data on disk."""
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fsync(Path(dirpath) / name)
        fsync(Path(dirpath))


def remove_dir(path: Path) -> None:
    aside = path.with_name(f".old-{path.name}")
    shutil.rmtree(aside, ignore_errors=True)
    path.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)
