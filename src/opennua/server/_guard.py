"""Authentication, request size limits and the Host allow-list, as ASGI middlewares in
front of every route.

Middlewares rather than per-route dependencies so that no route (HTTP or WebSocket) can
be added without them. Who the token or cookie stands for is `opennua.auth.Authority`'s
answer (tokens are compared by hash in constant time); the `Caller` is left in the scope
for the routes' authorization (`_authz`), which checks it against each object. Browsers cannot set
headers on EventSource or WebSocket, so `/login?token=…` trades the token for an HttpOnly,
SameSite=Strict cookie that expires; requests authenticated by that cookie must also come
from our own origin when they change state (and for WebSocket handshakes, which browsers
send cross-origin with cookies). A token in an API query string is never accepted: it
would end up in access logs.

`HostCheck` answers requests whose `Host` is not one this server is reached by with 421:
a page on another site that rebinds its DNS name to 127.0.0.1 sends its own name.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from opennua.auth import Authority, Caller, Denied
from opennua.store import StoreError

from ._problems import PROBLEM_JSON, encode_problem, problem_body

COOKIE_PREFIX = "nua_session"
#: A browser login lasts a week; `/logout` ends it sooner.
COOKIE_MAX_AGE = 7 * 24 * 3600
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/login", "/logout"})
#: A download link is its own credential (`Allow("link")` checks and spends it): a browser
#: or a chat client opening it sends no token.
LINK_PREFIX = "/v1/downloads/"
#: A webhook delivery carries the hook's signature instead of a token (docs/automation.md).
_SIGNED = re.compile(r"^/v1/hooks/hok_[0-9A-Za-z]{1,64}$")
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Where the Guard leaves the authenticated `Caller` in the ASGI scope.
CALLER_KEY = "opennua.caller"


def cookie_name(scope: Scope) -> str:
    """`nua_session_<port>`: browsers do not keep cookies apart by port, so two servers on
    one machine would otherwise overwrite each other's login."""
    server = scope.get("server")
    port = server[1] if server and server[1] is not None else None
    if port is None:
        _, named = split_host(_headers(scope).get("host", ""))
        secure = scope.get("scheme") in ("https", "wss")
        port = named or (443 if secure else 80)
    return f"{COOKIE_PREFIX}_{port}"


def split_host(host: str) -> tuple[str, str]:
    """`("name", "port")` of a Host header value (IPv6 in brackets), lowercased."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest.removeprefix(":")
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    return name, port


def default_allowed_hosts(bind: str, port: int) -> list[str]:
    """The bound address, `localhost` and the loopback addresses, each with the port."""
    names = {"localhost", "127.0.0.1", "[::1]"}
    if bind not in ("", "0.0.0.0", "::"):
        names.add(f"[{bind}]" if ":" in bind else bind)
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts |= names  # browsers leave the default port out
    return sorted(hosts)


class HostCheck:
    """Refuse (421) requests whose Host is not allowed; `*` allows any. An entry without a
    port allows that name on any port. Health checks are exempt: they reveal nothing and
    probes often address a server by an IP of their own."""

    def __init__(self, app: ASGIApp, *, allowed: Collection[str]) -> None:
        self.app = app
        self._any = "*" in allowed
        self._exact = {entry.lower() for entry in allowed if split_host(entry)[1]}
        self._names = {entry.lower() for entry in allowed if not split_host(entry)[1]}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self._any
            or scope["type"] not in ("http", "websocket")
            or scope["path"] in HEALTH_PATHS
            or self._allows(_headers(scope).get("host", ""))
        ):
            await self.app(scope, receive, send)
            return
        await _deny(
            scope, receive, send, "host_not_allowed", "this server is not reached by that Host"
        )

    def _allows(self, host: str) -> bool:
        name, port = split_host(host)
        if not name:
            return False
        return (f"{name}:{port}" if port else name) in self._exact or name in self._names


#: A plugin file upload, and a publish's listing of up to MAX_FILES files.
UPLOAD_PATHS = frozenset({"/v1/plugin-files", "/v1/plugins"})


class _TooLarge(Exception):
    pass


class Guard:
    def __init__(
        self, app: ASGIApp, *, authority: Authority, max_body: int, max_upload: int | None = None
    ) -> None:
        self.app = app
        self._authority = authority
        self._max_body = max_body
        #: A plugin file upload and a publish's listing may be as large as one file of a
        #: plugin, which is more than any other body needs.
        self._max_upload = max_upload or max_body

    def _limit(self, scope: Scope) -> int:
        if scope.get("method") == "POST" and scope["path"] in UPLOAD_PATHS:
            return self._max_upload
        return self._max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] not in ("http", "websocket")
            or path in OPEN_PATHS
            or (scope["type"] == "http" and path.startswith(LINK_PREFIX))
        ):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if signed_delivery(scope):
            # No caller: the route verifies the hook's signature (body limits still hold).
            await self._bounded(scope, receive, send, headers)
            return
        try:
            scope[CALLER_KEY] = await self._check(scope, headers)
        except Denied as denied:
            await _deny(scope, receive, send, denied.code, denied.detail)
            return
        except StoreError:
            # Who the caller is cannot be read now: say so, as every route would.
            await _deny(scope, receive, send, "unavailable", "the store does not answer")
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        await self._bounded(scope, receive, send, headers)

    async def _bounded(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        length = headers.get("content-length")
        limit = self._limit(scope)
        if length is not None and length.isdigit() and int(length) > limit:
            await _too_large(scope, receive, send)
            return
        await self._limited(scope, receive, send, limit)

    async def _check(self, scope: Scope, headers: dict[str, str]) -> Caller:
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return await self._authority.authenticate(auth[7:].strip())
        cookie = _cookies(headers.get("cookie", "")).get(cookie_name(scope))
        if cookie is None:
            raise Denied("unauthorized", "send Authorization: Bearer <token> (or log in)")
        caller = await self._authority.authenticate_cookie(cookie)
        if scope["type"] == "websocket" or scope.get("method", "GET") not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is None or origin != own_origin(scope, headers):
                raise Denied("forbidden", "cookie-authenticated requests must come from here")
        return caller

    async def _limited(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        # Chunked bodies carry no Content-Length: count what arrives and stop at the bound.
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
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
                await _too_large(scope, receive, send)


def signed_delivery(scope: Scope) -> bool:
    return (
        scope["type"] == "http"
        and scope.get("method") == "POST"
        and bool(_SIGNED.match(scope["path"]))
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


def own_origin(scope: Scope, headers: dict[str, str]) -> str:
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme"))
    return f"{scheme}://{headers.get('host', '')}"


#: Where a protocol's JSON-RPC binding is served: a body too large gets that protocol's
#: error shape (A2A: -32600 in a JSON-RPC response, as its SDK's own server answers).
JSONRPC_PREFIXES = ("/v1/a2a/",)


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    if not scope["path"].startswith(JSONRPC_PREFIXES):
        await _deny(scope, receive, send, "payload_too_large", "the request body is too large")
        return
    error = {"code": -32600, "message": "the request body is too large"}
    payload = encode_problem({"jsonrpc": "2.0", "id": None, "error": error})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _deny(scope: Scope, receive: Receive, send: Send, code: str, detail: str) -> None:
    status, body = problem_body(code, detail)
    payload = encode_problem(body)
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
