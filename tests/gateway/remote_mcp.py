"""A remote MCP server (the `mcp` SDK's streamable HTTP server) that requires a bearer
token, run as a subprocess: `python remote_mcp.py PORT` with the token in the
environment variable REMOTE_MCP_TOKEN (never argv). Its tools echo what a badly behaved
service might: `whoami` returns the Authorization header it got, `quirky` too but as a
quirky JSON encoder writes it (characters as `\\u` escapes in both cases, in an SSE answer
sent in pieces cut inside an escape), `broken` fails with it in the error, `slow` takes a
while (a call in flight while a grant is revoked)."""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import os
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)
server = MCPServer("notes")
_header: contextvars.ContextVar[str] = contextvars.ContextVar("header", default="")


@server.tool(annotations=READ)
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a short definition"


@server.tool(annotations=READ)
def whoami() -> str:
    """Say which credential the call came with (a service echoing it)."""
    return f"you called with {_header.get()}"


@server.tool(annotations=READ)
def quirky() -> str:
    """Say which credential the call came with, escaped (see `_quirky`)."""
    return f"you called with {_header.get()}"


@server.tool(annotations=READ)
def broken() -> str:
    """Fail, quoting the request's header in the error."""
    raise ToolError(f"upstream refused the request carrying {_header.get()}")


@server.tool(annotations=READ)
async def slow(seconds: float = 2.0) -> str:
    """Take a while."""
    # To the log (the test reads it): the call got past the gateway and is in flight.
    print("slow started", file=sys.stderr, flush=True)
    await asyncio.sleep(seconds)
    return "slow done"


def app(token: str) -> Any:
    inner = server.streamable_http_app(stateless_http=True, json_response=True)
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", b"Bearer")]})  # fmt: skip
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            _header.set(got.decode())
            body, more = b"", True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            replay = _replay(body, receive)
            if b'"quirky"' in body:
                await _quirky(inner, scope, replay, send, got.decode())
                return
            await inner(scope, replay, send)
            return
        await inner(scope, receive, send)

    return guarded


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def again() -> Any:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def _quirky(inner: Any, scope: Any, receive: Any, send: Any, header: str) -> None:
    """The SDK's answer, rewritten: the header's characters raw, `\\u` lower- and upper-case
    hex in turn, as an SSE event sent in two pieces cut inside an escape."""
    captured: list[Any] = []

    async def capture(message: Any) -> None:
        captured.append(message)

    await inner(scope, receive, capture)
    start = next(m for m in captured if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in captured if m["type"] == "http.response.body")
    forms = ("{}", "\\u{:04x}", "\\u{:04X}")
    escaped = "".join(
        c if n % 3 == 0 else forms[n % 3].format(ord(c)) for n, c in enumerate(header)
    )
    data = payload.replace(header.encode(), escaped.encode())
    event = b"event: message\r\ndata: " + data + b"\r\n\r\n"
    cut = event.index(b"\\u") + 3
    framing = (b"content-type", b"content-length")
    kept = [(k, v) for k, v in start["headers"] if k.lower() not in framing]
    headers = [*kept, (b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": start["status"], "headers": headers})
    for piece in (event[:cut], event[cut:]):
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(os.environ["REMOTE_MCP_TOKEN"]), host="127.0.0.1", port=port,
                log_level="warning")  # fmt: skip
