"""Tools from MCP servers (stdio subprocess, streamable HTTP, or in-process for tests).

A prefixed server's tools reach the model as `server__tool` (Claude Code's `mcp__server__tool`
without its `mcp__`), so two servers' tools cannot collide and a policy glob `server__*`
names one server's tools.

Annotations map onto our tool flags: `readOnlyHint` → kind `read`, idempotent, no approval;
otherwise `destructiveHint` (true by default in the MCP spec) → kind `edit` and approval;
`idempotentHint` → idempotent (safe to re-run with the same key after a crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    create_mcp_http_client,
)
from mcp.shared.exceptions import MCPError
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from opennua.plugins import UndefinedVariable, expand_variables
from opennua.runtime._env import GatewayRoute
from opennua.runtime._errors import RuntimeFailure, ToolError
from opennua.runtime._sandbox import (
    Sandbox,
    confine,
    finish,
    inside,
    prepare,
    sandbox_problem,
)
from opennua.runtime._tools import Tool, ToolContext

#: Where a plugin's directory appears inside the sandbox of its stdio servers.
PLUGIN_MOUNT = "/plugin"
_ROOT_VARIABLE = re.compile(r"\$\{(?:PLUGIN_ROOT|CLAUDE_PLUGIN_ROOT)\}")
_UNCONFINED = Sandbox("none")
#: How much of a failed server's stderr the turn keeps (its last lines).
STDERR_LINES = 20
STDERR_BYTES = 2048
#: Failures of the installation, not of a server: they fail the turn as before.
_OPERATOR_PROBLEMS = frozenset({"sandbox_unavailable", "gateway_unavailable"})


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
    #: Name tools `<prefix>__<tool>` so two servers' tools cannot collide (None: as the
    #: server names them). A plugin's server: its name, or a safe form of it.
    prefix: str | None = None
    #: A plugin's server: `${PLUGIN_ROOT}` in command, args and env names this directory,
    #: and unless the sandbox mode is "none" it runs confined, without network (its
    #: egress, if the deployment allows any, goes through the proxy). Not part of the
    #: digest: where a version is unpacked differs between machines and restarts.
    plugin_root: Path | None = field(default=None, compare=False)
    #: A remote server's transport: streamable HTTP, or the older HTTP+SSE.
    transport: Literal["http", "sse"] = "http"
    #: Fail the turn when it cannot start (the deployment says so); otherwise the turn
    #: goes on without its tools, and the model and the user are told why.
    required: bool = False
    #: What `${VAR}` in command, args and env names: the deployment's `env` and the secrets
    #: the operator put into this server's sandbox. Values, so not part of the digest.
    variables: Mapping[str, str] | None = field(default=None, compare=False)
    #: Values never shown in what the turn records of this server (its stderr): secrets.
    secret_values: Mapping[str, str] | None = field(default=None, compare=False)

    def describe(self) -> dict[str, Any]:
        described = {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "url": self.url,
            "in_process": self.server is not None,
            # A prefix equal to the name is `true`, as it was described before prefixes
            # could differ from names: those definitions keep their digests.
            "prefix": True if self.prefix == self.name else self.prefix or False,
        }
        # Only when set, so that a definition without them keeps the digest it had.
        if self.transport != "http":
            described["transport"] = self.transport
        if self.required:
            described["required"] = True
        return described

    def _target(self, cwd: Path | None = None, sandbox: Sandbox = _UNCONFINED) -> Any:
        """What the MCP client connects to, and for a plugin's stdio server run confined
        its launch (a scratch directory to remove once it ended). Blocking."""
        if self.server is not None:
            return self.server, None
        if self.url is not None:
            return self.url, None
        if self.command is None:
            raise ValueError(f"MCP server {self.name!r} has no command, url or server")
        plugin_root = self.plugin_root
        confined = plugin_root is not None and sandbox.mode != "none" and cwd is not None
        root = str(plugin_root)
        if confined:
            assert plugin_root is not None
            root = inside(sandbox, plugin_root, PLUGIN_MOUNT)

        def expand(value: str) -> str:
            try:
                value = expand_variables(value, self.variables or {})
            except UndefinedVariable as exc:
                raise RuntimeFailure(
                    f"MCP server {self.name!r} is not configured: {exc}", code="mcp_unconfigured"
                ) from None
            return _ROOT_VARIABLE.sub(lambda _: root, value) if plugin_root else value

        command, args = expand(self.command), [expand(a) for a in self.args]
        env = {k: expand(v) for k, v in (self.env or {}).items()}
        if plugin_root is not None:
            env["PLUGIN_ROOT"] = env["CLAUDE_PLUGIN_ROOT"] = root  # servers written for either
        if not confined:
            return StdioServerParameters(command=command, args=args, env=env or None, cwd=cwd), None
        assert plugin_root is not None and cwd is not None
        problem = sandbox_problem(sandbox.mode)
        if problem is not None:
            raise RuntimeFailure(
                f"MCP server {self.name!r} runs in the sandbox, which cannot start: "
                f"{problem}. The operator can install bubblewrap, or run `nua serve "
                "--sandbox none`.",
                code="sandbox_unavailable",
            )
        prepare(sandbox, cwd)
        launch = confine(
            sandbox,
            cwd,
            [command, *args],
            env,
            read_only=[(plugin_root, PLUGIN_MOUNT)],
            long_lived=True,  # a server gets no CPU-time limit: it lives as long as the turn
        )
        params = StdioServerParameters(
            command=launch.argv[0], args=launch.argv[1:], env=launch.env, cwd=cwd
        )
        return params, launch


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
    definition is not trusted to receive a credential). An SSE server is reached with the
    SSE transport, through the gateway as well."""
    if gateway is None:
        raise RuntimeFailure(
            f"MCP server {spec.name!r} is remote and this supervisor has no gateway "
            "(run `nua serve --role all`, or give supervisors --gateway-url)",
            code="gateway_unavailable",
        )
    url = gateway.url.rstrip("/") + GATEWAY_PATH + quote(spec.name, safe="")
    if spec.transport == "sse":
        # Over the loopback even in-process: the stream is relayed as it comes, which an
        # in-process ASGI transport would hold until it ended.
        route = dataclasses.replace(gateway, app=None)

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return gateway_client(route)

        return sse_client(url + "/sse", httpx_client_factory=factory)
    http = await stack.enter_async_context(gateway_client(gateway))
    return streamable_http_client(url, http_client=http)


