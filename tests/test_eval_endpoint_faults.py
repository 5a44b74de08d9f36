"""`ragen eval --endpoint` against a server that misbehaves on purpose (issue 38, section 3):
timeouts, 5xx, 429 with Retry-After, malformed JSON. Requests are retried a bounded number of
times with backoff; a failure for good is a clear error, and the episodes already played are
kept in the report, written before `ragen eval` exits non-zero.

The server is a real HTTP server on loopback (http.server in a thread) that plays a script: the
k-th POST gets the k-th action, then valid completions ("<answer>1</answer>" for each choice).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.eval.endpoint import DEFAULT_CONCURRENCY, EndpointBackend, EndpointError, Retry, retry_after_seconds

FAST = Retry(attempts=3, backoff_s=0.01, max_wait_s=0.05)  # bounded like the default, short waits


class Server:
    """A completions endpoint following `script`: actions ("ok" | ("status", code[, retry_after])
    | ("sleep", seconds) | "garbage" | "no-choices"), one per request, then "ok" (or `after`)."""

    def __init__(self, script: list, after="ok") -> None:
        self.script, self.after, self.requests = list(script), after, []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    outer.requests.append(body)
                    action = outer.script.pop(0) if outer.script else outer.after
                kind = action[0] if isinstance(action, tuple) else action
                if kind == "sleep":
                    time.sleep(action[1])
                    kind = "ok"
                if kind == "status":
                    self.send_response(action[1])
                    if len(action) > 2:
                        self.send_header("Retry-After", str(action[2]))
                    payload = json.dumps({"error": {"message": f"scripted {action[1]}"}}).encode()
                elif kind == "garbage":
                    self.send_response(200)
                    payload = b'{"choices": [{"text": "<answer>1</ans'
                elif kind == "no-choices":
                    self.send_response(200)
                    payload = b'{"object": "error", "message": "overloaded"}'
                else:
                    self.send_response(200)
                    choices = [{"index": i, "text": "<answer>1</answer>", "finish_reason": "stop"}
                               for i in range(body["n"])]
                    payload = json.dumps({"choices": choices}).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(script, after="ok") -> Server:
        servers.append(Server(script, after))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from ragen_cli.models.load import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def _generate(server: Server, tokenizer, retry: Retry = FAST, timeout: float = 5.0, sleep=time.sleep, prompts=1):
    backend = EndpointBackend(server.url, "m", tokenizer, timeout=timeout, retry=retry, sleep=sleep)
    return backend.generate([[1, 2, 3 + i] for i in range(prompts)], n=2, max_tokens=4, temperature=1.0,
                            top_p=1.0, seed=0)


@pytest.mark.parametrize("fault", [("status", 503), ("status", 500), ("status", 502), "garbage", "no-choices"])
def test_transient_faults_are_retried_until_an_answer(serve, tokenizer, fault):
    server = serve([fault, fault])  # two failures, then an answer: 3 tries, the most FAST allows
    out = _generate(server, tokenizer)
    assert [s.text for s in out[0]] == ["<answer>1</answer>"] * 2
    assert len(server.requests) == 3


def test_a_timeout_is_retried(serve, tokenizer):
    server = serve([("sleep", 2.0)])  # the first answer comes after the client's 0.3 s timeout
    out = _generate(server, tokenizer, timeout=0.3)
    assert len(out[0]) == 2 and len(server.requests) == 2


def test_a_fault_that_lasts_is_a_clear_error_after_the_bounded_tries(serve, tokenizer):
    server = serve([], after=("status", 503))
    with pytest.raises(EndpointError) as err:
        _generate(server, tokenizer)
    assert len(server.requests) == 3  # FAST.attempts, no more
    assert str(err.value) == (f"no usable answer after 3 tries: {server.url}/v1/completions answered HTTP 503: "
                              '{"error": {"message": "scripted 503"}}')
    server = serve([], after="garbage")
    with pytest.raises(EndpointError, match=r"after 3 tries: .* answered malformed JSON: b'\{\"choices\""):
        _generate(server, tokenizer)


def test_client_errors_are_not_retried(serve, tokenizer):
    server = serve([("status", 401), ("status", 404)])
    with pytest.raises(EndpointError, match="answered HTTP 401"):
        _generate(server, tokenizer)
    assert len(server.requests) == 1


def test_429_waits_what_retry_after_asks_within_the_cap(serve, tokenizer):
    waits: list[float] = []  # the backend's clock: records the waits instead of sleeping them
    server = serve([("status", 429, 2), ("status", 429, 120), ("status", 429)])
    out = _generate(server, tokenizer, retry=Retry(attempts=4, backoff_s=0.5, max_wait_s=30.0), sleep=waits.append)
    assert len(out[0]) == 2
    # Retry-After 2 -> 2 s; Retry-After 120 -> the 30 s cap; no header on the 3rd failure ->
    # backoff 0.5 x 2^(3-1) = 2 s
    assert waits == [2.0, 30.0, 2.0]


def test_retry_after_as_an_http_date():
    # Retry-After: Wed, 21 Oct 2015 07:28:00 GMT is 1445412480 s since the epoch; 90 s before it
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480 - 90) == 90.0
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_one_failed_request_among_concurrent_ones_fails_the_call(serve, tokenizer):
    server = serve(["ok", "ok", ("status", 400)], after="ok")  # prompt 0, then the fan-out
    with pytest.raises(EndpointError, match="answered HTTP 400"):
        _generate(server, tokenizer, prompts=4)


def test_ragen_eval_keeps_the_episodes_played_before_the_endpoint_failed(serve, tiny_model_dir, tmp_path):
    """20 countdown seeds, one turn each (every seed's prompt differs: one request per episode).
    The endpoint plays them in chunks of DEFAULT_CONCURRENCY seeds (8); the server answers 8
    requests and then refuses (HTTP 400, not retried): the first chunk's 8 episodes are kept in
    eval.json and the trajectories, and `ragen eval` exits 2 naming the error and the count."""
    assert DEFAULT_CONCURRENCY == 8
    server = serve(["ok"] * 8, after=("status", 400))
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, ["eval", "--endpoint", server.url, "--model", "served",
                                      "--tokenizer", str(tiny_model_dir), "--env", "countdown", "--episodes", "20",
                                      "--seed", "100", "--max-turns", "1", "--max-tokens", "8", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "stopped early at countdown, seeds 108..115: " in result.output
    assert f"the 8 of 20 episodes played before it are in {out / 'eval.json'}" in " ".join(result.output.split())
    doc = json.loads((out / "eval.json").read_text())
    assert [e["seed"] for e in doc["episodes"]["countdown"]] == list(range(100, 108))
    assert doc["results"][0]["episodes"] == 8
    assert doc["incomplete"]["episodes_planned_per_env"] == 20
    assert doc["incomplete"]["episodes_played"] == {"countdown": 8}
    assert "answered HTTP 400" in doc["incomplete"]["error"]
    traj = (out / "trajectories" / "step-0.jsonl").read_text().splitlines()
    assert len(traj) == 8
    assert len(server.requests) == 9  # 8 answered, the 9th refused; nothing after it
