"""The custom-env example in docs/envs.md works through `module:Class` (so the docs do not
offer code the registry rejects)."""

import re
import sys
from pathlib import Path

from ragen_cli.envs.registry import check_env, make_env

DOC = Path(__file__).resolve().parent.parent / "docs" / "envs.md"


def test_docs_custom_env_example(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    (tmp_path / "guess_doc_env.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert check_env("guess_doc_env:GuessEnv", {"high": 3}) == []
        assert "unknown key 'low'" in check_env("guess_doc_env:GuessEnv", {"low": 1})[0]
        env = make_env("guess_doc_env:GuessEnv", {"high": 3})
        assert env.reset(seed=0)[0] == "Guess a number."
        # default_rng(0).integers(1, 4) -> 3 (numpy PCG64, first draw)
        assert env.secret == 3
        assert env.step("two")[4]["action_is_valid"] is False
        obs, r, term, trunc, info = env.step("3")
        assert (obs, r, term, info["success"]) == ("3 is right.", 1.0, True, True)
    finally:
        sys.modules.pop("guess_doc_env", None)
