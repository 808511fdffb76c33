"""One HTTP exchange of the gateway, on bare ASGI.

Starlette's `Request` and `Response` build header objects, a URL and a body iterator per
call; the gateway reads four headers and one body and answers with one buffered body
(every answer passes through the redaction whole), so it does that itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

from ._resolve import Refusal


@dataclass(slots=True)
class Incoming:
    method: str
    path: str
    #: lower-case names (as ASGI gives them); a repeated header keeps its last value
    headers: dict[str, str]
    _receive: Receive
    query: str = ""

    @classmethod
    def of(cls, scope: Scope, receive: Receive) -> Incoming:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        return cls(scope["method"], scope["path"], headers, receive, query)

    async def disconnected(self) -> None:
        """Returns once the caller went away (a stream's end, from its side)."""
        while (await self._receive())["type"] != "http.disconnect":
            pass

    async def body(self, limit: int) -> bytes:
        chunks = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise Refusal("bad_request", "the caller went away before its request ended", 400)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise Refusal("payload_too_large", f"a request is at most {limit} bytes", 413)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


@dataclass(slots=True)
class Outgoing:
    status_code: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    async def send(self, send: Send) -> None:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        headers.append((b"content-length", str(len(self.body)).encode()))
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


def json_out(value: Any, status: int = 200, media_type: str = "application/json") -> Outgoing:
    # ASCII: a detail quoting the caller's text may hold a lone surrogate, which has an
    # escape in JSON but no UTF-8 encoding.
    body = json.dumps(value, separators=(",", ":")).encode()
    return Outgoing(status, body, {"content-type": media_type})
