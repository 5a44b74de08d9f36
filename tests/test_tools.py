"""Tool-calling envs with Python-function tools (docs/tools.md): schemas from type hints and
docstrings, the two call formats with their malformed calls, each tool template fixture's
rendering (tests/fixtures/chat_templates/*_tools.jinja), tool errors and timeouts, the metrics, and
token-exact training rows: the trainer's log-prob of every trained token equals the sampler's."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "chat_templates"

TOOLS = '''
import time


def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def broken(text: str) -> str:
    """Always raises.

    Args:
        text: Anything.
    """
    raise KeyError(text)


def slow(seconds: float) -> str:
    """Sleeps.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "done"


def undocumented(a: int) -> int:
    return a
'''
REWARDS = '''
def correct(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
'''
ROWS = [{"prompt": "What is 3 * 4?", "answer": "12"}, {"prompt": "What is 5 * 6?", "answer": "30"}]
# transformers' get_json_schema(multiply), written out by hand from the signature and docstring
MULTIPLY = {"type": "function", "function": {
    "name": "multiply", "description": "Multiply two whole numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer", "description": "The first factor."},
                                                    "b": {"type": "integer", "description": "The second factor."}},
                   "required": ["a", "b"]},
    "return": {"type": "integer"}}}


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "my_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "my_rewards.py").write_text(REWARDS, encoding="utf-8")
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("my_tools", "my_rewards"):  # another test's modules of the same name must not answer
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def config(**kw):
    return {"path": "data.jsonl", "rewards": ["my_rewards:correct"], "shuffle": False,
            "tools": ["my_tools:multiply", "my_tools:broken", "my_tools:slow"], "timeout_s": 0.5, **kw}


# ----------------------------------------------------------------- schemas and spec errors
def test_schema_comes_from_type_hints_and_docstring(project):
    from ragen_cli.envs.tools.functions import load_py_tool

    assert load_py_tool("my_tools:multiply").schema == MULTIPLY


def test_bad_configs_are_spec_errors_naming_the_problem(project):
    from ragen_cli.envs.registry import check_env

    assert check_env("tools", config()) == []
    cases = [({"tools": ["my_tools:undocumented"]}, "tool 'my_tools:undocumented': no JSON schema"),
             ({"tools": ["my_tools:nothing"]}, "module 'my_tools' has no attribute 'nothing'"),
             ({"tools": [], "mcp_servers": []}, "tools or mcp_servers is required"),
             ({"parser": "xml"}, "parser must be one of hermes, llama3, got 'xml'"),
             ({"mcp_servers": ["no-such-program --flag"]}, "program 'no-such-program' not found"),
             ({"mcp_servers": ["http:///mcp"]}, "MCP server URL 'http:///mcp' has no host"),
             ({"feedback": "my_rewards:correct"}, "feedback is the dataset adapter's"),
             ({"timeout_s": 0}, "must be positive"),
             ({"prompt_field": "question"}, "no column 'question'")]
    for change, message in cases:
        problems = check_env("tools", config(**change))
        assert len(problems) == 1 and message in problems[0], (change, problems)


# ----------------------------------------------------------------- the two formats
def test_hermes_calls_and_malformed_calls():
    from ragen_cli.envs.tools.formats import Call, ToolCallError, parse_calls

    one = '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>'
    assert parse_calls(one, "hermes") == [Call("multiply", {"a": 3, "b": 4})]
    two = 'Let me see. ' + one + '\n<tool_call>{"name": "lookup", "arguments": {"key": "plum"}}</tool_call>'
    assert parse_calls(two, "hermes") == [Call("multiply", {"a": 3, "b": 4}), Call("lookup", {"key": "plum"})]
    # a last call left open at the end of the reply counts (vLLM's hermes parser does the same)
    assert parse_calls('<tool_call>{"name": "f", "arguments": {}}', "hermes") == [Call("f", {})]
    # arguments given as a JSON string (OpenAI's wire form), and none at all
    assert parse_calls('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>', "hermes") == [Call("f", {"x": 1})]
    assert parse_calls('<tool_call>{"name": "f"}</tool_call>', "hermes") == [Call("f", {})]
    assert parse_calls("12", "hermes") == [] and parse_calls("", "hermes") == []
    bad = [('<tool_call>{"name": "f", "arguments": {"a": 3,}}</tool_call>', "tool call 1 is not valid JSON"),
           ('<tool_call>{"arguments": {}}</tool_call>', 'tool call 1 has no "name"'),
           ('<tool_call>["f"]</tool_call>', "tool call 1 is not a JSON object"),
           ('<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>', 'the "arguments" of tool call 1 is not a JSON object'),
           ('<tool_call>{"name": "f", "arguments": "x = 1"}</tool_call>', 'is a string that is not a JSON object'),
           (one + '<tool_call>{"name": 7}</tool_call>', 'tool call 2 has no "name"'),
           ('{"name": "f"}</tool_call>', "</tool_call> without <tool_call>"),
           ('<tool_call>__import__("os").system("x")</tool_call>', "tool call 1 is not valid JSON")]
    for text, message in bad:
        with pytest.raises(ToolCallError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            parse_calls(text, "hermes")


def test_llama3_calls_and_malformed_calls():
    from ragen_cli.envs.tools.formats import Call, ToolCallError, parse_calls

    assert parse_calls('{"name": "multiply", "parameters": {"a": 3, "b": 4}}', "llama3") == [Call("multiply", {"a": 3, "b": 4})]
    assert parse_calls('<|python_tag|>{"name": "f", "arguments": {"x": 1}}', "llama3") == [Call("f", {"x": 1})]
    assert parse_calls('{"name": "f", "parameters": {}}; {"name": "g", "parameters": {"y": 2}}', "llama3") == \
        [Call("f", {}), Call("g", {"y": 2})]
    assert parse_calls("The answer is 12.", "llama3") == []
    assert parse_calls("12", "llama3") == []
    for text, message in [('{"name": "f", "parameters": {', "tool call 1 is not valid JSON"),
                          ('{"parameters": {}}', 'tool call 1 has no "name"'),
                          ('{"name": "f", "parameters": 3}', 'the "parameters" of tool call 1 is not a JSON object'),
                          ('{"name": "f", "parameters": {}} and then', "calls are separated by ';'")]:
        with pytest.raises(ToolCallError, match=message):
            parse_calls(text, "llama3")


# ----------------------------------------------------------------- an episode with Python tools
def test_an_episode_calls_tools_counts_errors_and_scores_the_final_answer(project):
    from ragen_cli.envs.registry import make_env

    env = make_env("tools", config())
    obs, info = env.reset(seed=0)
    assert obs == "What is 3 * 4?" and env.chat_messages() == [{"role": "user", "content": "What is 3 * 4?"}]
    assert env.tool_schemas()[0] == MULTIPLY and [s["function"]["name"] for s in env.tool_schemas()] == ["multiply", "broken", "slow"]
    # two calls in one reply: both run, one result message each
    obs, reward, term, trunc, info = env.step('<tool_call>{"name": "multiply", "arguments": {"a": 3, "b": 4}}</tool_call>'
                                              '<tool_call>{"name": "broken", "arguments": {"text": "k"}}</tool_call>')
    assert (reward, term, trunc, info["action_is_valid"]) == (0.0, False, False, True)
    assert env.chat_messages() == [{"role": "tool", "name": "multiply", "content": "12"},
                                   {"role": "tool", "name": "broken", "content": "Error: broken raised KeyError: 'k'"}]
    # the step's calls as the rollout records them in the turn (`TurnRecord.tool_calls`)
    assert info["tool_calls"] == [
        {"name": "multiply", "arguments": {"a": 3, "b": 4}, "result": "12", "status": "ok"},
        {"name": "broken", "arguments": {"text": "k"}, "result": "Error: broken raised KeyError: 'k'", "status": "error"}]
    # a timeout is an error result; the episode goes on
    env.step('<tool_call>{"name": "slow", "arguments": {"seconds": 5}}</tool_call>')
    assert env.chat_messages() == [{"role": "tool", "name": "slow", "content": "Error: slow timed out after 0.5 s"}]
    assert info["tool_stats"] == {"calls": 2, "invalid": 0, "errors": 1, "per_tool": {"multiply": 1, "broken": 1}}
    # the final answer: scored by the reward function, the episode ends
    obs, reward, term, trunc, info = env.step(" 12 ")
    assert (reward, term, info["success"], info["reward_fns"]) == (1.0, True, True, {"correct": 1.0})
    assert info["tool_stats"] == {"calls": 3, "invalid": 0, "errors": 2, "per_tool": {"multiply": 1, "broken": 1, "slow": 1}}


def test_invalid_calls_are_not_run_and_the_budget_ends_an_episode_without_an_answer(project):
    from ragen_cli.envs.registry import make_env

    env = make_env("tools", config(max_actions=3))
    env.reset(seed=1)
    for text, error in [('<tool_call>{"name": "divide", "arguments": {}}</tool_call>',
                         "Error: there is no tool named 'divide'; the tools are multiply, broken, slow"),
                        ('<tool_call>{"name": "multiply", "arguments": {"a": "5", "b": 6}}</tool_call>',
                         "Error: arguments of multiply (a): '5' is not of type 'integer'"),
                        ('<tool_call>{"name": "multiply", "arguments": {"a": 5, "b": 6}</tool_call>',
                         "Error: tool call 1 is not valid JSON")]:
        obs, reward, term, trunc, info = env.step(text)
        assert env.chat_messages()[0]["role"] == "tool" and env.chat_messages()[0]["content"].startswith(error)
        assert info["action_is_valid"] is False and reward == 0.0
        [invalid] = info["tool_calls"]
        assert invalid["status"] == "invalid" and invalid["name"] is None and invalid["result"].startswith(error)
    assert (term, trunc, info["success"]) == (False, True, False)  # 3 replies, no answer: reward 0
    assert info["tool_stats"] == {"calls": 0, "invalid": 3, "errors": 0, "per_tool": {}}


def test_metrics_of_a_step_from_the_episodes_stats():
    from ragen_cli.monitor.metrics import validate_metrics
    from ragen_cli.rollout.types import Trajectory
    from ragen_cli.rollout.tool_chat import tool_metrics

    stats = [{"calls": 3, "invalid": 1, "errors": 1, "per_tool": {"multiply": 2, "lookup": 1}},
             {"calls": 1, "invalid": 0, "errors": 0, "per_tool": {"multiply": 1}}]
    trajs = [Trajectory(info={"tool_stats": s}) for s in stats] + [Trajectory(info={})]
    got = tool_metrics(trajs)
    # calls 4 over 2 tool episodes; invalid 1 of 4 + 1 attempts; errors 1 of 4 calls run; per tool 3/2 and 1/2
    assert got == {"episode/tool_calls": 2.0, "episode/invalid_call_ratio": 0.2, "episode/tool_error_ratio": 0.25,
                   "episode/tool_calls/multiply": 1.5, "episode/tool_calls/lookup": 0.5}
    assert validate_metrics(got) == [] and tool_metrics([Trajectory()]) == {}


# ----------------------------------------------------------------- the templates
def tokenizer(template: str | None, **kwargs):
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.spec.models import ModelSpec

    chat = str(FIXTURES / f"{template}.jinja") if template else None
    return load_tokenizer(resolve_model("tiny-random"), ModelSpec(chat_template=chat, chat_template_kwargs=kwargs))


QWEN_TOOLS = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
              "with function signatures within <tools></tools> XML tags:\n<tools>\n" + json.dumps(MULTIPLY) +
              "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
              '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
              "</tool_call>")


def first_and_second(template, parser, call, think=False, **kwargs):
    """Turn 1's prompt and the turn-2 piece after a call, decoded, under one template."""
    from ragen_cli.rollout.tool_chat import ToolChatFormat, ToolEpisodeContext

    class Env:  # the two calls a tool env answers (envs/adapters/tools_env.py), for one fixed exchange
        def __init__(self):
            self.messages = [{"role": "user", "content": "What is 3 * 4?"}]

        def instruction(self):
            return "Answer."

        def chat_messages(self):
            return self.messages

    tok = tokenizer(template, **kwargs)
    fmt = ToolChatFormat(tok, think, [MULTIPLY], parser)
    env = Env()
    ctx = ToolEpisodeContext(fmt, env)
    first = ctx.next_prompt_ids("", None)
    ctx.commit_prompt("", None, first)
    ctx.commit_reply(tok.encode(call), call)  # a reply that ends without its end-of-turn token: closed by the template
    env.messages = [{"role": "tool", "name": "multiply", "content": "12"}]
    second = ctx.next_prompt_ids("", 0.0)
    return tok.decode(first), tok.decode(second), fmt


HERMES_CALL = '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>'


def test_qwen2_5_renders_the_tools_in_its_system_message_and_results_as_tool_responses():
    first, second, fmt = first_and_second("qwen2_5_tools", "hermes", HERMES_CALL)
    assert (fmt.native, fmt.prefix_stable, fmt.prefill) == (True, True, "")
    assert first == (f"<|im_start|>system\nAnswer.{QWEN_TOOLS}<|im_end|>\n<|im_start|>user\nWhat is 3 * 4?<|im_end|>\n"
                     "<|im_start|>assistant\n")
    # after the reply's end-of-turn token (sampled, or appended by the template): the result turn
    assert second == "\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def test_qwen3_renders_tools_and_keeps_reasoning_after_the_last_real_query():
    first, second, fmt = first_and_second("qwen3_tools", "hermes", " need 3*4 </think>\n" + HERMES_CALL, think=True)
    assert (fmt.native, fmt.prefix_stable, fmt.prefill) == (True, True, "<think>")
    assert first == (f"<|im_start|>system\nAnswer.\n\n{QWEN_TOOLS.lstrip()}<|im_end|>\n<|im_start|>user\nWhat is 3 * 4?"
                     "<|im_end|>\n<|im_start|>assistant\n<think>")
    assert second == ("\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n"
                      "<|im_start|>assistant\n<think>")
    # the plain probe (what the Plan reads) re-renders: the update trains one row per turn
    from ragen_cli.rollout.context import ChatFormat

    assert ChatFormat(tokenizer("qwen3_tools"), True).prefix_stable is False


def test_llama3_puts_the_tools_in_the_first_user_message_and_results_in_ipython_turns():
    call = '{"name": "multiply", "parameters": {"a": 3, "b": 4}}'
    first, second, fmt = first_and_second("llama3_tools", "llama3", call)
    assert (fmt.native, fmt.prefix_stable, fmt.eot_text) == (True, True, "<|eot_id|>")
    bos = fmt.tokenizer.bos_token or ""
    assert first == (bos + "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n\nAnswer.<|eot_id|>"
                     "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a "
                     "JSON for a function call with its proper arguments that best answers the given prompt.\n\n"
                     'Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
                     'value}.Do not use variables.\n\n' + json.dumps(MULTIPLY, indent=4) + "\n\nWhat is 3 * 4?<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert second == "<|start_header_id|>ipython<|end_header_id|>\n\n12<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"


def test_smollm2_without_tool_support_gets_the_tools_in_its_system_prompt():
    from ragen_cli.envs.tools.formats import tool_prompt

    first, second, fmt = first_and_second(None, "hermes", HERMES_CALL)
    assert (fmt.native, fmt.prefix_stable) == (False, True)
    assert first == (f"<|im_start|>system\nAnswer.\n\n{tool_prompt([MULTIPLY], 'hermes')}<|im_end|>\n"
                     "<|im_start|>user\nWhat is 3 * 4?<|im_end|>\n<|im_start|>assistant\n")
    assert tool_prompt([MULTIPLY], "hermes") == (QWEN_TOOLS.lstrip() + "\n\nWhen you know the answer, reply with the "
                                                 "answer alone, without a function call.")
    assert second == "\n<|im_start|>tool\n12<|im_end|>\n<|im_start|>assistant\n"


# ----------------------------------------------------------------- token-exact rows
class ForcedBackend:
    """A backend whose replies are fixed texts (the model stands in for sampling) with the real
    model's log-probs of those tokens under the prompt it was given: what a sampler records."""

    name = "forced"

    def __init__(self, hf, replies, stop: bool):
        self.hf, self.tok, self.replies, self.stop, self.calls = hf, hf.tokenizer, replies, stop, 0

    def generate(self, prompts, *, n, max_tokens, temperature, top_p, seed):
        from ragen_cli.rollout.types import Sample

        text = self.replies[self.calls]
        self.calls += 1
        # ChatML's <|im_end|> is one token the model samples; Llama 3's <|eot_id|> is plain text to this
        # tokenizer, so the reply ends without it and the template's closing tokens follow (mask 0)
        ids = self.tok(text, add_special_tokens=False)["input_ids"] + ([self.hf.stop_ids[-1]] if self.stop else [])
        out = []
        for prompt in prompts:
            logp = self.hf.score(list(prompt) + ids)[len(prompt) - 1:]
            out.append([Sample(ids, logp, self.tok.decode(ids), "stop" if self.stop else "length")] * n)
        return out


@pytest.mark.parametrize("template,parser,think,rows_per_turn", [
    (None, "hermes", False, False),
    ("qwen2_5_tools", "hermes", False, False),
    ("qwen3_tools", "hermes", True, True),
    ("llama3_tools", "llama3", False, False),
])
def test_trained_tokens_are_the_sampled_tokens(project, template, parser, think, rows_per_turn):
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.rollout.context import ChatFormat, trains_per_turn
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec
    from ragen_cli.train.batch import collate, score
    from ragen_cli.train.turn_rows import turn_rows

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-random", "float32"), torch_dtype=torch.float32)
    tok = tokenizer(template)
    call = HERMES_CALL if parser == "hermes" else '{"name": "multiply", "parameters": {"a": 3, "b": 4}}'
    head = " 3 times 4 </think>\n" if think else ""
    backend = ForcedBackend(HFBackend(model, tok), [head + call, head + "12"], stop=template != "llama3_tools")
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=64, think=think)
    env = EnvRef(name="tools", config=config(parser=parser))
    trajs = run_rollouts(backend, tok, env, [0, 1], 2, rollout, 4096, 7)
    assert [len(t.turns) for t in trajs] == [2, 2, 2, 2]
    assert [t.episode_reward for t in trajs] == [1.0, 1.0, 0.0, 0.0]  # 12 is right for 3 * 4, wrong for 5 * 6
    assert [t.info["tool_stats"]["per_tool"] for t in trajs] == [{"multiply": 1}] * 4
    # the record keeps each turn's calls and results; the final answer's turn has none
    args = {"a": 3, "b": 4}
    assert [[turn.tool_calls for turn in t.turns] for t in trajs[::2]] == [
        [[{"name": "multiply", "arguments": args, "result": "12", "status": "ok"}], None]] * 2
    assert "tool_calls" in trajs[0].turns[0].as_dict() and "tool_calls" not in trajs[0].turns[1].as_dict()
    # the rule the Plan applies (compile/template.py probes the plain conversation)
    per_turn = trains_per_turn(rollout.update_context, ChatFormat(tok, think).prefix_stable)
    assert per_turn == rows_per_turn
    rows = turn_rows(trajs)[0] if per_turn else trajs
    batch = collate(rows)
    trained = score(model, batch, micro=4)
    gap = float(((trained - batch.sample_logp).abs() * batch.mask).max())
    assert batch.mask.sum() == sum(t.num_generated for t in trajs) and gap <= 1e-5
    assert all(math.isfinite(x) for t in trajs for x in t.old_logprobs)
    text = tok.decode(trajs[0].input_ids)
    assert "12" in text and ("<tool_response>\n12\n</tool_response>" in text or "ipython" in text or "<|im_start|>tool\n12" in text)


def test_a_template_that_re_renders_only_tool_turns_is_refused_by_name():
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.context import ChatFormat
    from ragen_cli.spec.models import ModelSpec
    from ragen_cli.rollout.tool_chat import ToolChatFormat

    # ChatML that marks a reply once a tool result follows it: plain turns render as a prefix, tool turns do not
    template = ("{%- for m in messages %}{%- if m.role == 'assistant' and not loop.last and "
                "messages[loop.index0 + 1].role == 'tool' %}{{ '<|im_start|>assistant\\n[call] ' + m.content + "
                "'<|im_end|>\\n' }}{%- else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
                "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}")
    tok = load_tokenizer(resolve_model("tiny-random"), ModelSpec(chat_template=template))
    assert ChatFormat(tok, False).prefix_stable is True
    with pytest.raises(ValueError, match="renders plain turns as a prefix of later ones but re-renders tool turns"):
        ToolChatFormat(tok, False, [MULTIPLY], "hermes")


def test_thinking_replies_and_the_context_window_rule():
    from ragen_cli.spec.models import RolloutSpec
    from ragen_cli.rollout.tool_chat import ToolChatFormat, ToolEpisodeContext

    class Env:
        def instruction(self):
            return "Answer."

        def chat_messages(self):
            return [{"role": "user", "content": "What is 3 * 4?"}]

    ctx = ToolEpisodeContext(ToolChatFormat(tokenizer("qwen3_tools"), True, [MULTIPLY], "hermes"), Env())
    think = RolloutSpec(think=True)
    parsed = ctx.parse("<think> 3 times 4 </think>\n" + HERMES_CALL, think)
    assert (parsed.format_ok, parsed.think, parsed.actions) == (True, "3 times 4", ["\n" + HERMES_CALL])
    assert not ctx.parse("<think> still thinking " + HERMES_CALL, think).format_ok  # reasoning never closed
    assert ctx.parse("12", RolloutSpec(think=False)).actions == ["12"]
    ctx.commit_prompt("", None, ctx.next_prompt_ids("", None))
    with pytest.raises(ValueError, match="rollout.context_window does not apply to tool envs"):
        ctx.window_prompt(2)


# ----------------------------------------------------------------- seen in `ragen watch` and `ragen inspect`
CALLS = [{"name": "multiply", "arguments": {"a": 3, "b": 4}, "result": "12", "status": "ok"},
         {"name": "lookup", "arguments": {"key": "plum"}, "result": "Error: lookup raised KeyError: 'plum'", "status": "error"}]
TRAJ = {"group": 0, "seed": 5, "env": "tools", "reward": 1.0, "success": True, "turns": [
    {"obs": "What is 3 * 4?", "reply": HERMES_CALL, "actions": [HERMES_CALL],
     "reward": 0.0, "valid": 1, "effective": 1, "executed": 1, "format_ok": True, "tool_calls": CALLS},
    {"obs": "<tool_call>{}", "reply": "{", "actions": ["{"], "reward": -0.1, "valid": 0, "effective": 0, "executed": 1,
     "format_ok": True, "tool_calls": [{"name": None, "arguments": None, "status": "invalid",
                                        "result": "Error: tool call 1 is not valid JSON (Expecting value)"}]},
    {"obs": "12", "reply": "12", "actions": ["12"], "reward": 1.0, "valid": 1, "effective": 1, "executed": 1,
     "format_ok": True}]}


def test_a_tool_call_reads_as_one_line():
    from ragen_cli.rollout.render import tool_call_text

    assert [tool_call_text(c) for c in CALLS] == ['multiply(a=3, b=4) -> 12',
                                                 """lookup(key="plum") -> [error] Error: lookup raised KeyError: 'plum'"""]
    assert tool_call_text(TRAJ["turns"][1]["tool_calls"][0]) == "[invalid] Error: tool call 1 is not valid JSON (Expecting value)"
    long = {"name": "echo", "arguments": {}, "result": "x\n" * 300, "status": "ok"}
    assert tool_call_text(long, limit=20) == "echo() -> x x x x x x x x x..."  # folded; 17 characters + "..."


def test_watch_and_inspect_show_each_turn_s_calls_and_results():
    from rich.console import Console

    from ragen_cli.rollout.render import render_trajectory
    from ragen_cli.tui.format import trajectory_markup

    markup = trajectory_markup(TRAJ).splitlines()
    calls = [line for line in markup if line.startswith("[dim]call[/]")]
    assert calls == ["[dim]call[/]    multiply(a=3, b=4) -> 12",
                     """[dim]call[/]    [red]lookup(key="plum") -> \\[error] Error: lookup raised KeyError: 'plum'[/]""",
                     "[dim]call[/]    [red]\\[invalid] Error: tool call 1 is not valid JSON (Expecting value)[/]"]
    # the calls sit under their turn: turn 1's two, turn 2's one, turn 3 (the answer) none
    turns = [i for i, line in enumerate(markup) if line.startswith("\n[b]turn") or line.startswith("[b]turn")]
    assert len(turns) == 3 and turns[0] < markup.index(calls[0]) < markup.index(calls[1]) < turns[1] < markup.index(calls[2]) < turns[2]
    console = Console(width=200, record=True)
    console.print(render_trajectory(TRAJ))
    text = console.export_text()
    assert "    call multiply(a=3, b=4) -> 12\n" in text
    assert "    call [invalid] Error: tool call 1 is not valid JSON (Expecting value)\n" in text
    assert text.index("turn 1:") < text.index("call multiply") < text.index("turn 2:") < text.index("call [invalid]") < text.index("turn 3:")
