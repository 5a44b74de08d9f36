"""A quiet console for `ragen train` and `ragen eval`: ragen's own lines (and a run's progress bar)
on screen, the engines' logs in RUN_DIR/engine.log (an eval's: OUT/engine.log; `--verbose` keeps
them on screen as before).

What goes where, without `--verbose`:
- vLLM's loggers (its INFO and WARNING lines, in this process and in its engine processes,
  which inherit the environment) -> RUN_DIR/engine.log, through `VLLM_LOGGING_CONFIG_PATH`;
- transformers' and huggingface_hub's progress bars (weights loading, shard writing, the
  one-time GGUF conversion), tqdm bars and vLLM's weight-loading bar (`use_tqdm_on_load`, set
  by the rollout backend where TQDM_DISABLE is 1) -> off;
- torch's "Triton not available" warning on CPU -> off (this process: a single-process run);
- Python's FutureWarning and DeprecationWarning from libraries -> off (in this process and,
  through PYTHONWARNINGS, in child processes);
- a several-process run's `deepspeed` launcher: its INFO lines (world info, each rank's command
  and exit) -> off on one node (`quiet_launcher`); its warnings and errors stay.
Errors still surface: an exception ends the run with its message on screen and its traceback
in events.jsonl; vLLM's ERROR lines are in engine.log, whose path ragen prints. torch's C++
warnings are off (TORCH_CPP_LOG_LEVEL=ERROR); a few lines that native code or an engine process
writes to the terminal itself still get through.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

LOG_NAME = "engine.log"


def vllm_logging_config(log_file: Path) -> dict:
    """A logging dictConfig that sends vLLM's loggers to `log_file` only (vllm/logger.py reads
    it from VLLM_LOGGING_CONFIG_PATH in every process that imports vLLM)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log_file), "formatter": "plain",
                              "level": "DEBUG"}},
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }


def quiet_env(run_dir: Path) -> dict[str, str]:
    """The environment of a quiet run (module doc); writes RUN_DIR/.vllm-logging.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / ".vllm-logging.json"
    config.write_text(json.dumps(vllm_logging_config(run_dir / LOG_NAME), indent=2) + "\n", encoding="utf-8")
    return {"VLLM_LOGGING_CONFIG_PATH": str(config), "VLLM_CONFIGURE_LOGGING": "1",
            "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
            "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR",
            "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning"}


def early_quiet() -> None:
    """Before the run directory exists (model conversion, imports): progress bars and library
    FutureWarnings off in this process."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # torch warns "Triton not available" once per CPU run, through this logger (torch/_library/triton.py)
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def go_quiet(run_dir: Path) -> Path:
    """Apply `quiet_env` to this process (and so to every process it starts); returns the log path."""
    early_quiet()
    quiet = quiet_env(run_dir)
    if os.environ.get("VLLM_CONFIGURE_LOGGING") == "0":  # the user turned vLLM's logging set-up off: vLLM
        del quiet["VLLM_LOGGING_CONFIG_PATH"]            # refuses a config file then (RuntimeError on import)
    for key, value in quiet.items():
        os.environ.setdefault(key, value)  # a user's own setting wins
    return run_dir / LOG_NAME


def quiet_launcher(argv: list[str]) -> list[str]:
    """The launch command of a quiet run: `deepspeed` with `--log_level=warning` unless the command
    sets a level; other commands as given. On one node the runner hands the level on to launch.py;
    on several (pdsh) DeepSpeed 0.19's runner does not, so each node's launch.py still logs INFO."""
    if not argv or Path(argv[0]).name != "deepspeed" or any(a.startswith("--log_level") for a in argv):
        return list(argv)
    return [argv[0], "--log_level=warning", *argv[1:]]


@contextmanager
def env_restored():
    """What `early_quiet` and `go_quiet` change, as it was on entry, again on exit: os.environ,
    Python's warning filters and torch's Triton logger level. A command run in-process (a test's
    CliRunner) leaves no quiet settings behind for the next one, for the processes the next one
    starts, or for the warnings the caller's own code raises."""
    saved = dict(os.environ)
    triton = logging.getLogger("torch._library.triton")
    level = triton.level
    with warnings.catch_warnings():  # restores warnings.filters on exit
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)
            triton.setLevel(level)
