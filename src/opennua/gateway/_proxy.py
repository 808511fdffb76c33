"""The gateway: remote MCP servers (streamable HTTP) are reached only through it.

`POST|DELETE /v1/gateway/mcp/{server}` with `Authorization: Bearer <ticket>` (the
attempt's, see `_tickets`). For every request it checks, reading the store afresh:

1. the ticket is the current attempt's (its hash and epoch) and the execution runs;
2. the execution's grant holds (principal enabled, still a member who may act, the
   token it came with neither revoked nor expired; the snapshot it was granted for) —
   a grant that no longer holds is revoked for good, so the supervisor ends the
   execution `revoked`;
3. the server is a remote server of the session's snapshot, its host is in the plugin's
   egress list, and (for `tools/call`) the tool is allowed by the plugin's policy;

then it resolves the connection's credential references from the secret store, injects
them as headers, forwards, and returns the answer with every injected value redacted.
The caller's own headers are not forwarded (no token passthrough): only the MCP
transport's. Each `tools/call` and each refusal leaves an audit record.

A remote A2A agent (`.a2a.json`) is reached the same way under `A2A_PATH{agent}`: the
same checks (`_check`), credential injection, redaction and audit; its JSON-RPC
`SendMessage` is the one method forwarded.

The standalone server-to-client stream (`GET`) is not offered (405, which the MCP
transport accepts): every answer passes through the redaction whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, quote, urljoin, urlsplit

from opentelemetry.trace import TracerProvider
from starlette.types import Receive, Scope, Send

from opennua.auth import ROLES, Role, grant_problem
from opennua.host import EgressRule
from opennua.secrets import SecretError, SecretKeyError, SecretStore
from opennua.store import (
    Execution,
    GatewayStore,
    GrantRecord,
    NotFound,
    PrincipalRecord,
    SealedSecret,
    StoreError,
    TokenRecord,
)

from . import _tickets
from ._asgi import Incoming, Outgoing, json_out
from ._audit import AUDIT_INTERVAL, AuditLog, record_of
from ._egress import EGRESS_PATH, Egress
from ._redact import REFUSED, Redactor
from ._resolve import (
    A2A,
    REACHABLE,
    Connection,
    Lookup,
    Refusal,
    Resolver,
    ResolverStore,
    addresses_of,
)
from ._spans import A2A_ROUTE, CallSpans


class ProxyStore(ResolverStore, GatewayStore, Protocol):
    """What the gateway checks every call against, resolves and audits."""


if TYPE_CHECKING:
    # Imported with the first upstream call (`_upstream_session`): `nua serve` answers
    # HTTP sooner for not importing a client it may never use.
    import aiohttp

log = logging.getLogger("opennua.gateway")

PATH = "/v1/gateway/mcp/"
#: Remote A2A agents (`.a2a.json`): `POST A2A_PATH{agent}` with a JSON-RPC `SendMessage`.
A2A_PATH = "/v1/gateway/a2a/"
A2A_SEND = "SendMessage"
#: The tool an A2A agent is to the model (`<prefix>__send_message`) and the audit.
A2A_TOOL = "send_message"
MAX_BODY = 4 * 1024 * 1024
#: The MCP streamable HTTP transport's own headers: the only ones forwarded each way.
_FORWARD = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id")
_BACK = ("content-type", "mcp-session-id", "mcp-protocol-version")
#: The A2A JSON-RPC binding's (its version and extensions headers) to an agent.
_A2A_FORWARD = ("content-type", "accept", "a2a-version", "a2a-extensions")
#: A secret's last use is recorded at most this often per process (a write per call
#: would put a commit on every tool call).
_TOUCH_EVERY = 60.0
#: Entries held per in-process map of confirmed tickets and executions' sessions: each
#: is re-read from the store when missing, so a full map is emptied, not grown, and a
#: gateway that lives for months holds no entry per execution it ever served.
_HELD = 10_000


class Gateway:
    """An ASGI app: mount it under `PATH` (tickets come from `issue_ticket`)."""

    def __init__(
        self,
        store: ProxyStore,
        secrets: SecretStore,
        *,
        clock: Callable[[], float] = time.time,
        upstream: Callable[[], aiohttp.ClientSession] | None = None,
        addresses: Lookup = addresses_of,
        audit_interval: float = AUDIT_INTERVAL,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        """`upstream` and `addresses`: how remote servers are reached, and what their names'
        addresses are (a test's stand-ins route names to its own servers)."""
        self._store = store
        self._secrets = secrets
        self._clock = clock
        self._resolver = Resolver(store, addresses)
        # aiohttp, not httpx: its client was two thirds of the gateway's CPU per call
        # (py-spy on benchmarks/gateway.py). Made on first use, inside the running loop.
        self._new_upstream = upstream or _upstream_session
        #: One upstream session per deployment egress list (`_session`).
        self._upstreams: dict[tuple[EgressRule, ...], aiohttp.ClientSession] = {}
        self.audit = AuditLog(store, interval=audit_interval)
        #: A span per answered request, when tracing is on (`_spans`).
        self._spans = CallSpans(tracer_provider)
        #: ticket hash -> (execution_id, epoch), once the store confirmed it
        self._tickets: dict[str, tuple[str, int]] = {}
        #: execution_id -> its session (never changes)
        self._session_of: dict[str, str] = {}
        #: (workspace_id, name) -> a secret opened from the sealed row read by a call; see
        #: `_values` for why this is no cache of whether it may be used.
        self._opened: dict[tuple[str, str], _Opened] = {}
        #: (workspace_id, secret names) -> the values it redacts and the redactor
        self._redactors: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, ...], Redactor]] = {}
        #: The egress proxy: sandboxed code's connections, checked like a call (`_egress`).
        self.egress = Egress(self.admit, self._resolver, self.audit, clock)

    async def aclose(self) -> None:
        await self.audit.aclose()
        for upstream in self._upstreams.values():
            await upstream.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope["path"] == EGRESS_PATH:
            await self.egress.over_websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        response = await self._handle(Incoming.of(scope, receive))
        await response.send(send)  # an SSE server's stream is relayed as it comes

    # -- one request -----------------------------------------------------------------------

    async def _handle(self, request: Incoming) -> Outgoing | _EventStream:
        if not self._spans.enabled:
            return await self._answer(request, {}, {})
        start_ns = time.time_ns()
        call: dict[str, Any] = {}
        message: dict[str, Any] = {}
        response = await self._answer(request, call, message)
        try:
            self._spans.emit(
                call,
                message,
                method=request.method,
                header=request.headers.get("traceparent"),
                status=response.status_code,
                start_ns=start_ns,
            )
        except Exception:  # tracing never fails a call
            log.warning("no span for a gateway call", exc_info=True)
        return response

    async def _answer(
        self, request: Incoming, call: dict[str, Any], message: dict[str, Any]
    ) -> Outgoing | _EventStream:
        """Check and forward one request; `call` and `message` are filled in with what
        was learnt of it (for its span)."""
        started = time.perf_counter()
        route = self._a2a if request.path.startswith(A2A_PATH) else self._mcp
        try:
            return await route(request, call, message, started)
        except Refusal as refusal:
            self._audit(call, "refused", refusal.code, started)
            return _refused(refusal, message)
        except (StoreError, SecretKeyError) as exc:
            log.warning("gateway could not check a call: %s", type(exc).__name__)
            self._audit(call, "error", "unavailable", started)
            return _problem(503, "unavailable", "the gateway cannot check this call now")

    async def _mcp(
        self, request: Incoming, call: dict[str, Any], message: dict[str, Any], started: float
    ) -> Outgoing | _EventStream:
        """A request to a remote MCP server (`PATH{server}`, or an SSE server's stream and
        messages under it)."""
        server, sub = _server_of(request.path)
        call["server"] = server
        if request.method == "GET" and sub != SSE_STREAM:
            return _problem(405, "method_not_allowed", "no standalone stream: POST requests")
        if request.method not in ("GET", "POST", "DELETE"):
            return _problem(405, "method_not_allowed", "POST or DELETE")
        if sub not in ("", SSE_STREAM, SSE_MESSAGES):
            return _problem(404, "not_found", f"no such path under {server}")
        body = b"" if request.method == "GET" else await request.body(MAX_BODY)
        message.update(_message(body))
        if message.get("method") == "tools/call":
            call["tool"] = _caller_text((message.get("params") or {}).get("name", ""))
        checked = await self._check(request, server, call, a2a=False, forward=_FORWARD)
        url = _target(checked.connection, request, sub)
        if request.method == "GET":
            c = checked
            upstream = self._session(c.connection.egress)
            return _EventStream(upstream, request, c.connection, c.headers, c.redact)
        audited = message.get("method") == "tools/call"
        return await self._forward(request, url, body, message, checked, call, started, audited)

    async def _a2a(
        self, request: Incoming, call: dict[str, Any], message: dict[str, Any], started: float
    ) -> Outgoing:
        """A message to a remote A2A agent (`A2A_PATH{agent}`): its JSON-RPC `SendMessage`
        only, the tool `<prefix>__send_message` as the policy names it. A stream
        (`SendStreamingMessage`) is not offered: every answer passes through the redaction
        whole."""
        server = request.path.removeprefix(A2A_PATH).strip("/")
        call["server"], call["route"] = server, A2A_ROUTE
        if request.method != "POST":
            return _problem(405, "method_not_allowed", "POST a JSON-RPC SendMessage")
        body = await request.body(MAX_BODY)
        message.update(_message(body))
        method = message.get("method")
        if method != A2A_SEND:
            name = _caller_text(method)
            raise Refusal("method_not_allowed", f"only {A2A_SEND} reaches an agent, not {name!r}")
        call["tool"] = A2A_TOOL
        checked = await self._check(request, server, call, a2a=True, forward=_A2A_FORWARD)
        url = checked.connection.url
        return await self._forward(request, url, body, message, checked, call, started, True)

    async def _check(
        self,
        request: Incoming,
        server: str,
        call: dict[str, Any],
        *,
        a2a: bool,
        forward: tuple[str, ...],
    ) -> _Checked:
        """The checks every forwarded request passes, MCP or A2A: the ticket is the running
        attempt's, its grant holds, `server` is a remote connection of the session's
        snapshot within the egress list, the tool (`call["tool"]`) is allowed; then the
        connection's credentials, opened, and the headers to send (those of `forward`
        the caller sent, and the credentials)."""
        execution_id, epoch = await self._ticket(request.headers.get("authorization", ""))
        call["execution_id"] = execution_id
        # One read per call once the session is known: the execution, its grant's
        # facts and the connection's sealed secrets (the connection is cached).
        session_id = self._session_of.get(execution_id)
        connection = None
        if session_id is not None:
            connection = await self._resolver.connection(session_id, server, a2a=a2a)
        names = [c.secret for c in connection.credentials] if connection else []
        try:
            facts = await self._store.gateway_facts(execution_id, names)
        except NotFound as exc:
            raise Refusal("unauthorized", "unknown gateway ticket", 401) from exc
        execution = facts.execution
        call["execution"] = execution
        call["principal_id"] = execution.principal_id
        if execution.status != "running" or execution.epoch != epoch:
            # A ticket of an earlier attempt (fenced), or of an execution that ended.
            raise Refusal("execution_not_running", f"execution is {execution.status}")
        workspace_id = await self._check_grant(execution, facts.grant, call)
        if connection is None:
            if len(self._session_of) >= _HELD:
                self._session_of.clear()
            self._session_of[execution_id] = execution.session_id
            connection = await self._resolver.connection(execution.session_id, server, a2a=a2a)
        # What this task's upstream connections may reach (the resolver's check, _pinned).
        REACHABLE.set(connection.egress)
        call["host"] = connection.host
        tool = call.get("tool")
        named = f"{connection.prefix}__{tool}"
        if tool is not None and not connection.policy.allows(named):
            raise Refusal("tool_not_allowed", f"{named} is not an allowed tool")
        call["credential"] = ",".join(c.secret for c in connection.credentials) or None
        values = await self._values(workspace_id, connection, facts.secrets)
        redact = self._redactor(workspace_id, values)
        headers = self._headers(request, connection, values, forward)
        return _Checked(connection, headers, redact)

    async def admit(self, ticket: str, call: dict[str, Any]) -> Execution:
        """The running execution `ticket` proves, its grant checked now, as for every MCP
        request (the egress proxy's check of each connection); `call` is filled in."""
        execution_id, epoch = await self._ticket(f"Bearer {ticket}")
        call["execution_id"] = execution_id
        try:
            facts = await self._store.gateway_facts(execution_id, [])
        except NotFound as exc:
            raise Refusal("unauthorized", "unknown gateway ticket", 401) from exc
        execution = facts.execution
        call["principal_id"] = execution.principal_id
        if execution.status != "running" or execution.epoch != epoch:
            raise Refusal("execution_not_running", f"execution is {execution.status}")
        await self._check_grant(execution, facts.grant, call)
        return execution

    async def _ticket(self, authorization: str) -> tuple[str, int]:
        """The execution and attempt (epoch) the `Authorization` ticket was issued to."""
        scheme, _, ticket = authorization.partition(" ")
        parsed = _tickets.parse(ticket.strip()) if scheme.lower() == "bearer" else None
        if parsed is None:
            raise Refusal("unauthorized", "a gateway ticket is required", 401)
        execution_id, secret = parsed
        secret_hash = _tickets.digest(secret)
        known = self._tickets.get(secret_hash)
        if known is None:
            row = await self._store.get_gateway_ticket(execution_id)
            if row is None or not hmac.compare_digest(row[1], secret_hash):
                raise Refusal("unauthorized", "unknown or replaced gateway ticket", 401)
            if len(self._tickets) >= _HELD:
                self._tickets.clear()
            known = self._tickets[secret_hash] = (execution_id, row[0])
        return known

    async def _check_grant(
        self,
        execution: Execution,
        facts: tuple[GrantRecord, PrincipalRecord | None, str | None, TokenRecord | None] | None,
        call: dict[str, Any],
    ) -> str:
        if facts is None:
            raise Refusal("grant_revoked", "the execution has no grant")
        grant, principal, role, token = facts
        call["workspace_id"] = grant.workspace_id  # a refusal is audited there too
        # The same rule the supervisor renews the grant by (opennua.auth), on facts read now.
        known: Role | None = role if role in ROLES else None
        problem = grant_problem(grant, principal, known, token, self._clock())
        if problem is None and grant.snapshot_digest not in (None, execution.snapshot_digest):
            problem = "snapshot_mismatch"
        if problem is not None:
            # For good: the supervisor's next renewal ends the execution `revoked`.
            await self._store.revoke_grant(execution.execution_id, self._clock(), problem)
            raise Refusal("grant_revoked", f"the execution's grant is revoked: {problem}")
        return grant.workspace_id

    async def _values(
        self, workspace_id: str, connection: Connection, sealed: dict[str, SealedSecret]
    ) -> dict[str, str]:
        """The connection's secret values, from the sealed rows this call read.

        Opening a row (AES-GCM) is skipped when this process already opened that very row:
        same workspace, name, key and sealed bytes (a fresh random nonce each time a value
        is set). Whether the secret exists, and which value it holds, is still what this
        call read: a deleted secret is refused and a replaced or re-keyed one is opened
        anew, from the next call on. An opened value is re-opened at least every
        `_TOUCH_EVERY` seconds, which is also when its last use is recorded."""
        values = {}
        now = self._clock()
        for ref in connection.credentials:
            key = (workspace_id, ref.secret)
            row = sealed.get(ref.secret)
            try:
                if row is None:
                    # Not read with the facts (the call that resolved the session): read it.
                    self._forget(key)
                    value = await self._secrets.get(
                        workspace_id, ref.secret, touch_every=_TOUCH_EVERY
                    )
                else:
                    opened = self._opened.get(key)
                    if (
                        opened is not None
                        and opened.sealed == row.sealed
                        and opened.key_id == row.key_id
                        and now - opened.at < _TOUCH_EVERY
                    ):
                        value = opened.value
                    else:
                        value = await self._secrets.unseal(row, touch_every=_TOUCH_EVERY)
                        self._opened[key] = _Opened(row.sealed, row.key_id, value, now)
            except SecretError as exc:
                self._forget(key)
                raise Refusal("secret_missing", f"credential {ref.secret}: {exc.detail}") from exc
            except SecretKeyError:
                self._forget(key)
                raise
            values[ref.secret] = value
        return values

    def _forget(self, key: tuple[str, str]) -> None:
        """Drop what this process holds of a secret (its opened value, the redactors)."""
        self._opened.pop(key, None)
        workspace_id, name = key
        for held in [k for k in self._redactors if k[0] == workspace_id and name in k[1]]:
            del self._redactors[held]

    def _redactor(self, workspace_id: str, values: dict[str, str]) -> Redactor:
        """The redactor of these values (building one compiles a pattern per value)."""
        key = (workspace_id, tuple(values))
        held = self._redactors.get(key)
        current = tuple(values.values())
        if held is None or held[0] != current:
            held = self._redactors[key] = (current, Redactor(values))
        return held[1]

    def _headers(
        self,
        request: Incoming,
        connection: Connection,
        values: dict[str, str],
        forward: tuple[str, ...],
    ) -> dict[str, str]:
        """The transport's headers of the request, and the connection's credentials."""
        headers = {k: v for k in forward if (v := request.headers.get(k)) is not None}
        for ref in connection.credentials:
            value = ref.prefix + values[ref.secret]
            if not value.isascii() or "\n" in value or "\r" in value:
                raise Refusal("secret_unusable", f"secret {ref.secret} cannot be an HTTP header")
            headers[ref.header] = value
        return headers

    def _session(self, egress: tuple[EgressRule, ...]) -> aiohttp.ClientSession:
        """The upstream session of the calls whose deployment has this egress list. A
        kept-alive connection was checked against the list of the call that opened it
        (`_pinned`): reused by a call with another list, it would carry that call to an
        address its own list does not allow. Deployments are few and admin-made, so are
        their lists; idle connections close after aiohttp's keep-alive time."""
        upstream = self._upstreams.get(egress)
        if upstream is None:
            upstream = self._upstreams[egress] = self._new_upstream()
        return upstream

    async def _forward(
        self,
        request: Incoming,
        url: str,
        body: bytes,
        message: dict[str, Any],
        checked: _Checked,
        call: dict[str, Any],
        started: float,
        audited: bool,
    ) -> Outgoing:
        """Send the request upstream and answer with what came back, redacted; `audited`:
        a tool call (MCP `tools/call`, A2A `SendMessage`), audited with its outcome."""
        upstream = self._session(checked.connection.egress)
        headers, redact = checked.headers, checked.redact
        import aiohttp  # loaded by now: the session is an aiohttp one

        try:
            async with upstream.request(
                request.method, url, data=body, headers=headers, allow_redirects=False
            ) as answer:
                raw = await answer.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Errors may name the request; the URL carries no credential, but the message
            # is redacted all the same.
            self._audit(call, "error", "upstream_unreachable", started)
            why = redact.text(f"{type(exc).__name__}: {exc}")
            kind = "A2A agent" if checked.connection.transport == A2A else "MCP server"
            return _unreachable(message, f"the {kind} cannot be reached ({why})")
        except asyncio.CancelledError:
            # The caller gave up (a cancelled turn; in-process, its task is this one): the
            # request may have reached the service, so the call is audited all the same.
            self._audit(call, "error", "cancelled", started)
            raise
        content = redact.body(raw, answer.headers.get("content-type", ""))
        if audited:
            outcome, code = _outcome(answer.status, answer.headers, content, message.get("id"))
            self._audit(call, outcome, code, started)
        back = {k: redact.text(v) for k in _BACK if (v := answer.headers.get(k)) is not None}
        return Outgoing(answer.status, content, back)

    def _audit(self, call: dict[str, Any], outcome: str, code: str | None, started: float) -> None:
        call["outcome"], call["code"] = outcome, code
        self.audit.add(record_of(call, outcome, code, started, self._clock()))


