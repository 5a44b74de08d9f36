"""Import hygiene: the CLI entry points stay light (STYLE.md, 'What the models got wrong' #7)."""

import json
import subprocess
import sys

HEAVY = ["torch", "vllm", "deepspeed", "transformers", "peft", "textual"]


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_package_is_light():
    loaded = _modules_after("import ragen_cli")
    assert not loaded & set(HEAVY)


def test_cli_help_imports_no_heavy_package():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from ragen_cli.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
    )
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_every_subcommand_help_is_light():
    code = (
        "from typer.testing import CliRunner\n"
        "from ragen_cli.cli import app\n"
        "for cmd in ['init', 'validate', 'train', 'export', 'eval', 'watch', 'inspect', 'models', 'doctor', 'envs']:\n"
        "    r = CliRunner().invoke(app, [cmd, '--help'])\n"
        "    assert r.exit_code == 0, (cmd, r.output)\n"
    )
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_ragen_help_answers_fast():
    """`ragen --help` costs well under a second of CPU. CPU time, not wall time: the bound must
    hold on a loaded shared machine too (importing torch alone costs ~2 s of CPU)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "ragen_cli.cli", "--help"], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 0.8, f"ragen --help used {cpu:.2f} s of CPU"
