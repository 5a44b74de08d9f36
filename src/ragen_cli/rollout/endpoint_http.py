"""The HTTP side of the policy endpoint (`endpoint.py`): routes, JSON bodies and the OpenAI
error shape. What a request means (sampling, recording, stitching) is `PolicyEndpoint`'s."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class RequestError(ValueError):
    """A request the endpoint refuses: answered with HTTP `status` and the OpenAI error shape."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status



def handler(endpoint: Any) -> type[BaseHTTPRequestHandler]:
    """The request handler class of `endpoint` (a `PolicyEndpoint`): routes `/e/EPISODE/v1/...`
    to its `chat` and `completion`, answers `RequestError` with the OpenAI error shape."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: the run's log says what matters
            pass

        def _route(self) -> tuple[str, str] | None:
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) >= 4 and parts[0] == "e" and parts[2] == "v1":
                return parts[1], "/".join(parts[3:])
            return None

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            endpoint.stats.refused += 1
            self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": status}})

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            route = self._route()
            if route and route[1] == "models":
                self._send(200, {"object": "list", "data": [{"id": endpoint.model_name, "object": "model"}]})
            else:
                self._error(404, f"no such route: {self.path} (use /e/EPISODE/v1/...)")

        def do_POST(self) -> None:  # noqa: N802
            route = self._route()
            if route is None or route[1] not in ("chat/completions", "completions"):
                self._error(404, f"no such route: {self.path} (use /e/EPISODE/v1/chat/completions)")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                if not isinstance(body, dict):
                    raise RequestError("the request body must be a JSON object")
                if body.get("stream"):
                    raise RequestError("stream is not supported: ragen's endpoint answers whole replies")
                episode, kind = route
                answer = endpoint.chat(episode, body) if kind == "chat/completions" else endpoint.completion(episode, body)
            except RequestError as err:
                self._error(err.status, str(err))
                return
            except json.JSONDecodeError as err:
                self._error(400, f"the request body is not JSON ({err.msg})")
                return
            self._send(200, answer)

    return Handler
