"""The real chat templates of Qwen2.5, Qwen3 and Llama 3.1 (issue 72, items 2 and 4), vendored
unchanged as fixtures (tests/fixtures/chat_templates/*_real.jinja; each names its public source):
what the probes find in each, tool episodes through the driver that train exactly the sampled
tokens, Qwen3's empty reasoning block before a call (which its template drops once a tool result
follows), and Llama 3.1's `<|eom_id|>`, which ends a tool call in place of `<|eot_id|>`."""

from __future__ import annotations

import pytest

from test_tools import FIXTURES, HERMES_CALL, MULTIPLY, config, project, tokenizer  # noqa: F401 (fixture)

LLAMA_CALL = '{"name": "multiply", "parameters": {"a": 3, "b": 4}}'
LLAMA_SPECIAL = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
                 "<|python_tag|>"]


def llama_tokenizer():
    """tiny-random's tokenizer with the real Llama 3.1 template and Llama 3's special tokens added,
    so `<|eot_id|>` and `<|eom_id|>` are single tokens as in Llama's own vocabulary."""
    tok = tokenizer("llama3_1_real")
    tok.add_special_tokens({"additional_special_tokens": LLAMA_SPECIAL})
    return tok


@pytest.mark.parametrize("template,think,native,plain_stable,tool_stable", [
    ("qwen2_5_real", False, True, True, True),
    # Qwen3 drops the reasoning of replies before the last user query (plain), and an empty
    # reasoning block once a tool result follows (tools): both re-render
    ("qwen3_real", True, True, False, False),
    # without thinking the last reply gets an empty <think></think> that later renderings drop
    ("qwen3_real", False, True, False, False),
    ("llama3_1_real", False, True, True, True),
])
def test_what_the_probes_find_in_the_real_templates(template, think, native, plain_stable, tool_stable):
    from ragen_cli.rollout.context import ChatFormat
    from ragen_cli.rollout.tool_chat import ToolChatFormat

    tok = tokenizer(template)
    fmt = ToolChatFormat(tok, think, [MULTIPLY], "llama3" if template.startswith("llama") else "hermes")
    assert (fmt.native, ChatFormat(tok, think).prefix_stable, fmt.prefix_stable) == (native, plain_stable, tool_stable)


class Forced:
    """Replies that are fixed token lists (each ending in the stop token the model would sample),
    with the real model's log-probs of those tokens under the prompt given: what a sampler records."""

    name = "forced"

    def __init__(self, hf, replies: list[list[int]]):
        self.hf, self.replies, self.calls = hf, replies, 0

    def generate(self, prompts, *, n, max_tokens, temperature, top_p, seed):
        from ragen_cli.rollout.types import Sample

        ids = self.replies[self.calls]
        self.calls += 1
        out = []
        for prompt in prompts:
            logp = self.hf.score(list(prompt) + ids)[len(prompt) - 1:]
            reason = "stop" if ids[-1] in self.hf.stop_ids else "length"
            out.append([Sample(ids, logp, self.hf.tokenizer.decode(ids), reason)] * n)
        return out


def episode(tok, parser: str, think: bool, replies: list[str], end: str):
    """Two-turn tool episodes (a call, then the answer 12) on seeds 0 and 1, groups of 2, through
    the driver; the trainer's log-probs of each trained token against the sampler's."""
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
    model.resize_token_embeddings(len(tok))
    hf = HFBackend(model, tok)
    ids = [tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids(e)]
           for text, e in zip(replies, end)]
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=64, think=think)
    trajs = run_rollouts(Forced(hf, ids), tok, EnvRef(name="tools", config=config(parser=parser)), [0, 1], 2,
                         rollout, 4096, 7)
    per_turn = trains_per_turn(rollout.update_context, ChatFormat(tok, think).prefix_stable)
    batch = collate(turn_rows(trajs)[0] if per_turn else trajs)
    gap = float(((score(model, batch, micro=4) - batch.sample_logp).abs() * batch.mask).max())
    return trajs, batch, gap, per_turn


