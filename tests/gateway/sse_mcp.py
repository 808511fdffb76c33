"""A remote MCP server on the older HTTP+SSE transport (the `mcp` SDK's), that requires a
bearer token: `python sse_mcp.py PORT` with the token in REMOTE_MCP_TOKEN. `whoami`
echoes the Authorization header it got (a service leaking the credential)."""

from __future__ import annotations

import contextvars
import hmac
import os
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)
server = MCPServer("events")
_header: contextvars.ContextVar[str] = contextvars.ContextVar("header", default="")


@server.tool(annotations=READ)
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a short definition (over SSE)"


@server.tool(annotations=READ)
def whoami() -> str:
    """Say which credential the call came with."""
    return f"you called with {_header.get()}"


def app(token: str) -> Any:
    inner = server.sse_app()
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, expected):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            _header.set(got.decode())
        await inner(scope, receive, send)

    return guarded


if __name__ == "__main__":
    uvicorn.run(app(os.environ["REMOTE_MCP_TOKEN"]), host="127.0.0.1", port=int(sys.argv[1]),
                log_level="warning")  # fmt: skip
