"""The quiet console's settings (src/ragen_cli/quiet.py) without starting an engine."""

from __future__ import annotations

import json
import os

from ragen_cli.quiet import env_restored, go_quiet, quiet_env


def test_go_quiet_sends_vllm_to_the_run_log_unless_the_user_turned_vllms_logging_off(tmp_path, monkeypatch):
    for key in quiet_env(tmp_path / "probe"):
        monkeypatch.delenv(key, raising=False)
    with env_restored():
        log = go_quiet(tmp_path / "a")
        config = json.loads((tmp_path / "a" / ".vllm-logging.json").read_text())
        assert os.environ["VLLM_LOGGING_CONFIG_PATH"] == str(tmp_path / "a" / ".vllm-logging.json")
        assert config["handlers"]["file"]["filename"] == str(log) == str(tmp_path / "a" / "engine.log")
        assert os.environ["TQDM_DISABLE"] == "1"
    assert "VLLM_LOGGING_CONFIG_PATH" not in os.environ and "TQDM_DISABLE" not in os.environ
    # VLLM_CONFIGURE_LOGGING=0 with a config path makes `import vllm` raise (vllm/logger.py): the
    # user's 0 wins and no path is set; the other quiet settings still are
    monkeypatch.setenv("VLLM_CONFIGURE_LOGGING", "0")
    with env_restored():
        go_quiet(tmp_path / "b")
        assert "VLLM_LOGGING_CONFIG_PATH" not in os.environ and os.environ["VLLM_CONFIGURE_LOGGING"] == "0"
        assert os.environ["TQDM_DISABLE"] == "1"


def test_env_restored_undoes_the_warning_filters_and_logger_level_early_quiet_sets(tmp_path):
    import logging
    import warnings

    triton = logging.getLogger("torch._library.triton")
    filters, level = list(warnings.filters), triton.level
    with env_restored():
        go_quiet(tmp_path / "a")
        assert ("ignore", None, FutureWarning, None, 0) in warnings.filters[:2]
        assert triton.level == logging.ERROR
    assert list(warnings.filters) == filters and triton.level == level
