"""Tools from MCP servers (stdio subprocess, streamable HTTP, or in-process for tests).

A prefixed server's tools reach the model as `server__tool` (Claude Code's `mcp__server__tool`
without its `mcp__`), so two servers' tools cannot collide and a policy glob `server__*`
names one server's tools.

Annotations map onto our tool flags: `readOnlyHint` → kind `read`, idempotent, no approval;
otherwise `destructiveHint` (true by default in the MCP spec) → kind `edit` and approval;
`idempotentHint` → idempotent (safe to re-run with the same key after a crash).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    create_mcp_http_client,
)
from mcp.shared.exceptions import MCPError
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from opennua.runtime._env import GatewayRoute
from opennua.runtime._errors import RuntimeFailure, ToolError
from opennua.runtime._sandbox import WORKSPACE, SandboxMode, bwrap_argv, sandbox_problem
from opennua.runtime._tools import Tool, ToolContext

#: Where a plugin's directory appears inside the sandbox of its stdio servers.
PLUGIN_MOUNT = "/plugin"
_ROOT_VARIABLE = re.compile(r"\$\{(?:PLUGIN_ROOT|CLAUDE_PLUGIN_ROOT)\}")


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
    #: Prefix tool names with `<name>__` so two servers' tools cannot collide.
    prefix: bool = False
    #: A plugin's server: `${PLUGIN_ROOT}` in command, args and env names this directory,
    #: and under the "bwrap" sandbox mode it runs confined. Not part of the digest: where
    #: a version is unpacked differs between machines and restarts.
    plugin_root: Path | None = field(default=None, compare=False)
    network: bool = False  # a confined server keeps the network (the egress policy allows)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "url": self.url,
            "in_process": self.server is not None,
            "prefix": self.prefix,
        }

    def _target(self, cwd: Path | None = None, sandbox: SandboxMode = "none") -> Any:
        if self.server is not None:
            return self.server
        if self.url is not None:
            return self.url
        if self.command is None:
            raise ValueError(f"MCP server {self.name!r} has no command, url or server")
        confined = self.plugin_root is not None and sandbox == "bwrap" and cwd is not None
        root = PLUGIN_MOUNT if confined else str(self.plugin_root)

        def expand(value: str) -> str:
            return _ROOT_VARIABLE.sub(lambda _: root, value) if self.plugin_root else value

        command, args = expand(self.command), [expand(a) for a in self.args]
        env = {k: expand(v) for k, v in (self.env or {}).items()}
        if self.plugin_root is not None:
            env["PLUGIN_ROOT"] = env["CLAUDE_PLUGIN_ROOT"] = root  # servers written for either
        if confined:
            assert self.plugin_root is not None and cwd is not None
            problem = sandbox_problem(sandbox)
            if problem is not None:
                raise RuntimeFailure(
                    f"MCP server {self.name!r} runs under bubblewrap, which cannot start: "
                    f"{problem}. The operator can install it, or run `nua serve --sandbox "
                    "none`.",
                    code="sandbox_unavailable",
                )
            env["HOME"] = WORKSPACE
            argv = bwrap_argv(
                cwd, [command, *args], network=self.network, read_only=_read_only(self)
            )
            command, args = argv[0], argv[1:]
        return StdioServerParameters(command=command, args=args, env=env or None, cwd=cwd)


def _read_only(spec: McpServer) -> list[tuple[Path, str]]:
    """The plugin at /plugin and, when they are outside /usr, this interpreter and its
    virtual environment at their own paths: a server written with the `mcp` SDK, run by
    `python3` on PATH, finds it as opennua does."""
    assert spec.plugin_root is not None
    binds = [(spec.plugin_root, PLUGIN_MOUNT)]
    for prefix in dict.fromkeys((Path(sys.base_prefix), Path(sys.prefix))):
        if not prefix.is_relative_to("/usr"):
            binds.append((prefix, str(prefix)))
    return binds


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


GATEWAY_PATH = "/v1/gateway/mcp/"
#: Only W3C Trace Context (no baggage) goes to the gateway.
_PROPAGATOR = TraceContextTextMapPropagator()


def _first_mcp_error(exc: BaseException) -> MCPError | None:
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_mcp_error(inner)
            if found is not None:
                return found
    return None


async def _traceparent(request: Any) -> None:
    """The W3C `traceparent` of the span current where the request was made (the tool
    call's `execute_tool`: the MCP SDK sends each request in its caller's context), so the
    gateway's span of the call is its child. Nothing when no span is (tracing off)."""
    _PROPAGATOR.inject(request.headers)


