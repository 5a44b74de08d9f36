"""Judge rewards (envs/judge.py; issue 74): the score read from a judge's reply, the rubric filled
from the row, a fake OpenAI-compatible judge server answering fixed replies (a score, no number,
an HTTP error, a reply past the timeout) through a real rollout, the built-in model as a local
judge, and bad judge configs as spec errors."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragen_cli.envs.judge import judge_prompt, parse_score

RUBRIC = "Question: {prompt}\nAnswer: {completion}\nReference: {answer}\nScore 0-10:"


def test_the_score_is_the_first_number_over_the_scale_clipped():
    assert parse_score("7", 10) == 0.7
    assert parse_score("Score: 8.5/10", 10) == 0.85  # the first number only
    assert parse_score("12 out of 10!", 10) == 1.0 and parse_score("-3", 10) == 0.0
    assert parse_score("I cannot say", 10) is None and parse_score("", 10) is None


def test_the_rubric_is_filled_from_the_row():
    assert judge_prompt(RUBRIC, "2+2?", "4", {"answer": "4"}) == "Question: 2+2?\nAnswer: 4\nReference: 4\nScore 0-10:"
    with pytest.raises(ValueError, match=r"judge.rubric names \{answer\}, which the row has no column for"):
        judge_prompt(RUBRIC, "2+2?", "4", {"id": 3})


class FakeJudge:
    """An OpenAI-compatible chat server answering REPLIES in order: a text, or an HTTP status, or
    ("slow", seconds)."""

    REPLIES = ["Score: 7", "I cannot say", 500, ("slow", 3.0)]

    def __init__(self):
        self.prompts = []
        replies, prompts = list(self.REPLIES), self.prompts

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompts.append(body["messages"][0]["content"])
                reply = replies.pop(0)
                if isinstance(reply, tuple):
                    time.sleep(reply[1])
                    reply = "9"
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.end_headers()
                    return
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def project(tmp_path, monkeypatch):
    rows = [{"prompt": f"What is {a} + {a}?", "answer": str(2 * a)} for a in (1, 2, 3, 4)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rollouts(judge: dict, seeds=(0, 1, 2, 3)):
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    torch.manual_seed(0)
    path = resolve_model("tiny-random", "float32")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tok = load_tokenizer(path)
    env = EnvRef(name="dataset", config={"path": "data.jsonl", "shuffle": False, "judge": judge})
    rollout = RolloutSpec(max_tokens_per_turn=4, think=False, format_penalty=0.0)
    return run_rollouts(HFBackend(model, tok), tok, env, list(seeds), 1, rollout, 1024, 3)


def test_a_url_judge_s_scores_failures_and_replies_through_a_rollout(project):
    from ragen_cli.rollout.driver import rollout_stats

    fake = FakeJudge()
    trajs = rollouts({"rubric": RUBRIC, "url": fake.url, "model": "judge-model", "timeout_s": 1.0})
    # 7/10; no number; HTTP 500; past the 1 s timeout: one score, three failures (no reward, no crash)
    assert [t.info["judge_failed"] for t in trajs] == [0, 1, 1, 1]
    assert [t.info["reward_fns"]["judge"] for t in trajs] == [0.7, None, None, None]
    assert [t.episode_reward for t in trajs] == [0.7, 0.0, 0.0, 0.0]
    assert trajs[0].info["judge_reply"] == "Score: 7" and trajs[1].info["judge_reply"] == "I cannot say"
    assert trajs[2].info["judge_reply"].startswith("(judge failed: InternalServerError")
    assert trajs[3].info["judge_reply"].startswith("(judge failed: APITimeoutError")
    assert fake.prompts[0].startswith("Question: What is 1 + 1?\nAnswer: ") and fake.prompts[0].endswith(
        "\nReference: 2\nScore 0-10:")
    stats = rollout_stats(trajs, 1.0)
    assert stats["judge/failed_ratio"] == 0.75 and stats["reward/fn/judge"] == 0.7
    assert "judge_reply" in trajs[0].to_record()["info"]  # saved with the trajectory


def test_the_built_in_model_judges_locally(project):
    trajs = rollouts({"rubric": "Rate this answer: {completion}", "model": "tiny-random", "max_tokens": 4}, seeds=(0,))
    [t] = trajs
    assert isinstance(t.info["judge_reply"], str) and t.info["judge_failed"] in (0, 1)
    assert not t.info["judge_reply"].startswith("(judge failed")  # the model answered (what it says is its own)


def test_bad_judge_configs_are_spec_errors(project):
    from ragen_cli.envs.registry import check_env

    base = {"path": "data.jsonl"}
    assert any("rewards is required" in p for p in check_env("dataset", base))
    assert any("must contain {completion}" in p for p in check_env("dataset", {**base, "judge": {"rubric": "Rate it"}}))
    assert any("unexpected keyword argument 'temperature'" in p
               for p in check_env("dataset", {**base, "judge": {"rubric": RUBRIC, "temperature": 0.5}}))
    assert check_env("dataset", {**base, "judge": {"rubric": RUBRIC}}) == []
