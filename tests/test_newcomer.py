"""A newcomer's first hour (issue 73): each mistake a new user makes gets one line that names the
place and the fix, never a traceback or a guess. Real commands on real files: `ragen` in a
subprocess where the import state matters, Typer's CliRunner elsewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "src" / "ragen_cli" / "templates"
RAGEN = [sys.executable, "-c", "from ragen_cli.cli import main; main()"]
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_spec_folder(monkeypatch):
    """Loading a spec remembers its folder in RAGEN_SPEC_DIR; keep that within each test."""
    monkeypatch.delenv("RAGEN_SPEC_DIR", raising=False)


def ragen(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAGEN_SPEC_DIR"}
    return subprocess.run(RAGEN + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _corridor(tmp_path: Path) -> Path:
    """The guess template as corridor/ragen.yaml with its env in corridor/corridor.py."""
    project = tmp_path / "corridor"
    project.mkdir()
    shutil.copy(TEMPLATES / "guess" / "my_env.py", project / "corridor.py")
    text = (TEMPLATES / "guess" / "ragen.yaml").read_text()
    (project / "ragen.yaml").write_text(text.replace("name: my_env:GuessNumberEnv", "name: corridor:GuessNumberEnv"))
    return project


# ---------------------------------------------------------------- 1: where modules come from
def test_module_beside_the_spec_wins_over_a_folder_of_the_same_name(tmp_path):
    """From the parent folder, `corridor` is also the folder corridor/ (a namespace package);
    the spec's folder is searched first, so corridor/corridor.py is the module."""
    _corridor(tmp_path)
    done = ragen(["validate", "corridor/ragen.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("corridor/ragen.yaml: ok. Run 'guess-number'")


def test_a_folder_shadowing_the_module_is_named(tmp_path):
    """A spec in another folder names `corridor:...`: the only `corridor` found is the folder."""
    _corridor(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(tmp_path / "corridor" / "ragen.yaml", other / "ragen.yaml")
    (tmp_path / "corridor" / "corridor.py").rename(tmp_path / "corridor" / "env_code.py")
    done = ragen(["validate", "other/ragen.yaml"], cwd=tmp_path)
    assert done.returncode == 2
    # the env's `name:` is line 19, its value at column 11 (the guess template)
    assert done.stderr.splitlines()[1] == (
        f"  other/ragen.yaml:19:11: env.train.name: env 'corridor:GuessNumberEnv': module 'corridor' is the folder "
        f"{tmp_path / 'corridor'} (no __init__.py), not corridor.py; looked in {other}, {tmp_path} and the "
        "installed packages")


def test_a_missing_module_says_where_it_looked(tmp_path):
    project = _corridor(tmp_path)
    (project / "corridor.py").unlink()
    done = ragen(["validate", "ragen.yaml"], cwd=project)
    assert done.returncode == 2
    assert done.stderr.splitlines()[1] == (
        f"  ragen.yaml:19:11: env.train.name: env 'corridor:GuessNumberEnv': cannot import module 'corridor': no such module (looked in "
        f"{project} and the installed packages)")


# ---------------------------------------------------------------- 2: reward functions are probed
BROKEN_REWARDS = '''

def boom(prompts, completions, answer, **kwargs):
    return [1 / 0]


def two(prompts, completions, **kwargs):
    return [1.0, 0.0]


def text(prompts, completions, **kwargs):
    return "1.0"
'''


def _dataset(tmp_path: Path, reward: str = "correct") -> Path:
    """The dataset template in tmp_path, its `rewards:` naming my_rewards:<reward>."""
    for f in (TEMPLATES / "dataset").iterdir():
        shutil.copy(f, tmp_path / f.name)
    with open(tmp_path / "my_rewards.py", "a") as f:
        f.write(BROKEN_REWARDS)
    spec = tmp_path / "ragen.yaml"
    spec.write_text(spec.read_text().replace("rewards: [my_rewards:correct]   #", f"rewards: [my_rewards:{reward}]   #"))
    return spec


def _probed_row() -> tuple[int, str]:
    """The row the probe reads: train seed 10000 (the default) -> row perm[10000 mod 160] = perm[80]
    of the permutation default_rng(shuffle_seed 0) draws (dataset_env.py), and its answer."""
    import json

    import numpy as np

    row = int(np.random.default_rng(0).permutation(160)[80])
    lines = (TEMPLATES / "dataset" / "data.jsonl").read_text().splitlines()
    return row, json.loads(lines[row])["answer"]


# `rewards: [my_rewards:...]` is line 22 of the dataset template; its first item starts at column 17.
# my_rewards.py: the template's 20 lines, then BROKEN_REWARDS: two blank lines, `def boom` on 23, its
# `return [1 / 0]` on 24.
@pytest.mark.parametrize("reward, message", [
    ("boom", "boom raised on row {row} of data.jsonl (episode seed 10000): ZeroDivisionError: division by zero "
             "(at my_rewards.py:24, in boom)"),
    ("two", "two must return a list with one value per completion, got [1.0, 0.0] on row {row} of data.jsonl"),
    ("text", "text must return a list with one value per completion, got '1.0' on row {row} of data.jsonl"),
])
@pytest.mark.parametrize("command", [["validate"], ["train", "--dry-run"]])
def test_a_broken_reward_function_fails_validate_and_the_dry_run(tmp_path, reward, message, command):
    _dataset(tmp_path, reward)
    row, answer = _probed_row()
    done = ragen([command[0], "ragen.yaml", *command[1:]], cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert done.stderr.splitlines() == [
        f"ragen {command[0]}: 1 problem in the run spec:",
        f"  ragen.yaml:22:17: env.train.config.rewards[0]: {message.format(row=row)} "
        f"[probed with the action '{answer}'; --no-probe skips the probe]",
    ]
    skipped = ragen([command[0], "ragen.yaml", *command[1:], "--no-probe"], cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr


# ---------------------------------------------------------------- 4: errors at the field they concern
# dataset template lines: 21 `path: data.jsonl` (value at column 13), 22 `rewards: [...]` (first item
# at column 17), 23 `system_prompt: ...` (column 7 is the key; replaced below)
@pytest.mark.parametrize("edit, sets, line", [
    (("rewards: [my_rewards:correct]", "rewards: [my_rewards:corect] "), [],
     "ragen.yaml:22:17: env.train.config.rewards[0]: env 'dataset': reward function 'my_rewards:corect': module "
     "'my_rewards' has no attribute 'corect' ({dir}/my_rewards.py); did you mean 'correct'?"),
    (("path: data.jsonl ", "path: dat.jsonl  "), [],
     "ragen.yaml:21:13: env.train.config.path: env 'dataset': no such data file or folder: dat.jsonl (relative "
     "paths start at {dir})"),
    (("system_prompt: \"Add the numbers.\"\n    groups", "prompt_field: question\n    groups"), [],
     "ragen.yaml:23:21: env.train.config.prompt_field: env 'dataset': data.jsonl: no column 'question' "
     "(prompt_field); columns: answer, prompt"),
    (None, ["--set", "env.train.config.path=nope.jsonl"],
     "--set env.train.config.path=nope.jsonl: env.train.config.path: env 'dataset': no such data file or folder: "
     "nope.jsonl (relative paths start at {dir})"),
])
def test_dataset_errors_point_at_their_field(tmp_path, edit, sets, line):
    spec = _dataset(tmp_path)
    if edit:
        text = spec.read_text()
        assert edit[0] in text
        spec.write_text(text.replace(edit[0], edit[1], 1))
    done = ragen(["validate", "ragen.yaml", *sets], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["ragen validate: 1 problem in the run spec:", "  " + line.format(dir=tmp_path)]


# ---------------------------------------------------------------- 3: no tracebacks from `ragen envs`
def test_envs_show_refuses_a_negative_seed_without_a_traceback():
    result = runner.invoke(app, ["envs", "show", "bandit", "--seed", "-1"])
    assert result.exit_code == 2
    assert "Invalid value for '--seed' / '-s': Input should be greater than or equal to" in result.output
    assert isinstance(result.exception, SystemExit)  # a usage error, not gymnasium's seeding error


def test_envs_play_with_a_raising_reward_is_one_line(tmp_path, monkeypatch):
    """`ragen envs play dataset` on the template's data with a reward that divides by zero: the
    first answer ends the command with the reward's own message and line, exit 1."""
    shutil.copy(TEMPLATES / "dataset" / "data.jsonl", tmp_path / "data.jsonl")
    (tmp_path / "play_boom_rewards.py").write_text("def boom(prompts, completions, **kw):\n    return [1 / 0]\n")
    monkeypatch.chdir(tmp_path)
    # seed 0 reads row perm[0 mod 160] of default_rng(0).permutation(160) (dataset_env.py)
    import numpy as np

    row = int(np.random.default_rng(0).permutation(160)[0])
    try:
        result = runner.invoke(app, ["envs", "play", "dataset", "--set", "path=data.jsonl",
                                     "--set", "rewards=[play_boom_rewards:boom]"], input="9\n")
    finally:
        sys.modules.pop("play_boom_rewards", None)
    assert result.exit_code == 1
    assert result.stderr == (f"ragen envs: boom raised on row {row} of data.jsonl (episode seed 0): ZeroDivisionError: "
                             "division by zero (at play_boom_rewards.py:2, in boom)\n")


# ---------------------------------------------------------------- 5: no silent changes
def test_a_micro_batch_ragen_lowers_is_a_warning(tmp_path, monkeypatch):
    """The guess template: 4 groups x 8, starpo-s keeps floor(0.25 x 4) = 1 group = 8 trajectories
    in its 4 mini batches: 2 rows per mini batch on the one process, so micro_batch 64 becomes 2."""
    monkeypatch.chdir(TEMPLATES / "guess")
    result = runner.invoke(app, ["validate", "ragen.yaml", "--no-probe", "--set", "train.micro_batch=64"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[2:] == [
        "warning: train.micro_batch 64 is more than a mini batch's 2 rows per process (2 per mini batch / "
        "1 process(es)); ragen uses micro_batch 2: write 2, or fewer mini batches"]


def test_a_quoted_number_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(TEMPLATES / "guess")
    result = runner.invoke(app, ["validate", "ragen.yaml", "--no-probe", "--set", 'model.lora.rank="16"'])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "ragen validate: 1 problem in the run spec:",
        """  --set model.lora.rank="16": model.lora.rank: '16' is text (quoted); write the number 16 without quotes"""]
    spec = tmp_path / "q.yaml"
    spec.write_text((TEMPLATES / "dataset" / "ragen.yaml").read_text().replace("lora: {rank: 16,", 'lora: {rank: "16",'))
    result = runner.invoke(app, ["validate", str(spec), "--no-probe"])
    # line 15: `  lora: {rank: "16", alpha: 32}`; the value starts after 15 characters
    assert result.stderr.splitlines()[1] == (
        f"  {spec}:15:16: model.lora.rank: '16' is text (quoted); write the number 16 without quotes")


def test_an_offline_hub_id_missing_from_the_cache_is_a_validate_error(tmp_path):
    """HF_HUB_OFFLINE=1 and a cache holding Qwen/Qwen2.5-0.5B-Instruct (its folder only): the
    misspelt id is an error anchored at the --set that wrote it, with the cached one as the
    suggestion; the dry run, which does not need the model, warns."""
    cache = tmp_path / "hub"
    (cache / "models--Qwen--Qwen2.5-0.5B-Instruct").mkdir(parents=True)
    env = {**{k: v for k, v in os.environ.items() if k != "RAGEN_SPEC_DIR"}, "HF_HUB_OFFLINE": "1",
           "HF_HUB_CACHE": str(cache)}
    why = (f"'Qwen/Qwen2.5-0.5B-Instruc' is not in the local Hugging Face cache ({cache}) and "
           "HF_HUB_OFFLINE is set, so it cannot be downloaded; did you mean 'Qwen/Qwen2.5-0.5B-Instruct'? (fetch it "
           "with `huggingface-cli download Qwen/Qwen2.5-0.5B-Instruc` where the hub is reachable)")
    done = subprocess.run(RAGEN + ["validate", "ragen.yaml", "--no-probe", "--set", "model.name=Qwen/Qwen2.5-0.5B-Instruc"],
                          cwd=TEMPLATES / "guess", env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout
    assert done.stderr.splitlines() == [
        "ragen validate: 1 problem in the run spec:",
        f"  --set model.name=Qwen/Qwen2.5-0.5B-Instruc: model.name: {why}"]
    dry = subprocess.run(RAGEN + ["train", "ragen.yaml", "--dry-run", "--set", "model.name=Qwen/Qwen2.5-0.5B-Instruc"],
                         cwd=TEMPLATES / "guess", env=env, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert f"warning: model.name {why}" in dry.stdout.splitlines()


# ---------------------------------------------------------------- 6: no warnings the user did not cause
SHIPPED = [*sorted(p for p in (ROOT / "specs").rglob("*.yaml") if "Qwen/" not in p.read_text()),
           *sorted(TEMPLATES.glob("*/ragen.yaml"))]


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_shipped_specs_and_templates_validate_without_a_warning(path, monkeypatch):
    """(Specs that name a hub model are left out: offline, without its snapshot, that is a true warning.)"""
    monkeypatch.chdir(path.parent if "templates" in path.parts else ROOT)
    result = runner.invoke(app, ["validate", str(path), "--no-probe"])
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if "warning" in line] == []


# ---------------------------------------------------------------- 9: `ragen watch` names how a run ended
INTERRUPTED = {"step": 6, "time": 1700000090.0, "kind": "end", "stopped": True, "interrupted": True}


def _ended_run(tmp_path: Path, last: dict = INTERRUPTED) -> Path:
    """tests/fixtures/runs/healthy (40 steps, step k at time 1700000012 + 12 k) cut after step 6,
    its last event `last` (default: the `end` that Ctrl-C writes, train/loop.py: interrupted at
    step 6)."""
    import json

    src, run = ROOT / "tests" / "fixtures" / "runs" / "healthy", tmp_path / "healthy"
    shutil.copytree(src, run)
    metrics = (src / "metrics.jsonl").read_text().splitlines()[:7]
    (run / "metrics.jsonl").write_text("\n".join(metrics) + "\n")
    events = [json.loads(line) for line in (src / "events.jsonl").read_text().splitlines()]
    kept = [ev for ev in events if ev["step"] <= 6 and ev["kind"] != "end"]
    kept.append(last)
    (run / "events.jsonl").write_text("".join(json.dumps(ev) + "\n" for ev in kept))
    return run


ENDINGS = {  # the last event train/loop.py writes -> what the header says
    "interrupted": (INTERRUPTED, "interrupted at step 6 of 40"),
    "failed": ({"step": 6, "time": 1700000090.0, "kind": "error", "error": "RuntimeError: boom"}, "failed at step 6 of 40"),
    "stopped": ({"step": 6, "time": 1700000090.0, "kind": "end", "stopped": True, "interrupted": False},
                "stopped at step 6 of 40"),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_watch_app_names_how_the_run_ended(tmp_path, ending):
    """The Textual app (App.run_test + Pilot), not only its formatter: the header names the ending,
    elapsed is start 1700000000 to the last event 1700000090 = 1m30s, and no ETA or "finished"."""
    import asyncio

    from ragen_cli.tui.app import WatchApp
    from ragen_cli.tui.widgets.header import RunHeader

    last, words = ENDINGS[ending]
    run = _ended_run(tmp_path, last)

    async def header() -> str:
        app = WatchApp([run])
        async with app.run_test(size=(140, 44)) as pilot:
            for _ in range(200):
                text = str(app.query_one("#run-0 RunHeader", RunHeader).render())
                if "step 6" in text:
                    break
                await pilot.pause(0.05)
            return text

    text = asyncio.run(header())
    assert f"step 6 (7/40)  {words}  elapsed 1m30s  " in text
    assert "ETA" not in text and "finished" not in text


def test_watch_through_a_pipe_prints_an_interrupted_run_as_such(tmp_path):
    run = _ended_run(tmp_path)
    result = runner.invoke(app, ["watch", str(run)])  # CliRunner's stdout is not a terminal
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "\x1b" not in result.stdout
    # elapsed: end 1700000090 - start event 1700000000 = 90 s = 1m30s; no ETA for a run that ended early
    assert lines[1].startswith("step 6 (7/40)  interrupted at step 6 of 40  elapsed 1m30s  ")
    assert "ETA" not in lines[1] and "finished" not in result.stdout


def test_header_names_failed_and_stopped_runs():
    from ragen_cli.tui.format import run_state

    assert run_state([{"kind": "error", "step": 3}], 10) == "failed at step 3 of 10"
    assert run_state([{"kind": "end", "step": 4, "stopped": True, "interrupted": False}], 10) == "stopped at step 4 of 10"
    assert run_state([{"kind": "end", "step": 9, "stopped": False, "interrupted": False}], 10) == "finished"
    assert run_state([{"kind": "start", "step": 0}], 10) == "running"


# ---------------------------------------------------------------- 8: --help in click's words
def _command_paths(command, path=()):
    """Every command of the tree as its argv prefix: (), ('init',), ('envs', 'show'), ..."""
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def _help(path) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    return result.output


def _usage(path) -> str:
    return _help(path).strip().splitlines()[0].strip()


def _row(text: str, option: str) -> str:
    """The help row that starts with `option`, whitespace collapsed, box edges dropped."""
    [line] = [ln for ln in text.splitlines() if ln.strip("│ ").startswith(option + " ")]
    return " ".join(line.strip("│ ").split())


def test_no_help_shows_a_python_type_or_a_braced_argument():
    import typer

    root = typer.main.get_command(app)
    paths = list(_command_paths(root))
    assert ("envs", "show") in paths and ("validate",) in paths
    for path in paths:
        text = _help(path)
        usage = text.strip().splitlines()[0]
        assert "{" not in usage and "[spec]" not in usage, (path, usage)
        assert not re.search(r"<(bool|str|int|float|path|Path|list\[|\w+ range|[\w]+,[\w]+)", text), (path, text)


def test_help_reads_as_the_readme_writes_commands():
    assert _usage(("validate",)) == "Usage: ragen validate [OPTIONS] SPEC"
    assert _usage(("train",)) == "Usage: ragen train [OPTIONS] [SPEC]"
    assert _usage(("export",)) == "Usage: ragen export [OPTIONS] CHECKPOINT OUT"
    assert _usage(("health",)) == "Usage: ragen health [OPTIONS] RUN_DIRS..."
    text = _help(("eval",))
    assert _row(text, "--compare") == "--compare A B Two checkpoints or models, A B, on the same seeds."
    assert _row(text, "--backend") == "--backend [vllm|hf|auto] vllm, hf or auto (default: the spec's rollout.backend)."
    assert _row(text, "--greedy") == "--greedy Greedy decoding (temperature 0)."  # a flag: no metavar
    assert _row(text, "--seed") == "--seed INTEGER [x>=0] First seed (default: the spec's val.seed, 123)."
    assert _row(_help(("train",)), "--set") == "--set KEY=VALUE Override a value: --set train.steps=10 (repeatable)."
    assert _row(_help(("envs", "show")), "--set") == (
        "--set KEY=VALUE Env config override key=value (YAML value); repeatable.")
    assert _row(_help(("init",)), "--template").startswith(
        "--template -t NAME The template: guess (a custom env), dataset (prompts + a reward function)")


def test_validate_schema_needs_no_spec_and_a_missing_spec_is_a_usage_error():
    assert runner.invoke(app, ["validate", "--schema"]).output.startswith("{")
    result = runner.invoke(app, ["validate"])
    assert result.exit_code == 2 and "Missing argument 'SPEC'." in result.output


def test_command_list_has_one_sentence_each_and_help_has_no_hard_breaks():
    import typer

    root = typer.main.get_command(app)
    validate = root.commands["validate"]
    # the docstring's first sentence, its three source lines joined
    assert validate.short_help == ("Check a run spec without training: every problem, with file:line:col and key path; "
                                   "for a valid one, a summary and a warning for each setting with no effect in its Plan.")
    for path in _command_paths(root):
        command = root
        for name in path:
            command = command.commands[name]
        assert "\n" not in (command.help or "").replace("\n\n", ""), path
    assert "│           env                " not in _help(())  # the ragged break the issue quoted


# ---------------------------------------------------------------- 7: the dry run's summary
def _dry_run(*sets: str) -> list[str]:
    args = ["train", str(ROOT / "specs" / "bandit.yaml"), "--dry-run", *(a for s in sets for a in ("--set", s))]
    result = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return [line.rstrip() for line in result.output.splitlines()]


def test_dry_run_opens_with_a_summary_and_an_estimate():
    lines = _dry_run("deepspeed.precision=fp32")
    # 16 x 16 = 256 trajectories of 1 turn x 8 tokens = 2,048 tokens; keep 0.125 of 16 groups = 2 x 16 = 32
    assert lines[0] == ("bandit: 30 steps of 256 trajectories (16 groups x 16), each at most 1 turn x 8 tokens "
                        "(2,048 generated tokens a step at most); the update trains up to 32 kept trajectories in "
                        "1 optimizer step a step, 30 in the run.")
    # bf16 step: 3.48 + 0.83 + 0.0265 x 256 + 0.113 x 32 kept (one pass: no old log-probs, no reference) = 14.71 s;
    # a validation: 2.53 + 0.0315 x 64 episodes (2 envs x 32) = 4.546 s, 7 of them (before, at 5, ..., 30).
    # fp32 on a CPU with native bf16: x 10.9 / 7.77 -> step 20.64 s, validation 6.377 s,
    #   run 16.5 + 30 x 20.636 + 7 x 6.377 = 680.2 s = 11.3 min;
    # without native bf16: x 21.38 / 7.77 -> step 40.48 s, validation 12.509 s, run 1318.3 s = 22.0 min
    from ragen_cli.device import CPU_BF16_FLAGS, cpu_flags

    step, run = ("21 s", "11.3 min") if set(CPU_BF16_FLAGS) & cpu_flags() else ("40 s", "22.0 min")
    cores = "" if os.cpu_count() == 2 else f"; this machine has {os.cpu_count()} cores, not scaled"
    assert lines[1] == (f"Estimated time: ~{step} a step, ~{run} for the run with validation and start (stored profile: "
                        "smollm2-135m-instruct on 2 CPU cores in fp32, fitted from specs/bandit.yaml and the dataset "
                        f"template (compile/estimate.py){cores}; episodes that end early make it shorter).")


def test_dry_run_explains_deepspeeds_accumulation_and_the_engine_dtype():
    lines = _dry_run("deepspeed.precision=bf16")
    # 32 kept trajectories a mini batch, micro batch 16: 2 micro batches per optimizer step
    assert any(re.fullmatch(r"│ gradient accumulation steps \(done by ragen: DeepSpeed's JSON has 1\)\s+│\s+2 │.*", ln)
               for ln in lines)
    assert ("DeepSpeed's gradient_accumulation_steps is 1: ragen accumulates the 2 micro batches of an optimizer "
            "step itself and calls engine.step() once per optimizer step (the filter can change how many a step "
            "has).") in lines
    assert ("Engine dtype float32 (training in bf16): a merged LoRA sync in bf16 would round most of each update "
            "away: the engine holds the merge in fp32.") in lines


def test_the_estimate_names_what_its_profile_lacks():
    from ragen_cli.compile.estimate import estimate

    args = dict(precision="fp32", native_bf16=False, cpus=2, trajectories=32, kept=32, max_turns=1, passes=1,
                critic=False, steps=12, val_rows=40, val_every=4)
    assert estimate("org/big-model", "cpu", **args).basis == (
        "the stored profile is of smollm2-135m-instruct, not org/big-model")
    assert estimate("smollm2-135m-instruct", "cuda", **args).step_s is None
    # the dataset template in bf16 on a CPU with native bf16 (32 trajectories, all kept, one reference
    # forward): 3.48 + 0.83 + 0.0265 x 32 + (0.113 + 0.062) x 32 = 10.758 s a step; validations before,
    # at 4, 8, 12 = 4, each 2.53 + 0.0315 x 40 = 3.79 s; run 16.5 + 12 x 10.758 + 4 x 3.79 = 160.8 s
    done = estimate("smollm2-135m-instruct", "cpu", **{**args, "precision": "bf16", "native_bf16": True})
    assert done.step_s == pytest.approx(10.758, abs=1e-3) and done.run_s == pytest.approx(160.8, abs=0.1)
    # the guess template: 3 turns (1 + 2 + 3 = 6 turns of context), 8 of 32 kept, old log-probs (4
    # optimizer steps): 3.48 + 3 x 0.83 + 0.0265 x 32 x 6 + (0.113 + 0.062) x 8 x 6 = 19.458 s
    guess = estimate("smollm2-135m-instruct", "cpu", **{**args, "precision": "bf16", "native_bf16": True, "kept": 8,
                                                        "max_turns": 3})
    assert guess.step_s == pytest.approx(19.458, abs=1e-3)
    # a critic counts as a second update: + 0.113 x 32 = 3.616 s
    critic = estimate("smollm2-135m-instruct", "cpu", **{**args, "precision": "bf16", "native_bf16": True,
                                                         "critic": True})
    assert critic.step_s - done.step_s == pytest.approx(3.616, abs=1e-3)
    assert estimate("smollm2-135m-instruct", "cpu", **{**args, "precision": "bf16"}).step_s is None  # emulated


# ---------------------------------------------------------------- 10: one error style
@pytest.mark.parametrize("args, said", [
    (["validate", "/no/such.yaml"], "ragen validate: 1 problem in the run spec:"),
    (["train", "/no/such.yaml", "--dry-run"], "ragen train: 1 problem in the run spec:"),
    (["eval"], "ragen eval: nothing to evaluate: give --checkpoint, --model, --spec, --compare or --endpoint"),
    (["inspect", "/no/such"], "ragen inspect: /no/such is neither a trajectories file nor a run directory"),
    (["models", "--convert", "nope"], "ragen models: 'nope' is not a built-in model; built-ins: smollm2-135m-instruct, "
                                      "tiny-random"),
    (["health", "/no/such"], "ragen health: /no/such: no metrics.jsonl here; pass a run directory (output.dir/NAME, "
                             "e.g. runs/bandit)"),
    (["init", ".", "--template", "chess"], "ragen init: unknown template 'chess'; choose one of guess, dataset, "
                                           "gymnasium, openenv, tools."),
])
def test_every_command_says_an_error_as_ragen_command_colon(args, said):
    """`ragen COMMAND: message`, no `error:` in some commands and a bare `ragen:` in others."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == said
