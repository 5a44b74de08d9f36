"""The health corpus: copies of real ragen runs, labelled, one compressed archive per batch of
runs in data/health_corpus/ (main.tar.xz, fresh.tar.xz, fresh2.tar.xz, ..., gpu.tar.xz, gpu2.tar.xz).
Every bench script and test reads them through this module.

An archive holds what a corpus folder holds: labels.json (bench/health_corpus.py `label`) and
runs/<run>/ with metrics.jsonl, events.jsonl, spec.yaml, actions.jsonl, shortcut.json and a few
trajectories/step-K.jsonl. The replay (ragen_cli.monitor.replay) reads a run folder, so `folder`
unpacks a batch once into a cache folder named by the archive's digest and returns it.

    .venv/bin/python bench/corpus.py                   # each batch: runs and labels
    .venv/bin/python bench/corpus.py pack FOLDER NAME  # FOLDER (labels.json, runs/) -> data/health_corpus/NAME.tar.xz

To change a batch (collect more runs, relabel), unpack it into a folder, work there with
`bench/health_corpus.py --corpus FOLDER ...`, and pack it back:

    mkdir -p /tmp/fresh && tar xJf data/health_corpus/fresh.tar.xz -C /tmp/fresh
    .venv/bin/python bench/corpus.py pack /tmp/fresh fresh

The cache lies in $RAGEN_CORPUS_CACHE (default: the system's temporary folder)/ragen-health-corpus.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "health_corpus"
SUFFIX = ".tar.xz"


def cache_root() -> Path:
    return Path(os.environ.get("RAGEN_CORPUS_CACHE") or tempfile.gettempdir()) / "ragen-health-corpus"


def archive(name: str) -> Path:
    return DATA / f"{name}{SUFFIX}"


def batches() -> list[str]:
    """The batch names, sorted."""
    return sorted(p.name.removesuffix(SUFFIX) for p in DATA.glob(f"*{SUFFIX}"))


def folder(corpus: str | Path) -> Path:
    """A corpus folder (labels.json, runs/): a batch name -> its archive unpacked in the cache;
    anything else is taken as a folder already."""
    if isinstance(corpus, str) and archive(corpus).is_file():
        path = archive(corpus)
        stat = path.stat()
        return _unpacked(corpus, stat.st_size, stat.st_mtime_ns)
    return Path(corpus)


@functools.lru_cache(maxsize=None)
def _unpacked(name: str, size: int, mtime_ns: int) -> Path:
    """The archive `name` unpacked under the cache (once per content: the folder is named by its
    digest; unpacked beside it and renamed into place, so concurrent readers never see half)."""
    data = archive(name).read_bytes()
    dst = cache_root() / f"{name}-{hashlib.sha256(data).hexdigest()[:16]}"
    if (dst / "labels.json").is_file():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dst.parent))
    with tarfile.open(archive(name), "r:xz") as tar:
        tar.extractall(tmp, filter="data")
    try:
        tmp.rename(dst)
    except OSError:  # another process put it there first
        shutil.rmtree(tmp)
    return dst


def labels(corpus: str | Path) -> list[dict]:
    """The corpus's labels.json: one record per run (run, env, v0, best, final, shortcut, label, onset, why)."""
    return json.loads((folder(corpus) / "labels.json").read_text())


def labelled(*corpora: str | Path) -> list[dict]:
    """The labels of several corpora as one list, each record with the folder its run lies in
    ("corpus", which bench/health_corpus.py `run_dir` reads)."""
    return [{**lab, "corpus": str(folder(c))} for c in corpora for lab in labels(c)]


def runs(corpus: str | Path) -> list[Path]:
    """The corpus's run folders, sorted by name."""
    return sorted(p for p in (folder(corpus) / "runs").iterdir() if p.is_dir())


def run(corpus: str | Path, name: str) -> Path:
    """One run's folder."""
    return folder(corpus) / "runs" / name


def pack(src: Path, name: str) -> Path:
    """`src` (labels.json, runs/) -> data/health_corpus/<name>.tar.xz, byte for byte the same for
    the same files (sorted, no times or owners), so an unchanged batch packs to an unchanged file."""
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    paths = sorted(p for p in src.rglob("*") if p.is_file())
    DATA.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive(name), "w:xz", preset=9) as tar:
        for p in paths:
            tar.add(p, arcname=p.relative_to(src).as_posix(), recursive=False, filter=clean)
    return archive(name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pack"] and len(argv) == 3:
        out = pack(Path(argv[1]), argv[2])
        print(f"{argv[1]} -> {out} ({out.stat().st_size} bytes)")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name in batches():
        counts: dict[str, int] = {}
        for lab in labels(name):
            counts[lab["label"]] = counts.get(lab["label"], 0) + 1
        print(f"{name:8s} {len(runs(name)):3d} runs  " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
