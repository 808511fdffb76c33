"""Authentication and request size limits, as one ASGI middleware in front of every route.

A middleware rather than per-route dependencies so that no route (HTTP or WebSocket) can
be added without it. The bearer token is compared in constant time. Browsers cannot set
headers on EventSource or WebSocket, so `/login?token=…` trades the token for an HttpOnly,
SameSite=Strict cookie; requests authenticated by that cookie must also come from our own
origin when they change state (and for WebSocket handshakes, which browsers send
cross-origin with cookies). A token in an API query string is never accepted: it would
end up in access logs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._problems import PROBLEM_JSON, problem_body

COOKIE = "nua_session"
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/login"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def cookie_value(token: str) -> str:
    """What the cookie holds: derived from the token, so the cookie is not the token."""
    return hashlib.sha256(f"opennua-cookie\x1f{token}".encode()).hexdigest()


class _TooLarge(Exception):
    pass


class Guard:
    def __init__(self, app: ASGIApp, *, token: str, max_body: int) -> None:
        self.app = app
        self._token = token.encode()
        self._cookie = cookie_value(token).encode()
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        denial = self._check(scope, headers)
        if denial is not None:
            await _deny(scope, receive, send, *denial)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            await _deny(scope, receive, send, "payload_too_large", "the request body is too large")
            return
        await self._limited(scope, receive, send)

    def _check(self, scope: Scope, headers: dict[str, str]) -> tuple[str, str] | None:
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            if hmac.compare_digest(auth[7:].strip().encode(), self._token):
                return None
            return "unauthorized", "the bearer token is not valid"
        cookie = _cookies(headers.get("cookie", "")).get(COOKIE)
        if cookie is None or not hmac.compare_digest(cookie.encode(), self._cookie):
            return "unauthorized", "send Authorization: Bearer <token> (or log in via /login)"
        if scope["type"] == "websocket" or scope.get("method", "GET") not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is None or origin != _own_origin(scope, headers):
                return "forbidden", "cookie-authenticated requests must come from this origin"
        return None

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Chunked bodies carry no Content-Length: count what arrives and stop at the bound.
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max_body:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _deny(
                    scope, receive, send, "payload_too_large", "the request body is too large"
                )


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in raw.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            out[name] = value
    return out


def _own_origin(scope: Scope, headers: dict[str, str]) -> str:
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme"))
    return f"{scheme}://{headers.get('host', '')}"


async def _deny(scope: Scope, receive: Receive, send: Send, code: str, detail: str) -> None:
    status, body = problem_body(code, detail)
    payload = json.dumps(body).encode()
    start: dict[str, Any] = {
        "status": status,
        "headers": [
            (b"content-type", PROBLEM_JSON.encode()),
            (b"content-length", str(len(payload)).encode()),
        ],
    }
    if status == 401:
        start["headers"].append((b"www-authenticate", b'Bearer realm="opennua"'))
    if scope["type"] == "websocket":
        await receive()  # websocket.connect: the ASGI server expects it read first
        # Reject the handshake with an HTTP response (ASGI websocket.http.response) when the
        # server supports it, else a policy-violation close.
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", **start})
            await send({"type": "websocket.http.response.body", "body": payload})
        else:
            await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", **start})
    await send({"type": "http.response.body", "body": payload})