async def _via_gateway(stack: AsyncExitStack, spec: McpServer, gateway: GatewayRoute | None) -> Any:
    """A remote server is reached only through the gateway, which resolves where it is and
    injects its credential; the runtime sends its ticket and nothing else (the URL in the
    definition is not trusted to receive a credential)."""
    if gateway is None:
        raise RuntimeFailure(
            f"MCP server {spec.name!r} is remote and this supervisor has no gateway "
            "(run `nua serve --role all`, or give supervisors --gateway-url)",
            code="gateway_unavailable",
        )
    http = await stack.enter_async_context(gateway_client(gateway))
    url = gateway.url.rstrip("/") + GATEWAY_PATH + spec.name
    return streamable_http_client(url, http_client=http)


def gateway_client(gateway: GatewayRoute) -> httpx2.AsyncClient:
    """The HTTP client of the MCP transport to the gateway: it sends the ticket and the
    trace context; to a gateway in this process, it hands the request to its app."""
    headers = {"Authorization": f"Bearer {gateway.ticket}"}
    if gateway.app is None:
        http = create_mcp_http_client(headers=headers)
    else:
        # py-spy on benchmarks/gateway.py: the loopback hop (the client's h11 framing,
        # uvicorn's parse, two socket round trips) cost more than all the gateway checks.
        http = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            transport=httpx2.ASGITransport(app=gateway.app),
        )
    http.event_hooks["request"].append(_traceparent)
    return http


async def connect_mcp(
    stack: AsyncExitStack,
    spec: McpServer,
    *,
    cwd: Path | None = None,
    sandbox: SandboxMode = "none",
    gateway: GatewayRoute | None = None,
) -> list[Tool]:
    """Open `spec` on `stack` (closed with it) and return its tools as ours; a stdio server
    runs in `cwd` (the execution's workspace), a plugin's confined when `sandbox` says so;
    a remote one is reached through `gateway`."""
    if spec.url is not None and spec.server is None:
        target = await _via_gateway(stack, spec, gateway)
    else:
        target = spec._target(cwd, sandbox)
    try:
        client = await stack.enter_async_context(Client(target, cache=None))
        listed = await client.list_tools()
    except (MCPError, BaseExceptionGroup) as exc:
        # E.g. the gateway refusing the connection (egress, an ended execution): why, as
        # the turn's error, instead of an internal error. The SDK raises it in a group.
        error = _first_mcp_error(exc)
        if error is None:
            raise
        why = error.data.get("code") if isinstance(error.data, dict) else None
        raise RuntimeFailure(f"MCP server {spec.name!r}: {error}", code=why or "mcp_error") from exc
    tools = []
    for t in listed.tools:
        kind, approval, idempotent = _flags(t.annotations)
        remote_name = t.name

        async def invoke(ctx: ToolContext, _remote: str = remote_name, **arguments: Any) -> str:
            try:
                result = await client.call_tool(_remote, arguments)
            except MCPError as exc:  # a JSON-RPC error, e.g. the gateway refusing the call
                why = exc.data.get("code") if isinstance(exc.data, dict) else None
                if why == "grant_revoked" and gateway is not None and gateway.on_revoked:
                    await gateway.on_revoked()
                raise ToolError(f"MCP tool {_remote}: {exc}") from exc
            text = _result_text(result)
            if result.is_error:
                raise ToolError(text or f"MCP tool {_remote} failed")
            return text

        tools.append(
            Tool(
                name=f"{spec.name}__{t.name}" if spec.prefix else t.name,
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
