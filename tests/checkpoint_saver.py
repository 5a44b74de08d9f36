"""The real `train.checkpoint.save` driven by cheap stand-in engines, for tests that kill it or
starve it of disk. The engines stand in for DeepSpeed and transformers, never for the code
under test: `save_checkpoint` writes DeepSpeed's `mp_rank_00_model_states.pt` (a 2 MB tensor,
like optimizer state) and `module.save_pretrained` copies the tiny-random model's real config
and weights (13 MB), so `checkpoint_problems` checks real files.

    python checkpoint_saver.py serve ROOT MODEL_DIR LOG
        reads a first step per stdin line, forks a child that saves FIRST, FIRST+1, ... (every
        third step twice, as after a rollback) until killed, logging `start k` / `done k` around
        each save; prints the child's pid. Forking from this process is safe: it never ran a
        torch kernel (an OpenMP pool inherited across fork deadlocks the child).
    python checkpoint_saver.py save-limited ROOT MODEL_DIR STEP LIMIT
        saves STEP with files limited to LIMIT bytes (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail
        with EFBIG); prints `saved` or `ExceptionType: message`.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

from ragen_cli.train.checkpoint import save

KEEP = 2


class _Module:
    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir

    def save_pretrained(self, out: str, safe_serialization: bool = True) -> None:
        os.makedirs(out, exist_ok=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copy(self.model_dir / name, Path(out) / name)


class _Engine:
    def __init__(self, model_dir: Path) -> None:
        self.module = _Module(model_dir)

    def save_checkpoint(self, save_dir: str, tag: str, save_latest: bool, exclude_frozen_parameters: bool) -> None:
        import torch

        out = Path(save_dir) / tag
        out.mkdir(parents=True, exist_ok=True)
        torch.save({"optim": torch.zeros(512 * 1024)}, out / "mp_rank_00_model_states.pt")  # 2 MB


def save_step(root: Path, step: int, model_dir: Path) -> Path:
    engines = SimpleNamespace(actor=_Engine(model_dir), critic=None, lora=False)
    return save(root, step, engines, {"cursor": 100 + step}, model_dir, KEEP)


def _save_forever(root: Path, model_dir: Path, first: int, log: Path) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    step = first
    while True:
        for _ in range(2 if step % 3 == 0 else 1):
            os.write(fd, f"start {step}\n".encode())
            save_step(root, step, model_dir)
            os.write(fd, f"done {step}\n".encode())
        step += 1


def serve(root: Path, model_dir: Path, log: Path) -> None:
    import numpy  # noqa: F401  (what save imports lazily: once here, not in every child)
    import torch  # noqa: F401

    import ragen_cli.train.lora  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped at once
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                _save_forever(root, model_dir, int(line), log)
            finally:
                os._exit(1)
        print(pid, flush=True)


def save_limited(root: Path, model_dir: Path, step: int, limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        save_step(root, step, model_dir)
        print("saved")
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "serve":
        serve(Path(args[0]), Path(args[1]), Path(args[2]))
    else:
        save_limited(Path(args[0]), Path(args[1]), int(args[2]), int(args[3]))
