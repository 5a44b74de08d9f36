"""Chat templates of other model families (issue 35, section 1): fixtures in the style of
Qwen2.5, Qwen3, Llama 3 and Gemma (tests/fixtures/chat_templates/), applied to the built-in
tokenizer through `model.chat_template`. A template that re-renders history (Qwen3 drops the
reasoning of earlier replies) trains one row per turn on exactly the prompt it was sampled from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_cli.compile.template import RERENDERS, STABLE

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "chat_templates"


def tokenizer(template: str | None, **kwargs):
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.spec.models import ModelSpec

    chat = str(FIXTURES / f"{template}.jinja") if template else None
    return load_tokenizer(resolve_model("tiny-random"), ModelSpec(chat_template=chat, chat_template_kwargs=kwargs))


@pytest.mark.parametrize("template,stable,system,eot", [
    (None, True, True, "<|im_end|>"),  # the built-in tokenizer's own ChatML
    ("qwen2_5", True, True, "<|im_end|>"),
    ("qwen3", False, True, "<|im_end|>"),
    ("llama3", True, True, "<|eot_id|>"),
    ("gemma", True, False, "<end_of_turn>\n"),  # raises on a system message
])
def test_what_the_probe_finds_in_each_family(template, stable, system, eot):
    from ragen_cli.rollout.context import ChatFormat

    for think in (True, False):
        fmt = ChatFormat(tokenizer(template), think)
        assert (fmt.prefix_stable, fmt.system_role, fmt.eot_text) == (stable, system, eot)


def test_gemma_gets_the_system_prompt_at_the_start_of_the_first_user_message():
    from ragen_cli.rollout.context import ChatFormat
    from ragen_cli.rollout.prompts import SYSTEM_PROMPT

    fmt = ChatFormat(tokenizer("gemma"), think=False)
    text = fmt.tokenizer.decode(fmt.first_prompt(SYSTEM_PROMPT, "Pick an arm."))
    assert text.endswith("<start_of_turn>user\nYou're a helpful assistant. Pick an arm.<end_of_turn>\n"
                         "<start_of_turn>model\n<answer>")


def qwen3_turn_two(think: bool, **kwargs):
    """An episode's turn-2 sampler prompt and layout piece under the Qwen3 fixture, after a reply
    that reasons: (decoded prompt, decoded layout piece, ChatFormat)."""
    from ragen_cli.rollout.context import ChatFormat, EpisodeContext

    tok = tokenizer("qwen3", **kwargs)
    fmt = ChatFormat(tok, think)
    ctx = EpisodeContext(fmt, "Find the goal.", "||", 2)
    ctx.commit_prompt("Turn 1: where?", None, ctx.next_prompt_ids("Turn 1: where?", None))
    assert ctx.window_prompt(None) is None  # turn 1: the layout is the sampler's prompt
    reply = " go down first </think> <answer> Down </answer>" if think else " Down </answer>"
    ctx.commit_reply(tok.encode(reply), reply)
    piece = ctx.next_prompt_ids("Turn 2: now?", -0.1)
    ctx.commit_prompt("Turn 2: now?", -0.1, piece)
    return tok.decode(ctx.window_prompt(None)), tok.decode(piece), fmt


def test_qwen3_drops_the_reasoning_of_earlier_turns_from_the_sampler_prompt():
    prompt, piece, fmt = qwen3_turn_two(think=True)
    expected = ("<|im_start|>system\nYou're a helpful assistant. <|im_end|>\n<|im_start|>user\nFind the goal.\n"
                'You can take up to 2 actions per turn, separated by the action separator "||".\nTurn 1: where?<|im_end|>\n'
                "<|im_start|>assistant\n <answer> Down </answer><|im_end|>\n"  # "<think> go down first </think>" is gone
                "<|im_start|>user\nReward:\n-0.1\n\nTurn 2: now?<|im_end|>\n<|im_start|>assistant\n<think>")
    assert prompt == expected
    # the layout keeps the episode's turns in order in ChatML's plain shape
    assert piece == "\n<|im_start|>user\nReward:\n-0.1\n\nTurn 2: now?<|im_end|>\n<|im_start|>assistant\n<think>"


def test_chat_template_kwargs_reach_the_template():
    prompt, _, fmt = qwen3_turn_two(think=False, enable_thinking=False)
    assert fmt.kwargs == {"enable_thinking": False}
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n<answer>")
    assert "<|im_start|>assistant\n<answer> Down </answer><|im_end|>" in prompt


def write_spec(tmp_path: Path, template: str | None, extra: str = "") -> Path:
    path = tmp_path / "spec.yaml"
    chat = f"chat_template: {FIXTURES / (template + '.jinja')}, " if template else ""
    path.write_text(f"name: t\nmodel: {{name: tiny-random, {chat}max_context: 2048}}\n"
                    f"env: {{train: {{name: frozenlake}}, val: {{every: 0}}}}\nrollout: {{max_turns: 2}}\n{extra}",
                    encoding="utf-8")
    return path


def test_the_plan_trains_per_turn_rows_when_the_template_rerenders(tmp_path):
    from ragen_cli.compile.plan import compile_plan
    from ragen_cli.spec.loader import load_spec

    for template, rows, why in ((None, False, STABLE), ("qwen2_5", False, STABLE), ("qwen3", True, RERENDERS),
                                ("llama3", False, STABLE), ("gemma", False, STABLE)):
        spec = load_spec(write_spec(tmp_path, template))
        plan = compile_plan(spec, device="cpu")
        assert (plan.turn_rows, plan.template) == (rows, why), template
        assert spec.model.chat_template is None or spec.model.chat_template.startswith("{#-")  # the file's text


def test_chat_template_and_tags_fields_refuse_bad_values(tmp_path):
    from ragen_cli.spec.errors import SpecError
    from ragen_cli.spec.loader import load_spec

    path = write_spec(tmp_path, None)
    for bad, where in ((["model.chat_template=no/such/template.jinja"], "model.chat_template"),
                       (["rollout.think_tags=[<r>, <r>]"], "rollout.think_tags"),
                       (["rollout.answer_tags=['', </a>]"], "rollout.answer_tags")):
        with pytest.raises(SpecError) as err:
            load_spec(path, bad)
        assert where in str(err.value)
    inline = load_spec(path, ["model.chat_template='{{ messages[0].content }}'"])  # YAML: quoted, or a flow mapping
    assert inline.model.chat_template == "{{ messages[0].content }}"


def test_reply_tags_of_a_model_drive_the_format_line_prefill_and_parsing():
    from ragen_cli.rollout.prompts import prefill, reply_format, turn_text
    from ragen_cli.rollout.driver import answer_start
    from ragen_cli.rollout.parse import ReplyTags, parse_reply

    tags = ReplyTags(think=("<reasoning>", "</reasoning>"), answer=("<move>", "</move>"))
    assert reply_format(True, tags) == "<reasoning> [Your thoughts] </reasoning> <move> [your answer] </move>"
    assert prefill(True, tags) == "<reasoning>" and prefill(False, tags) == "<move>"
    assert "<move> Left || Up </move>" in turn_text(1, "grid", 3, False, 8, "Left || Up", tags)
    parsed = parse_reply("<reasoning>hole ahead</reasoning>\n<move>Left || Up</move>", True, "||", 3, tags)
    assert (parsed.actions, parsed.think) == (["Left", "Up"], "hole ahead")
    assert not parse_reply("<think>x</think><answer>Left</answer>", True, "||", 3, tags).format_ok
    assert parse_reply("<move>Down", False, "||", 3, tags).actions == ["Down"]
    assert answer_start(["a", "</reason", "ing>", "<move>"], True, "</reasoning>") == 3


@pytest.mark.slow
def test_each_family_rolls_out_and_trains_token_exact(tmp_path):
    """tests/chat_template_run.py: per family a 2-turn FrozenLake rollout (HF backend, fp32), the
    update batch the loop builds, and one DeepSpeed update: the trainer's log-prob of every trained
    token equals the sampler's (fp32: within 1e-5), and the +1 rows rise while the -1 rows fall."""
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "chat_template_run.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "RAGEN_CPU_BF16": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = {c["case"]: c for c in map(json.loads, (line for line in proc.stdout.splitlines() if line.startswith("{")))}
    assert set(cases) == {"qwen2_5", "qwen3", "qwen3-no-thinking", "llama3", "gemma"}
    for name, c in cases.items():
        rerenders = name.startswith("qwen3")
        assert c["turn_rows"] == rerenders, name
        assert c["rows"] == c["episodes"] * (2 if rerenders else 1), name  # 2 turns each: a row per turn
        assert c["turns"] == [2, 2, 2, 2] and c["trained_tokens"] > 0, name
        assert c["max_logprob_gap"] <= 1e-5, name
        assert c["finite"] and c["logp_change_pos"] > 0 > c["logp_change_neg"], name
    assert cases["qwen3-no-thinking"]["first_prompt"].endswith("<think>\n\n</think>\n\n<answer>")
    assert cases["qwen3"]["turn2_prompt"].startswith(cases["qwen3"]["first_prompt"].removesuffix("<think>"))


@pytest.mark.slow
def test_ragen_train_says_and_does_per_turn_rows_for_a_qwen3_template(tmp_path):
    spec = write_spec(tmp_path, "qwen3", "algorithm: {adv_estimator: gae, mini_batches: 1}\ndeepspeed: {precision: fp32}\n")
    sets = ["--set", f"output.dir={tmp_path}", "--set", "rollout.backend=hf", "--set", "env.train.groups=2",
            "--set", "env.train.group_size=2", "--set", "train.steps=1", "--set", "rollout.max_tokens_per_turn=6",
            "--set", "train.micro_batch=2", "--set", "checkpoint.every=1"]
    dry = subprocess.run([sys.executable, "-m", "ragen_cli.cli", "train", str(spec), "--dry-run", *sets],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "chat template: re-renders earlier turns" in dry.stdout
    run = subprocess.run([sys.executable, "-m", "ragen_cli.cli", "train", str(spec), *sets],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rundir = tmp_path / "t"
    assert json.loads((rundir / "plan.json").read_text())["turn_rows"] is True
    assert (rundir / "checkpoints" / "step-1").is_dir()
    steps = [json.loads(line) for line in (rundir / "metrics.jsonl").read_text().splitlines()]
    assert any(s.get("step") == 1 and "critic/value_loss" in s for s in steps)
