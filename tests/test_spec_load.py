"""Loading: schema round trip, presets vs user values (provenance), --set overrides, positions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.spec.errors import SpecError, join_path, split_path, suggest
from ragen_cli.spec.loader import load, load_spec
from ragen_cli.spec.models import RunSpec
from ragen_cli.spec.yamlpos import load_located

MINIMAL = """\
name: t
model: {name: tiny-random, max_context: 1024}
env:
  train: {name: bandit, groups: 8, group_size: 8}
rollout: {max_turns: 1, max_tokens_per_turn: 128}
train: {micro_batch: 4, steps: 4}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_schema_round_trip(tmp_path: Path):
    """dump -> YAML -> load gives an equal spec, and the JSON Schema names every section."""
    spec = load_spec(write(tmp_path, MINIMAL))
    again = load_spec(write(tmp_path, yaml.safe_dump(spec.model_dump(mode="json"))))
    assert again == spec
    schema = RunSpec.model_json_schema()
    assert set(schema["properties"]) == set(RunSpec.model_fields)
    assert schema["required"] == ["name", "env"]
    assert RunSpec.model_validate_json(spec.model_dump_json()) == spec


def test_validate_schema_flag_prints_json_schema():
    result = CliRunner().invoke(app, ["validate", "--schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "RunSpec"
    assert "clip_high" in schema["$defs"]["AlgorithmSpec"]["properties"]


def test_validate_ok_summary(tmp_path: Path):
    result = CliRunner().invoke(app, ["validate", str(write(tmp_path, MINIMAL))])
    assert result.exit_code == 0, result.output
    # kept: floor(0.25 x 8) = 2 groups x 8 = 16
    assert "8x8 trajectories per step (16 kept)" in result.stdout


def test_default_preset_is_starpo_s(tmp_path: Path):
    loaded = load(write(tmp_path, MINIMAL))
    a = loaded.spec.algorithm
    assert (a.preset, a.adv_estimator, a.clip_low, a.clip_high, a.kl_coef) == ("starpo-s", "gae", 0.2, 0.28, 0.0)
    assert (a.filter.keep_ratio, a.filter.direction, a.filter.metric) == (0.25, "top", "reward_std")
    assert loaded.provenance["clip_high"] == "preset"
    assert loaded.provenance["gamma"] == "default"
    assert loaded.provenance["preset"] == "default"


def test_starpo_preset_and_user_override(tmp_path: Path):
    """preset starpo sets KL 0.001, clip 0.2/0.2, keep 1.0; the user's clip_high and the
    --set kl_coef win over it; untouched preset fields keep the preset's value."""
    text = MINIMAL + "algorithm:\n  preset: starpo\n  clip_high: 0.25\n"
    loaded = load(write(tmp_path, text), ["algorithm.kl_coef=0.01"])
    a = loaded.spec.algorithm
    assert (a.clip_low, a.clip_high, a.kl_coef, a.filter.keep_ratio) == (0.2, 0.25, 0.01, 1.0)
    p = loaded.provenance
    assert (p["preset"], p["clip_low"], p["clip_high"], p["kl_coef"], p["filter.keep_ratio"]) == (
        "user", "preset", "user", "--set", "preset")
    assert p["entropy_coef"] == "default"


def test_preset_null_uses_field_defaults(tmp_path: Path):
    loaded = load(write(tmp_path, MINIMAL + "algorithm: {preset: null, kl_coef: 0.002}\n"))
    assert loaded.spec.algorithm.preset is None
    assert loaded.provenance["clip_high"] == "default" and loaded.provenance["kl_coef"] == "user"


def test_user_nested_filter_overrides_only_that_key(tmp_path: Path):
    loaded = load(write(tmp_path, MINIMAL + "algorithm:\n  preset: starpo\n  filter: {direction: bottom}\n"))
    f = loaded.spec.algorithm.filter
    assert (f.keep_ratio, f.direction) == (1.0, "bottom")
    assert loaded.provenance["filter.direction"] == "user"
    assert loaded.provenance["filter.keep_ratio"] == "preset"


def test_set_overrides_parse_yaml_scalars_and_create_sections(tmp_path: Path):
    spec = load_spec(write(tmp_path, MINIMAL), [
        "train.steps=7", "rollout.think=false", "train.lr_actor=1e-5", "model.lora.rank=4",
        "env.val.envs=[{name: bandit-test}]", "env.train.config.high_arm_prob=0.5",
    ])
    assert spec.train.steps == 7 and spec.rollout.think is False and spec.train.lr_actor == 1e-5
    assert spec.model.lora is not None and spec.model.lora.rank == 4
    assert [e.name for e in spec.env.val.envs] == ["bandit-test"]
    assert spec.env.train.config == {"high_arm_prob": 0.5}


def test_later_set_wins(tmp_path: Path):
    assert load_spec(write(tmp_path, MINIMAL), ["train.steps=2", "train.steps=3"]).train.steps == 3


def test_set_inside_scalar_is_an_error(tmp_path: Path):
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, MINIMAL), ["train.steps.x=1"])
    assert str(err.value.problems[0]) == (
        "--set train.steps.x=1: train.steps: cannot set a key inside a value that is not a mapping")