class McpUnavailable(RuntimeFailure):
    """An MCP server did not start or did not list its tools; the message says why."""

    code = "mcp_unavailable"


class _StderrTail:
    """A stdio server's stderr: passed on to ours (the operator's log, as before), its last
    lines kept to say why the server failed. A thread reads the pipe: it ends when the
    server and our copy of the pipe's write end are closed."""

    def __init__(self, secrets: Mapping[str, str] | None) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w")
        self._lines: deque[str] = deque(maxlen=STDERR_LINES)
        self._secrets = sorted(
            ((n, v) for n, v in (secrets or {}).items() if v), key=lambda p: -len(p[1])
        )
        self._thread = threading.Thread(target=self._pump, args=(read,), daemon=True)
        self._thread.start()

    def _pump(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                try:
                    sys.stderr.buffer.write(raw)
                    sys.stderr.flush()
                except (AttributeError, ValueError, OSError):
                    pass  # no byte-level stderr (captured in tests): keep the tail anyway
                self._lines.append(raw.decode(errors="replace").rstrip("\n"))

    def close(self) -> None:
        self.writer.close()

    def text(self, wait: float = 0.5) -> str:
        """The last lines, with secret values replaced by their names, at most
        `STDERR_BYTES`. Waits briefly for the pipe's last bytes after the server died."""
        self._thread.join(wait)
        text = "\n".join(self._lines)
        for name, value in self._secrets:
            text = text.replace(value, f"[redacted:{name}]")
        return text[-STDERR_BYTES:]


def _why(exc: BaseException) -> tuple[str, str]:
    """(code, message) of a server that failed to start: the gateway's reason when it
    refused or could not reach the server, else what the SDK raised."""
    if isinstance(exc, RuntimeFailure):
        return exc.code, exc.message
    error = _first_mcp_error(exc)
    if error is not None:
        code = error.data.get("code") if isinstance(error.data, dict) else None
        return code or "mcp_error", str(error)
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return "mcp_unavailable", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


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
    sandbox: Sandbox = _UNCONFINED,
    gateway: GatewayRoute | None = None,
) -> list[Tool]:
    """Open `spec` on `stack` (closed with it) and return its tools as ours; a stdio server
    runs in `cwd` (the execution's workspace), a plugin's confined when `sandbox` says so;
    a remote one is reached through `gateway`. Raises `McpUnavailable` saying why it did
    not start (a stdio server's last stderr lines, the gateway's reason), with nothing of
    it left open."""
    own = AsyncExitStack()
    tail: _StderrTail | None = None
    try:
        if spec.url is not None and spec.server is None:
            target = await _via_gateway(own, spec, gateway)
        else:
            target, launch = await asyncio.to_thread(spec._target, cwd, sandbox)
            if launch is not None:
                own.callback(finish, launch)  # after the server (entered later) has stopped
            if isinstance(target, StdioServerParameters):
                tail = _StderrTail(spec.secret_values)
                own.callback(tail.close)
                target = stdio_client(target, errlog=tail.writer)
        client = await own.enter_async_context(Client(target, cache=None))
        listed = await client.list_tools()
    except Exception as exc:
        await _close_quietly(own)
        if isinstance(exc, RuntimeFailure) and exc.code in _OPERATOR_PROBLEMS:
            raise  # not this server's: every server of its kind would fail the same way
        code, message = _why(exc)
        if tail is not None and (stderr := tail.text()):
            message = f"{message}\n{stderr}"
        raise McpUnavailable(f"MCP server {spec.name!r}: {message}", code=code) from exc
    stack.push_async_callback(own.aclose)
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
                name=f"{spec.prefix}__{t.name}" if spec.prefix else t.name,
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


async def _close_quietly(stack: AsyncExitStack) -> None:
    with contextlib.suppress(Exception):  # a server that failed to start may fail to stop
        await stack.aclose()
