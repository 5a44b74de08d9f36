"""Import hygiene: the TUI never imports torch; monitor/ is stdlib only; commands.py is light."""

import json
import subprocess
import sys

HEAVY = {"torch", "vllm", "deepspeed", "transformers", "peft"}
NOT_STDLIB = {"pydantic", "yaml", "textual", "rich", "numpy", "typer"} | HEAVY


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_tui_app_imports_no_torch():
    loaded = _modules_after("import ragen_cli.tui.app, ragen_cli.tui.state, ragen_cli.tui.format")
    assert "textual" in loaded  # the probe really imported the app
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_monitor_is_stdlib_only():
    mods = ["metrics", "rundir", "jsonl", "health", "intervene", "diversity", "metrics_doc"]
    loaded = _modules_after("\n".join(f"import ragen_cli.monitor.{m}" for m in mods))
    assert "ragen_cli.monitor.health" in loaded
    assert not {m.split(".")[0] for m in loaded} & NOT_STDLIB


def test_watch_command_module_is_light():
    loaded = _modules_after("import ragen_cli.tui.commands")
    assert not loaded & (HEAVY | {"textual"})
