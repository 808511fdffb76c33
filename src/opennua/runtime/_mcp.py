"""Tools from MCP servers (stdio subprocess, streamable HTTP, or in-process for tests).

Annotations map onto our tool flags: `readOnlyHint` → kind `read`, idempotent, no approval;
otherwise `destructiveHint` (true by default in the MCP spec) → kind `edit` and approval;
`idempotentHint` → idempotent (safe to re-run with the same key after a crash).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from mcp import Client, StdioServerParameters

from opennua.runtime._tools import Tool, ToolContext
from opennua.runtime.errors import ToolError


@dataclass(frozen=True)
class McpServer:
    """An MCP server the agent uses. Exactly one of `command` (stdio), `url` (streamable
    HTTP) or `server` (an in-process `MCPServer`, tests only) is set."""

    name: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    url: str | None = None
    server: Any = field(default=None, compare=False)
    #: Prefix tool names with `<name>_` so two servers' tools cannot collide.
    prefix: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "url": self.url,
            "in_process": self.server is not None,
            "prefix": self.prefix,
        }

    def _target(self) -> Any:
        if self.server is not None:
            return self.server
        if self.url is not None:
            return self.url
        if self.command is not None:
            return StdioServerParameters(
                command=self.command, args=list(self.args), env=dict(self.env or {}) or None
            )
        raise ValueError(f"MCP server {self.name!r} has no command, url or server")


def _flags(annotations: mcp_types.ToolAnnotations | None) -> tuple[str, bool, bool]:
    """(kind, requires_approval, idempotent) from MCP annotations."""
    read_only = bool(annotations and annotations.read_only_hint)
    if read_only:
        return "read", False, True
    destructive = annotations is None or annotations.destructive_hint is not False
    idempotent = bool(annotations and annotations.idempotent_hint)
    return ("edit" if destructive else "other"), destructive, idempotent


def _result_text(result: mcp_types.CallToolResult) -> str:
    texts = [c.text for c in result.content if isinstance(c, mcp_types.TextContent)]
    if not texts and result.structured_content is not None:
        return json.dumps(result.structured_content)
    return "\n".join(texts)


async def connect_mcp(stack: AsyncExitStack, spec: McpServer) -> list[Tool]:
    """Open `spec` on `stack` (closed with it) and return its tools as ours."""
    client = await stack.enter_async_context(Client(spec._target(), cache=None))
    listed = await client.list_tools()
    tools = []
    for t in listed.tools:
        kind, approval, idempotent = _flags(t.annotations)
        remote_name = t.name

        async def invoke(ctx: ToolContext, _remote: str = remote_name, **arguments: Any) -> str:
            result = await client.call_tool(_remote, arguments)
            text = _result_text(result)
            if result.is_error:
                raise ToolError(text or f"MCP tool {_remote} failed")
            return text

        tools.append(
            Tool(
                name=f"{spec.name}_{t.name}" if spec.prefix else t.name,
                description=t.description or "",
                kind=kind,  # type: ignore[arg-type]
                title=(t.annotations.title if t.annotations and t.annotations.title else t.name),
                requires_approval=approval,
                idempotent=idempotent,
                fn=invoke,
                args_model=None,
                takes_context=True,
                json_schema=t.input_schema,
            )
        )
    return tools
