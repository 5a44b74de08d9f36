"""`ragen envs`, `ragen envs show`, `ragen envs play` through Typer's CliRunner, and the
entry-point route of the registry."""

import importlib.metadata

from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.envs import registry

runner = CliRunner()


def test_list_shows_every_builtin_with_description():
    result = runner.invoke(app, ["envs"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    # the built-in envs, then the adapters of outside envs and data (issue 34), by their spec names
    assert [line.split()[0] for line in lines] == list(registry.BUILTINS) + list(registry.ADAPTERS)
    assert list(registry.ADAPTERS) == ["gymnasium", "textarena", "openenv", "dataset", "tools", "agent"]
    assert "Sokoban 8x8 with 2 boxes." in result.output


def test_show_prints_instruction_state_and_actions():
    result = runner.invoke(app, ["envs", "show", "sokoban", "--seed", "0"])
    assert result.exit_code == 0
    assert "#: wall, _: floor, O: target" in result.output
    assert "#__P_#\n##_XO#" in result.output  # seed 0 level (see test_envs_sokoban)
    assert "Up, Down, Left, Right" in result.output


def test_show_with_set_overrides_and_bad_keys():
    result = runner.invoke(app, ["envs", "show", "bandit", "--seed", "0", "--set", "arm_names=[Cat, Tiger]"])
    assert result.exit_code == 0 and "named Tiger and Cat" in result.output  # seed 0: risky first
    bad = runner.invoke(app, ["envs", "show", "bandit", "--set", "colour=red"])
    assert bad.exit_code == 2 and "unknown key 'colour'" in bad.output
    assert runner.invoke(app, ["envs", "show", "nosuchenv"]).exit_code == 2
    assert runner.invoke(app, ["envs", "show", "bandit", "--set", "novalue"]).exit_code != 0


def test_play_reads_actions_from_stdin_until_solved():
    # seed 0 Sokoban: Left, Down, Right solves it (-0.1 -0.1 +10.9 = 10.7)
    result = runner.invoke(app, ["envs", "play", "sokoban", "--seed", "0"], input="jump\nleft\ndown\nright\n")
    assert result.exit_code == 0
    assert "[invalid action]" in result.output
    assert "episode terminated; success: True; total reward 10.7" in result.output


def test_play_quits_on_eof_and_on_colon_q():
    assert "quit" in runner.invoke(app, ["envs", "play", "frozenlake", "--seed", "0"], input="").output
    result = runner.invoke(app, ["envs", "play", "countdown", "--seed", "1"], input=":q\n")
    assert result.exit_code == 0 and "Target: 31" in result.output and "free-form" in result.output


def test_entry_point_env_is_listed_and_made(monkeypatch):
    ep = importlib.metadata.EntryPoint(name="my-bandit", value="ragen_cli.envs.bandit:BanditEnv", group="ragen.envs")
    monkeypatch.setattr(registry, "_entry_points", lambda: {"my-bandit": ep})
    assert "my-bandit" in dict(registry.list_envs())
    env = registry.make_env("my-bandit", {"arm_names": ["Owl", "Hawk"]})
    assert env.name == "my-bandit" and "Owl" in env.reset(seed=1)[0]


def test_env_modules_never_import_torch():
    import subprocess
    import sys

    code = ("import sys\n"
            "from ragen_cli.envs.registry import BUILTINS, make_env\n"
            "for name in BUILTINS: make_env(name).reset(seed=0)\n"
            "import ragen_cli.envs.commands, ragen_cli.envs.webshop.generate\n"
            "bad = [m for m in ('torch', 'transformers', 'vllm', 'deepspeed', 'textual') if m in sys.modules]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_show_lists_config_as_yaml_that_check_env_accepts():
    import yaml

    for name in registry.BUILTINS:
        out = runner.invoke(app, ["envs", "show", name, "--seed", "0"]).output
        block = out.split("-- config (change with --set key=value) --\n")[1].split("-- instruction --")[0]
        config = yaml.safe_load(block)
        assert "max_actions" in config and registry.check_env(name, config) == [], name
    out = runner.invoke(app, ["envs", "show", "bandit"]).output
    assert "high_arm_prob: 0.25  # Probability that the risky arm pays (else it pays 0)." in out
    assert "arm_names: [Phoenix, Dragon]" in out