#: An SSE server's stream (GET) and where its client posts messages, under
#: `PATH{server}/`: the server's own message path and query (its `endpoint` event) travel
#: in the `u` parameter.
SSE_STREAM = "sse"
SSE_MESSAGES = "messages"


def _server_of(path: str) -> tuple[str, str]:
    """The server a gateway path names, and an SSE server's `sse` or `messages` after it
    (a server's name, URL-decoded, may hold a `/` of its own)."""
    rest = path.removeprefix(PATH).strip("/")
    name, _, last = rest.rpartition("/")
    if name and last in (SSE_STREAM, SSE_MESSAGES):
        return name, last
    return rest, ""


def _target(connection: Connection, request: Incoming, sub: str) -> str:
    """Where a request for `connection` goes upstream. A streamable HTTP server has one
    URL; an SSE server a stream (GET) and the message URL its stream named (POST to
    `messages`), which must be on the server's own origin."""
    if connection.transport != "sse":
        if sub:
            raise Refusal("not_found", f"{connection.server} is not an SSE server", 404)
        return connection.url
    if not sub:
        raise Refusal("not_found", f"{connection.server} is an SSE server: GET its sse", 404)
    if request.method == "GET" and sub == SSE_STREAM:
        return connection.url
    if request.method != "POST" or sub != SSE_MESSAGES:
        raise Refusal("method_not_allowed", "an SSE server: GET its stream, POST messages", 405)
    given = parse_qs(request.query).get("u", [""])[0]
    url = urljoin(connection.url, given)
    if not given or _origin(url) != _origin(connection.url):
        raise Refusal("bad_request", "the message URL is not the SSE server's own", 400)
    return url


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