def test_qwen3_trains_exactly_what_it_sampled_when_an_empty_reasoning_block_precedes_a_call(project):
    # the reply after the pre-filled <think>: no reasoning, then the call. The real template renders
    # it with "<think>\n\n</think>\n\n" while it is the last message and without once the result
    # follows: before the probe tried an empty block, the second turn's layout raised here
    tok = tokenizer("qwen3_real")
    trajs, batch, gap, per_turn = episode(tok, "hermes", True, ["</think>\n\n" + HERMES_CALL, " 3*4 </think>\n12"],
                                          ["<|im_end|>", "<|im_end|>"])
    assert [t.episode_reward for t in trajs] == [1.0, 1.0, 0.0, 0.0]  # 12 is right for 3 * 4, wrong for 5 * 6
    assert [t.info["tool_stats"]["calls"] for t in trajs] == [1] * 4 and per_turn
    # the second turn's sampler prompt is the template's own rendering: the first reply without its empty block
    second = tok.decode(trajs[0].turn_prompts[1])
    assert "<|im_start|>assistant\n<tool_call>\n" in second and "<think>\n\n</think>" not in second
    assert second.endswith("<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>")
    assert batch.mask.sum() == sum(t.num_generated for t in trajs) and gap <= 1e-5


@pytest.mark.parametrize("template,parser", [("qwen2_5_real", "hermes"), ("qwen3_real", "hermes")])
def test_real_chatml_templates_train_exactly_what_was_sampled(project, template, parser):
    tok = tokenizer(template)
    trajs, batch, gap, per_turn = episode(tok, parser, False, [HERMES_CALL, "12"], ["<|im_end|>", "<|im_end|>"])
    assert [t.episode_reward for t in trajs] == [1.0, 1.0, 0.0, 0.0]
    assert per_turn == (template == "qwen3_real")
    assert batch.mask.sum() == sum(t.num_generated for t in trajs) and gap <= 1e-5


def test_a_llama_3_1_call_ending_in_eom_is_a_call_and_its_turn_ends_there(project):
    from ragen_cli.rollout.context import ChatFormat, stop_token_ids

    tok = llama_tokenizer()
    eot, eom = tok.convert_tokens_to_ids("<|eot_id|>"), tok.convert_tokens_to_ids("<|eom_id|>")
    assert {eot, eom} <= set(stop_token_ids(tok)) and ChatFormat(tok, False).turn_ends == ["<|eot_id|>", "<|eom_id|>"]
    trajs, batch, gap, per_turn = episode(tok, "llama3", False, [LLAMA_CALL, "12"], ["<|eom_id|>", "<|eot_id|>"])
    # the call ran (not the format penalty for `{...}<|eom_id|>`), the answer scored
    assert [t.info["tool_stats"] for t in trajs[:1]] == [{"calls": 1, "invalid": 0, "errors": 0,
                                                          "per_tool": {"multiply": 1}}]
    assert [t.episode_reward for t in trajs] == [1.0, 1.0, 0.0, 0.0]
    first = trajs[0].turns[0]
    assert (first.finish_reason, first.format_ok, first.actions) == ("stop", True, [LLAMA_CALL])
    # <|eom_id|> is the last sampled token of turn 1 (trained), and the ipython turn follows it
    # directly: no <|eot_id|> appended after it
    ids, mask = trajs[0].input_ids, trajs[0].loss_mask
    at = ids.index(eom)
    assert mask[at] == 1 and tok.convert_ids_to_tokens(ids[at + 1]) == "<|start_header_id|>"
    assert tok.decode(ids[at + 1:]).startswith('<|start_header_id|>ipython<|end_header_id|>\n\n"12"<|eot_id|>')
    assert not per_turn and batch.mask.sum() == sum(t.num_generated for t in trajs) and gap <= 1e-5