def test_positions_are_one_based_key_and_value():
    located, problems = load_located("a:\n  b: 1\n  c: [x, y]\n", "f.yaml")
    assert not problems
    assert located.keys[("a", "b")] == (2, 3)
    assert located.values[("a", "b")] == (2, 6)
    assert located.keys[("a", "c", 1)] == (3, 10)
    assert located.where(("a", "zz")) == "f.yaml:1:1"  # unknown sub-key: falls back to its parent
    assert located.where(("a", "b"), at_value=True) == "f.yaml:2:6"


def test_yaml_keeps_anchor_values():
    located, problems = load_located("x: &v 3\ny: *v\n", "f.yaml")
    assert not problems and located.data == {"x": 3, "y": 3}


def test_suggest_and_paths():
    assert suggest("clip_hgh", ["clip_high", "clip_low"]) == "; did you mean 'clip_high'?"
    assert suggest("zzz", ["every", "keep"]) == "; valid keys: every, keep"
    assert join_path(("env", "val", "envs", 0, "name")) == "env.val.envs[0].name"
    assert split_path("env.val.envs[0].name") == ("env", "val", "envs", 0, "name")


def test_validate_says_which_algorithm_values_won(tmp_path: Path):
    path = write(tmp_path, MINIMAL + "algorithm: {preset: starpo, clip_high: 0.25}\n")
    result = CliRunner().invoke(app, ["validate", str(path), "--set", "algorithm.kl_coef=0.01"])
    assert result.exit_code == 0, result.output
    line = result.stdout.splitlines()[1]
    assert line == (
        'algorithm from preset starpo: adv_estimator="gae", clip_low=0.2, kl_estimator="low_var_kl", '
        'filter.metric="reward_std", filter.keep_ratio=1.0, filter.direction="top", mini_batches=4; '
        "from the spec: clip_high=0.25; from --set: kl_coef=0.01"
    )


def test_loading_and_compiling_import_no_heavy_modules(tmp_path: Path):
    """Validation and compilation stay light: no torch, vllm, deepspeed, transformers."""
    import subprocess
    import sys

    path = write(tmp_path, MINIMAL)
    code = (
        "import sys; from ragen_cli.spec.loader import load_spec; from ragen_cli.compile.plan import compile_plan;"
        f"compile_plan(load_spec({str(path)!r}), device='cpu', cpu_count=2);"
        "print(sorted(m for m in ('torch', 'vllm', 'deepspeed', 'transformers', 'textual') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_exponent_floats_are_numbers_everywhere(tmp_path: Path):
    """PyYAML (YAML 1.1) reads `1e-3` as text; specs read it as a number, also inside env config
    (which no model types) and in --set values."""
    located, _ = load_located("a: 1e-6\nb: 2E+2\nc: 12\nd: e5\n", "f.yaml")
    assert located.data == {"a": 1e-6, "b": 200.0, "c": 12, "d": "e5"}
    spec = load_spec(write(tmp_path, MINIMAL.replace("group_size: 8}", "group_size: 8, config: {high_arm_prob: 5e-1}}")),
                     ["train.lr_actor=3e-4"])
    assert spec.env.train.config == {"high_arm_prob": 0.5} and spec.train.lr_actor == 3e-4


def test_set_whole_algorithm_section_counts_as_set(tmp_path: Path):
    loaded = load(write(tmp_path, MINIMAL), ["algorithm={clip_high: 0.3, filter: {keep_ratio: 0.5}}"])
    assert loaded.spec.algorithm.clip_high == 0.3 and loaded.spec.algorithm.filter.keep_ratio == 0.5
    assert loaded.provenance["clip_high"] == "--set" and loaded.provenance["filter.keep_ratio"] == "--set"
    assert loaded.provenance["clip_low"] == "preset"


def test_k1_as_a_kl_loss_is_refused_and_the_starpo_preset_uses_low_var_kl(tmp_path):
    from ragen_cli.spec.errors import SpecError

    loaded = load(write(tmp_path, MINIMAL + "algorithm: {preset: starpo}\n"))
    assert (loaded.spec.algorithm.kl_coef, loaded.spec.algorithm.kl_estimator) == (0.001, "low_var_kl")
    with pytest.raises(SpecError, match="k1 used as a loss has zero expected gradient"):
        load(write(tmp_path, MINIMAL + "algorithm: {preset: starpo, kl_estimator: k1}\n"))
    assert load(write(tmp_path, MINIMAL + "algorithm: {kl_estimator: k1}\n")).spec.algorithm.kl_coef == 0.0  # no KL: fine