@dataclass(slots=True)
class _EventStream:
    """An SSE server's stream, relayed event by event: each event's data redacted as a
    JSON-RPC message is, and its `endpoint` (where to post messages) rewritten to the
    gateway's `messages` path. It ends when either side does."""

    upstream: aiohttp.ClientSession
    request: Incoming
    connection: Connection
    headers: dict[str, str]
    redact: Redactor
    status_code: int = 200

    async def send(self, send: Send) -> None:
        import aiohttp

        self.headers["accept"] = "text/event-stream"
        try:
            async with self.upstream.get(
                self.connection.url, headers=self.headers, allow_redirects=False
            ) as answer:
                kind = answer.headers.get("content-type", "")
                if answer.status != 200 or not kind.startswith("text/event-stream"):
                    self.status_code = 502
                    detail = f"the SSE server answered {answer.status} {kind}"
                    await _problem(502, f"upstream_{answer.status}", detail).send(send)
                    return
                start = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
                await send({"type": "http.response.start", "status": 200, "headers": start})
                relay = asyncio.ensure_future(self._relay(answer.content, send))
                gone = asyncio.ensure_future(self.request.disconnected())
                try:
                    await asyncio.wait((relay, gone), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in (relay, gone):
                        task.cancel()
                    await asyncio.gather(relay, gone, return_exceptions=True)
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.status_code = 502
            why = self.redact.text(type(exc).__name__)
            await _problem(502, "upstream_unreachable", why).send(send)

    async def _relay(self, content: aiohttp.StreamReader, send: Send) -> None:
        lines: list[bytes] = []
        async for raw in content:
            line = raw.rstrip(b"\r\n")
            if line:
                lines.append(line)
                continue
            if lines:
                event = self._event(lines)
                lines = []
                if event is not None:
                    await send({"type": "http.response.body", "body": event, "more_body": True})

    def _event(self, lines: list[bytes]) -> bytes | None:
        text = b"\n".join(lines) + b"\n\n"
        if b"event: endpoint" not in lines and b"event:endpoint" not in lines:
            return self.redact.body(text, "text/event-stream")
        data = b"".join(ln.partition(b":")[2].strip() for ln in lines if ln.startswith(b"data:"))
        url = urljoin(self.connection.url, data.decode("utf-8", "replace"))
        if _origin(url) != _origin(self.connection.url):
            return None  # a message URL elsewhere is never offered to the caller
        parts = urlsplit(url)
        given = parts.path + (f"?{parts.query}" if parts.query else "")
        own = f"{PATH}{self.connection.server}/{SSE_MESSAGES}?u={quote(given, safe='')}"
        return f"event: endpoint\ndata: {own}\n\n".encode()


@dataclass(frozen=True, slots=True)
class _Checked:
    """A request that passed the checks: where it goes, what to send, what to redact."""

    connection: Connection
    headers: dict[str, str]
    redact: Redactor


@dataclass(frozen=True, slots=True)
class _Opened:
    sealed: str
    key_id: str
    value: str
    at: float


def _upstream_session() -> aiohttp.ClientSession:
    import aiohttp

    # No total limit: a tool call may stream for minutes; connecting and each read are
    # bounded instead. The caller's cookies are never kept (the jar is a dummy).
    from ._pinned import connector

    timeout = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=300.0)
    return aiohttp.ClientSession(
        connector=connector(),
        timeout=timeout,
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("Content-Type",),  # forwarded as the caller sent it, or not at all
    )


