"""One bad spec per error class, checked through `ragen validate` (Typer's CliRunner).

Each case asserts exit code 2, the file and line (or the `--set` argument), the key path and the
gist of the message. Line numbers count from the first line of the case's YAML text.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app

# A valid base: 8 groups x 8, keep floor(0.25 x 8) = 2 groups = 16 kept, micro 4 on 1 process.
BASE = """\
name: t
model:
  name: tiny-random
  max_context: 1024
env:
  train:
    name: bandit
    groups: 8
    group_size: 8
rollout:
  max_turns: 1
  max_tokens_per_turn: 128
train:
  steps: 4
  micro_batch: 4
"""


def spec_with(**sections: str) -> str:
    """BASE with extra top-level sections appended (each value is YAML text for that section)."""
    extra = "".join(f"{key}:\n{textwrap.indent(textwrap.dedent(body), '  ')}" for key, body in sections.items())
    return BASE + extra


# Lines of appended sections: BASE has 15 lines, so an appended section key is line 16, its first child 17.
CASES = [
    # (id, yaml text, --set args, where ("LINE" in the file or a --set arg), key path, message fragment)
    ("syntax-flow", BASE + "algorithm: {clip_low: 0.2\n", [], "17", "", "YAML syntax error"),
    ("syntax-indent", BASE + "algorithm:\n  clip_low: 0.2\n clip_high: 0.3\n", [], "18", "", "YAML syntax error"),
    ("not-a-mapping", "- just\n- a list\n", [], "1", "", "a spec is a mapping"),
    ("empty-file", "", [], "1", "", "the file is empty"),
    ("duplicate-key", BASE + "name: again\n", [], "16", "name", "duplicate key (first set on line 1)"),
    ("unknown-top", BASE + "trian:\n  steps: 3\n", [], "16", "trian", "did you mean 'train'?"),
    ("unknown-depth2", spec_with(algorithm="clip_hgh: 0.3\n"), [], "17", "algorithm.clip_hgh", "did you mean 'clip_high'?"),
    ("unknown-depth3", spec_with(algorithm="filter:\n  keep_ratoi: 0.5\n"), [], "18", "algorithm.filter.keep_ratoi", "did you mean 'keep_ratio'?"),
    ("unknown-depth3-env", BASE.replace("    group_size: 8\n", "    group_sise: 8\n"), [], "9", "env.train.group_sise", "did you mean 'group_size'?"),
    ("unknown-no-close-match", spec_with(checkpoint="zzz: 1\n"), [], "17", "checkpoint.zzz", "valid keys: every, keep"),
    ("missing-name", BASE.replace("name: t\n", ""), [], "1", "name", "required key is missing"),
    ("missing-env-name", BASE.replace("    name: bandit\n", ""), [], "6", "env.train.name", "required key is missing"),
    ("wrong-type-int", BASE.replace("groups: 8", "groups: eight"), [], "8", "env.train.groups", "expected a whole number, got 'eight'"),
    ("wrong-type-float-int", BASE.replace("steps: 4", "steps: 2.5"), [], "14", "train.steps", "expected a whole number, got 2.5"),
    ("wrong-type-bool", BASE.replace("  max_turns: 1\n", "  max_turns: 1\n  think: maybe\n"), [], "12", "rollout.think", "expected true or false, got 'maybe'"),
    ("wrong-type-section", BASE + "deepspeed: 3\n", [], "16", "deepspeed", "expected a mapping"),
    ("wrong-type-union", BASE.replace("  max_context: 1024\n", "  max_context: 1024\n  lora: {target_modules: 5}\n"), [], "5", "model.lora.target_modules", "expected a list or 'all-linear', got 5"),
    ("bad-literal", spec_with(deepspeed="zero_stage: 4\n"), [], "17", "deepspeed.zero_stage", "must be one of 0, 1, 2 or 3, got 4"),
    ("bad-literal-list", spec_with(monitor="loggers: [jsonl, neptune]\n"), [], "17", "monitor.loggers[1]", "got 'neptune'"),
    ("unknown-wandb", spec_with(monitor="wandb:\n  projekt: x\n"), [], "18", "monitor.wandb.projekt", "did you mean 'project'?"),
    ("wandb-project-pattern", spec_with(monitor="wandb: {project: team/runs}\n"), [], "17", "monitor.wandb.project", "got 'team/runs'"),
    ("wandb-entity-empty", spec_with(monitor="wandb: {entity: ''}\n"), [], "17", "monitor.wandb.entity", "must not be empty"),
    ("wandb-run-name-long", spec_with(monitor=f"wandb: {{run_name: {'r' * 129}}}\n"), [], "17", "monitor.wandb.run_name", "at most 128 characters"),
    ("wandb-group-wrong-type", spec_with(monitor="wandb: {group: [a]}\n"), [], "17", "monitor.wandb.group", "expected"),
    ("wandb-tags-not-list", spec_with(monitor="wandb: {tags: 5}\n"), [], "17", "monitor.wandb.tags", "expected a list"),
    ("wandb-tag-long", spec_with(monitor=f"wandb: {{tags: [ok, {'t' * 65}]}}\n"), [], "17", "monitor.wandb.tags", "tag 1 must be 1 to 64 characters, got 65"),
    ("wandb-table-every-negative", spec_with(monitor="wandb: {trajectory_table_every: -1}\n"), [], "17", "monitor.wandb.trajectory_table_every", "must be at least 0, got -1"),
    ("bad-preset", spec_with(algorithm="preset: starpo-x\n"), [], "17", "algorithm.preset", "'starpo' or 'starpo-s'"),
    ("below-min", BASE.replace("group_size: 8", "group_size: 0"), [], "9", "env.train.group_size", "must be at least 1, got 0"),
    ("above-max", spec_with(algorithm="filter: {keep_ratio: 1.5}\n"), [], "17", "algorithm.filter.keep_ratio", "must be at most 1.0, got 1.5"),
    ("below-min-parity-tokens", BASE.replace("  max_turns: 1\n", "  max_turns: 1\n  parity_tokens: 0\n"), [], "12", "rollout.parity_tokens", "must be at least 1, got 0"),
    ("wrong-type-parity-tokens", BASE.replace("  max_turns: 1\n", "  max_turns: 1\n  parity_tokens: many\n"), [], "12", "rollout.parity_tokens", "expected a whole number, got 'many'"),
    ("cross-parity-window-one", BASE.replace("  max_turns: 1\n", "  max_turns: 1\n  parity_window: 1\n"), [], "12", "rollout.parity_window", "predicts no token to compare"),
    ("not-greater", BASE.replace("  max_turns: 1\n", "  max_turns: 1\n  top_p: 0\n"), [], "12", "rollout.top_p", "must be greater than 0.0"),
    ("bad-name-pattern", BASE.replace("name: t\n", "name: my run\n"), [], "1", "name", "must start with a letter or digit"),
    ("cross-kept-below-micro", BASE.replace("micro_batch: 4", "micro_batch: 32"), ["algorithm.mini_batches=1"], "15", "train.micro_batch", "fewer than one micro batch"),
    ("cross-micro-divides", BASE.replace("micro_batch: 4", "micro_batch: 3"), ["algorithm.mini_batches=1"], "15", "train.micro_batch", "16 is not a multiple of 3"),
    ("cross-world-divides", spec_with(deepspeed="procs_per_node: 3\n").replace("micro_batch: 4", "micro_batch: 1"), ["algorithm.mini_batches=1"], "15", "train.micro_batch", "16 is not a multiple of 3"),
    ("cross-mini-multiple", BASE.replace("  micro_batch: 4\n", "  micro_batch: 4\n  mini_batch: 6\n"), [], "16", "train.mini_batch", "not a multiple of micro_batch x world size = 4 x 1 = 4"),
    ("cross-mini-divides-kept", BASE.replace("  micro_batch: 4\n", "  micro_batch: 4\n  mini_batch: 12\n"), [], "16", "train.mini_batch", "do not split into mini batches of 12"),
    # the starpo-s preset's 4 mini batches: 16 kept / (3 x 1) does not divide; 16 / 4 = 4 rows do not split into 3s
    ("cross-mini-batches-divide", BASE, ["algorithm.mini_batches=3"], "--set algorithm.mini_batches=3", "algorithm.mini_batches", "16 is not a multiple of 3"),
    ("cross-mini-batches-micro", BASE.replace("micro_batch: 4", "micro_batch: 3"), [], "15", "train.micro_batch", "4 rows per process (16 kept / 4 mini batches / 1 process(es)) do not split into micro batches of 3"),
    ("cross-context", BASE.replace("max_turns: 1", "max_turns: 5"), [], "12", "rollout.max_tokens_per_turn", "5 turns x 128 tokens + 512 prompt allowance = 1152 tokens, more than model.max_context 1024"),
    ("cross-fade-needs-example", BASE.replace("  max_turns: 1\n", "  max_turns: 1\n  answer_example_steps: 5\n"), [], "12", "rollout.answer_example_steps", "rollout.answer_example is none: set it to first or random"),
    ("cross-bi-level-needs-turn-rewards", spec_with(algorithm="bi_level_gae: true\n"), [], "17", "algorithm.bi_level_gae", "needs algorithm.turn_rewards: true"),
    ("cross-bi-level-needs-gae", spec_with(algorithm="bi_level_gae: true\nturn_rewards: true\nadv_estimator: grpo\n"), [], "17", "algorithm.bi_level_gae", "needs adv_estimator 'gae'"),
    ("cross-turn-rewards-reinforce", spec_with(algorithm="turn_rewards: true\nadv_estimator: reinforce\n"), [], "17", "algorithm.turn_rewards", "not implemented for adv_estimator 'reinforce'"),
    ("cross-offload-stage0", spec_with(deepspeed="offload: cpu\n"), [], "17", "deepspeed.offload", "needs zero_stage 1 or 2"),
    ("cross-zero3-refused", spec_with(deepspeed="zero_stage: 3\n"), [], "17", "deepspeed.zero_stage", "ZeRO-3 is not supported yet"),
    ("cross-fp16-cpu", spec_with(deepspeed="device: cpu\nprecision: fp16\n"), [], "18", "deepspeed.precision", "fp16 does not train on CPU"),
    ("cross-nodes-need-hostfile", spec_with(deepspeed="nodes: 2\n").replace("micro_batch: 4", "micro_batch: 2"), [], "17", "deepspeed.nodes", "2 nodes need deepspeed.hostfile"),
    ("cross-hostfile-missing", spec_with(deepspeed="hostfile: no/such/hostfile\n"), [], "17", "deepspeed.hostfile", "no such file: no/such/hostfile"),
    ("cross-warmup", BASE.replace("  steps: 4\n", "  steps: 4\n  warmup_steps: 17\n"), [], "15", "train.warmup_steps", "only 16 optimizer steps (4 steps x 4 per step)"),
    ("cross-unknown-env", BASE.replace("name: bandit", "name: bandt"), [], "7", "env.train.name", "unknown env 'bandt'"),
    ("cross-env-config", BASE.replace("    name: bandit\n", "    name: bandit\n    config: {arm_count: 3}\n"), [], "8", "env.train.config.arm_count", "unknown key 'arm_count'"),
    ("cross-val-env", BASE.replace("    group_size: 8\n", "    group_size: 8\n  val:\n    envs: [{name: nope:Nope}]\n"), [], "11", "env.val.envs[0].name", "cannot import module 'nope'"),
    ("cross-model-unknown", BASE.replace("name: tiny-random", "name: tiny-randm"), [], "3", "model.name", "did you mean 'tiny-random'?"),
    ("cross-model-dir-missing", BASE.replace("name: tiny-random", "name: ./no/such/model"), [], "3", "model.name", "no model directory at './no/such/model'"),
    ("set-no-equals", BASE, ["train.steps"], "--set train.steps", "", "expected KEY=VALUE"),
    ("set-unknown-key", BASE, ["train.stpes=3"], "--set train.stpes=3", "train.stpes", "did you mean 'steps'?"),
    ("set-wrong-type", BASE, ["train.steps=many"], "--set train.steps=many", "train.steps", "expected a whole number, got 'many'"),
    ("set-cross-field", BASE, ["algorithm.mini_batches=1", "train.micro_batch=5"], "--set train.micro_batch=5", "train.micro_batch", "16 is not a multiple of 5"),
    ("set-bad-yaml", BASE, ["train.steps=[1"], "--set train.steps=[1", "train.steps", "cannot read the value"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_spec_is_reported_with_position(case, tmp_path: Path, monkeypatch):
    name, text, sets, where, key, fragment = case
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text(text)
    args = ["validate", "bad.yaml"] + [x for s in sets for x in ("--set", s)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    out = result.stderr
    expected_where = where if where.startswith("--set") else f"bad.yaml:{where}:"
    line = next((ln for ln in out.splitlines() if expected_where in ln and fragment in ln), None)
    assert line is not None, f"no line with {expected_where!r} and {fragment!r} in:\n{out}"
    if key:
        assert f": {key}: " in line


def test_cases_are_distinct_and_enough():
    assert len({c[0] for c in CASES}) == len(CASES) >= 30


def test_all_problems_reported_at_once(tmp_path: Path, monkeypatch):
    """Three schema errors in one file: all three are listed, in file order. Columns are 1-based:
    `    groups: x` -> value at column 13; `  stepz: 4` -> key at column 3;
    `deepspeed: {zero_stage: 9}` -> value at column 25."""
    monkeypatch.chdir(tmp_path)
    text = BASE.replace("groups: 8", "groups: x").replace("steps: 4", "stepz: 4") + "deepspeed: {zero_stage: 9}\n"
    Path("bad.yaml").write_text(text)
    result = CliRunner().invoke(app, ["validate", "bad.yaml"])
    assert result.exit_code == 2
    lines = [ln.strip() for ln in result.stderr.splitlines()[1:]]
    assert result.stderr.startswith("ragen validate: 3 problems in the run spec:")
    assert [ln.split(": ")[0] for ln in lines] == ["bad.yaml:8:13", "bad.yaml:14:3", "bad.yaml:16:25"]


def test_missing_file_exit_2(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "nope.yaml"])
    assert result.exit_code == 2
    assert "nope.yaml: no such file" in result.stderr


@pytest.mark.parametrize("hostfile,fragment", [
    ("node-0 slots=8\n", "lists 1 host(s), fewer than deepspeed.nodes = 2"),
    ("node-0 slots=8\nnode-1 gpus=8\n", "bad line 'node-1 gpus=8' (expected `hostname slots=N`)"),
])
def test_bad_hostfile(hostfile: str, fragment: str, tmp_path: Path, monkeypatch):
    """2 nodes x 1 process, micro 2: kept 16 splits as 16 / (2 x 2) = 4, so only the hostfile is wrong."""
    monkeypatch.chdir(tmp_path)
    Path("hosts").write_text("# two GPU machines\n" + hostfile)
    Path("bad.yaml").write_text(spec_with(deepspeed="nodes: 2\nhostfile: hosts\n").replace("micro_batch: 4", "micro_batch: 2"))
    result = CliRunner().invoke(app, ["validate", "bad.yaml"])
    assert result.exit_code == 2
    assert "bad.yaml:18:13: deepspeed.hostfile: " in result.stderr and fragment in result.stderr


def test_logger_needs_its_package(tmp_path: Path, monkeypatch):
    """A logger whose package is missing is an error at its list position; the check looks the
    package up with importlib (patched here to a name that cannot exist)."""
    from ragen_cli.spec import checks

    monkeypatch.setitem(checks.LOGGER_PACKAGES, "wandb", "ragen_no_such_package_xyz")
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text(spec_with(monitor="loggers: [jsonl, wandb]\n"))
    result = CliRunner().invoke(app, ["validate", "bad.yaml"])
    assert result.exit_code == 2
    # "  loggers: [jsonl, wandb]": 12 characters before jsonl, 7 more before wandb -> column 20
    assert "bad.yaml:17:20: monitor.loggers[1]: logger 'wandb' needs the 'ragen_no_such_package_xyz' package" in result.stderr
