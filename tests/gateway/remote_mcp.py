"""A remote MCP server (the `mcp` SDK's streamable HTTP server) that requires a bearer
token, run as a subprocess: `python remote_mcp.py PORT` with the token in the
environment variable REMOTE_MCP_TOKEN (never argv). Its tools echo what a badly behaved
service might: `whoami` returns the Authorization header it got, `broken` fails with it
in the error, `slow` takes a while (a call in flight while a grant is revoked)."""

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
        await inner(scope, receive, send)

    return guarded


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(os.environ["REMOTE_MCP_TOKEN"]), host="127.0.0.1", port=port,
                log_level="warning")  # fmt: skip