def _caller_text(value: Any) -> str:
    """A name the caller sent, as an audit record may hold it: what is not UTF-8 (a lone
    surrogate) would be refused by the store and hold up every record queued behind it."""
    return str(value)[:200].encode("utf-8", "replace").decode()


def _message(body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise Refusal("bad_request", "the body is not JSON-RPC", 400) from exc
    return value if isinstance(value, dict) else {}


def _outcome(
    status: int, headers: Mapping[str, str], content: bytes, request_id: Any
) -> tuple[str, str | None]:
    if status >= 400:
        return "error", f"upstream_{status}"
    for message in _messages(headers.get("content-type", ""), content):
        if message.get("id") != request_id:
            continue
        if "error" in message:
            return "error", "tool_error"
        result = message.get("result")
        if isinstance(result, dict) and result.get("isError"):
            return "error", "tool_error"
        return "ok", None
    return "ok", None


def _messages(content_type: str, content: bytes) -> list[dict[str, Any]]:
    texts: list[bytes] = []
    if content_type.startswith("text/event-stream"):
        texts = [line[5:].strip() for line in content.splitlines() if line.startswith(b"data:")]
    else:
        texts = [content]
    out: list[dict[str, Any]] = []
    for text in texts:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        out.extend(
            v for v in (value if isinstance(value, list) else [value]) if isinstance(v, dict)
        )
    return out


def _problem(status: int, code: str, detail: str) -> Outgoing:
    body = {"type": "about:blank", "title": code, "status": status, "detail": detail, "code": code}
    return json_out(body, status, "application/problem+json")


def _unreachable(message: dict[str, Any], detail: str) -> Outgoing:
    """A JSON-RPC request gets a JSON-RPC error saying why (the MCP client reports an HTTP
    error only as "Server returned an error response"); anything else a problem."""
    if "id" in message and "method" in message:
        error = {
            "code": REFUSED,
            "message": f"gateway: upstream_unreachable: {detail}",
            "data": {"code": "upstream_unreachable"},
        }
        return json_out({"jsonrpc": "2.0", "id": message["id"], "error": error})
    return _problem(502, "upstream_unreachable", detail)


def _refused(refusal: Refusal, message: dict[str, Any]) -> Outgoing:
    """A refused JSON-RPC request gets a JSON-RPC error (the MCP client hands it to the
    tool call, so the model reads why); anything else a problem document."""
    if "id" in message and "method" in message and refusal.status == 403:
        error = {
            "code": REFUSED,
            "message": f"gateway refused ({refusal.code}): {refusal.detail}",
            "data": {"code": refusal.code},
        }
        return json_out({"jsonrpc": "2.0", "id": message["id"], "error": error})
    return _problem(refusal.status, refusal.code, refusal.detail)
