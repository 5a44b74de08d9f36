"""One OpenEnv WebSocket session (one Environment instance on the server) and the two ways an
answer can fail: `Refused` (the server's error message) and `Garbage` (not the protocol)."""

from __future__ import annotations

import json

from websockets.exceptions import ConnectionClosed


class Session:
    """One WebSocket session (= one Environment instance on the server)."""

    def __init__(self, url: str, timeout_s: float):
        from websockets.sync.client import connect

        ws_url = "ws" + url[4:] if url.startswith("http") else url
        # entered as a context (websockets >= 17 warns on a bare connect()), left in close()
        self.conn = connect(ws_url.rstrip("/") + "/ws", open_timeout=timeout_s, close_timeout=1, proxy=None,
                            max_size=64 << 20).__enter__()
        self.timeout_s = timeout_s

    def call(self, kind: str, data: dict) -> dict:
        """Send one message; -> the answer's `data` (observation, reward, done). Raises
        `Refused` for an error answer, `Garbage` for anything that is not the protocol."""
        try:
            self.conn.send(json.dumps({"type": kind, "data": data}))
        except ConnectionClosed:
            pass  # closed by the server, which may have said why first (no free session): read it
        raw = self.conn.recv(timeout=self.timeout_s)
        try:
            answer = json.loads(raw)
        except (TypeError, ValueError):
            raise Garbage(f"answered {kind} with non-JSON: {str(raw)[:200]!r}") from None
        body = answer.get("data") if isinstance(answer, dict) else None
        if isinstance(body, dict) and answer.get("type") == "error":
            raise Refused(str(body.get("code", "")), str(body.get("message", body))[:500])
        if (not isinstance(body, dict) or answer.get("type") != "observation"
                or not isinstance(body.get("observation"), dict)):
            raise Garbage(f"answered {kind} with {str(raw)[:200]!r}, not an observation")
        return body

    def close(self) -> None:
        try:
            self.conn.send(json.dumps({"type": "close", "data": {}}))
        except Exception:  # closing is best effort: the server may be gone
            pass
        try:
            self.conn.__exit__(None, None, None)
        except Exception:
            pass


class Garbage(Exception):
    pass


class Refused(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


def close_quietly(holder: dict) -> None:
    session = holder.pop("session", None)
    if session is not None:
        session.close()
