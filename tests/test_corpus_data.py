"""bench/corpus.py, the one loader of the health corpus (data/health_corpus/<batch>.tar.xz):
it returns every run of the layout it replaced (one folder per batch, bench/health_corpus*/),
with the same labels and the same bytes, and packs a folder to the same archive every time."""

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _corpus():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("corpus", BENCH / "corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def content_digest(folder: Path) -> str:
    """sha256 over a corpus folder's files, sorted by path: each relative path, NUL, its bytes, NUL."""
    h = hashlib.sha256()
    for p in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# batch: (run folders, labels.json's count per label, content_digest of the folder), computed with
# content_digest and a count of runs/*/ and of labels.json's "label" fields on the old folders
# bench/health_corpus/ ("main") and bench/health_corpus_<batch>/ at commit bad02a5, before they
# were packed. 212 runs in all.
OLD_LAYOUT = {
    "main": (35, {"collapse": 15, "learns": 14, "none": 6}, "7d56b53d222a8ae764f35f2b2ac6790d6624ab726274901aa6acb0b2d9412624"),
    "fresh": (30, {"collapse": 11, "learns": 13, "none": 2, "shortcut": 4}, "d3618959cdbd1cf7ecbff1edbf0919d702d140aaf1b0cecbd43edcb76dd3379b"),
    "fresh2": (10, {"collapse": 3, "learns": 4, "shortcut": 3}, "7b79512b4acd98e5ab76817efd9e56922eae1a42373246826a6920c634a5c959"),
    "fresh3": (12, {"collapse": 1, "learns": 10, "shortcut": 1}, "cfc5112432793c05533a5ac66975a6f63570dc7a92b99951a226468e079786f1"),
    "fresh4": (10, {"collapse": 1, "learns": 6, "shortcut": 3}, "d54b0864e25c5987896f93987824192b4e945762dfade3c39db6af64be073022"),
    "fresh5": (10, {"collapse": 3, "learns": 4, "shortcut": 3}, "659902494929d52722f837ea517225707a1f2ae2c5cc2647f73fc3581d314af8"),
    "fresh6": (10, {"collapse": 1, "learns": 7, "shortcut": 2}, "d8cec753c190db9380b085645da8fc96e34e274bc5abdf0c4f8f39db508565c0"),
    "fresh7": (4, {"collapse": 2, "learns": 2}, "80924ba294d36d01f9a46882eca884e6b5653d5c8cfc7f8ab510afd5ecb50b1a"),
    "fresh8": (8, {"collapse": 2, "learns": 3, "shortcut": 3}, "28ddde2cde0fca57e7b0d55b8dbca72b9d6b84653efd950dbbbb52edccb41b31"),
    "fresh9": (7, {"collapse": 1, "learns": 5, "shortcut": 1}, "42b69f3f91dcfdab830b15c2eed21fab7741c16fee2886e9007cf51e15bd3cf3"),
    "fresh10": (9, {"collapse": 3, "learns": 4, "shortcut": 2}, "dc4e629467acd9f0ae77de3e156e7784421ded9236451e4f0f89090ee49706ef"),
    "fresh11": (8, {"collapse": 1, "learns": 4, "shortcut": 3}, "3a87d419cc6391030e727a4d7f9aa2edc2305ca4917c296f1e4d3570b1b70759"),
    "fresh12": (14, {"collapse": 5, "learns": 8, "shortcut": 1}, "ea854ba46f1b213a689a7928de794e63c82bb7bfd14ef9fed4673dac14ec1b73"),
    "fresh13": (13, {"collapse": 1, "learns": 4, "shortcut": 8}, "aaefcce94fc76cfcf787a39d22ce1c49ffd125e81fa2a99d6efdcd76f992a320"),
    "gpu": (18, {"collapse": 3, "learns": 10, "none": 2, "shortcut": 3}, "5b94ce2e04cebfd8a3464904986f5f1ea8a19438e27cdca6889a4c87fd9f2922"),
    "gpu2": (14, {"collapse": 1, "learns": 6, "shortcut": 7}, "3aa7a0d2d2c8bdbd887c6e5e0d61204d0eb4f16167a27a4078e9d88db6e54b5e"),
}


def test_the_loader_returns_every_run_of_the_old_layout_with_its_label():
    corpus = _corpus()
    assert set(OLD_LAYOUT) <= set(corpus.batches())
    for batch, (n_runs, counts, digest) in OLD_LAYOUT.items():
        runs, labels = corpus.runs(batch), corpus.labels(batch)
        assert len(runs) == n_runs, batch
        assert [lab["run"] for lab in labels] == [p.name for p in runs], batch  # one label per run folder
        got: dict[str, int] = {}
        for lab in labels:
            got[lab["label"]] = got.get(lab["label"], 0) + 1
        assert got == counts, batch
        assert content_digest(corpus.folder(batch)) == digest, batch  # every file, byte for byte
    assert sum(n for n, _, _ in OLD_LAYOUT.values()) == 212


def test_labelled_points_each_label_at_the_folder_its_run_lies_in():
    corpus = _corpus()
    both = corpus.labelled("main", "fresh7")
    assert len(both) == OLD_LAYOUT["main"][0] + OLD_LAYOUT["fresh7"][0]
    for lab in both:
        assert (Path(lab["corpus"]) / "runs" / lab["run"] / "metrics.jsonl").is_file()
    assert {lab["corpus"] for lab in both} == {str(corpus.folder("main")), str(corpus.folder("fresh7"))}


def test_pack_is_deterministic_and_unpacks_to_the_same_files(tmp_path, monkeypatch):
    corpus = _corpus()
    monkeypatch.setattr(corpus, "DATA", tmp_path / "data")
    monkeypatch.setenv("RAGEN_CORPUS_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    (src / "runs" / "r1" / "trajectories").mkdir(parents=True)
    (src / "labels.json").write_text('[{"run": "r1", "label": "learns"}]\n')
    (src / "runs" / "r1" / "metrics.jsonl").write_text('{"step": 1}\n')
    (src / "runs" / "r1" / "trajectories" / "step-1.jsonl").write_text("{}\n")
    first = corpus.pack(src, "tiny").read_bytes()
    (src / "runs" / "r1" / "metrics.jsonl").touch()  # a new mtime changes nothing in the archive
    assert corpus.pack(src, "tiny").read_bytes() == first
    assert corpus.batches() == ["tiny"]
    got = corpus.folder("tiny")
    assert got.parent == tmp_path / "cache" / "ragen-health-corpus"
    assert content_digest(got) == content_digest(src)
    assert corpus.labels("tiny") == [{"run": "r1", "label": "learns"}]
    assert corpus.folder(src) == src and corpus.folder(str(src)) == src  # a folder is read in place
    with pytest.raises(FileNotFoundError):
        corpus.labels("no-such-batch")
