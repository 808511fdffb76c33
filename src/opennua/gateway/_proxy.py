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

The standalone server-to-client stream (`GET`) is not offered (405, which the MCP
transport accepts): every answer passes through the redaction whole.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from opentelemetry.trace import TracerProvider
from starlette.types import Receive, Scope, Send
from ulid import ULID

from opennua.auth import ROLES, Role, grant_problem
from opennua.secrets import SecretError, SecretKeyError, SecretStore
from opennua.store import (
    AuditRecord,
    Execution,
    GrantRecord,
    NotFound,
    PrincipalRecord,
    SealedSecret,
    Store,
    StoreError,
    TokenRecord,
)

from . import _tickets
from ._asgi import Incoming, Outgoing, json_out
from ._audit import AUDIT_INTERVAL, AuditLog
from ._redact import Redactor
from ._resolve import Connection, Refusal, Resolver
from ._spans import CallSpans

log = logging.getLogger("opennua.gateway")

PATH = "/v1/gateway/mcp/"
#: The JSON-RPC error code of a refused call (`data.code` says why; runtime/_mcp.py reads it).
REFUSED = -32003
MAX_BODY = 4 * 1024 * 1024
#: The MCP streamable HTTP transport's own headers: the only ones forwarded each way.
_FORWARD = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id")
_BACK = ("content-type", "mcp-session-id", "mcp-protocol-version")
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
        store: Store,
        secrets: SecretStore,
        *,
        clock: Callable[[], float] = time.time,
        upstream: Callable[[], aiohttp.ClientSession] | None = None,
        audit_interval: float = AUDIT_INTERVAL,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self._store = store
        self._secrets = secrets
        self._clock = clock
        self._resolver = Resolver(store)
        # aiohttp, not httpx: its client was two thirds of the gateway's CPU per call
        # (py-spy on benchmarks/gateway.py). Made on first use, inside the running loop.
        self._new_upstream = upstream or _upstream_session
        self._upstream: aiohttp.ClientSession | None = None
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

    async def aclose(self) -> None:
        await self.audit.aclose()
        if self._upstream is not None:
            await self._upstream.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        response = await self._handle(Incoming.of(scope, receive))
        await response.send(send)

    # -- one request -----------------------------------------------------------------------

    async def _handle(self, request: Incoming) -> Outgoing:
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
    ) -> Outgoing:
        """Check and forward one request; `call` and `message` are filled in with what
        was learnt of it (for its span)."""
        started = time.perf_counter()
        server = request.path.removeprefix(PATH).strip("/")
        call["server"] = server
        try:
            if request.method == "GET":
                return _problem(405, "method_not_allowed", "no standalone stream: POST requests")
            if request.method not in ("POST", "DELETE"):
                return _problem(405, "method_not_allowed", "POST or DELETE")
            body = await request.body(MAX_BODY)
            message.update(_message(body))
            if message.get("method") == "tools/call":
                # The caller's text: what is not UTF-8 (a lone surrogate) would be refused
                # by the store and hold up every audit record queued behind it.
                name = str((message.get("params") or {}).get("name", ""))[:200]
                call["tool"] = name.encode("utf-8", "replace").decode()
            execution_id, epoch = await self._ticket(request)
            call["execution_id"] = execution_id
            # One read per call once the session is known: the execution, its grant's
            # facts and the connection's sealed secrets (the connection is cached).
            session_id = self._session_of.get(execution_id)
            connection = None
            if session_id is not None:
                connection = await self._resolver.connection(session_id, server)
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
                connection = await self._resolver.connection(execution.session_id, server)
            call["host"] = connection.host
            tool = call.get("tool")
            if tool is not None and not connection.policy.allows(f"{server}__{tool}"):
                raise Refusal("tool_not_allowed", f"{server}__{tool} is not an allowed tool")
            call["credential"] = ",".join(c.secret for c in connection.credentials) or None
            values = await self._values(workspace_id, connection, facts.secrets)
            redact = self._redactor(workspace_id, values)
            return await self._forward(
                request, connection, body, message, values, redact, call, started
            )
        except Refusal as refusal:
            self._audit(call, "refused", refusal.code, started)
            return _refused(refusal, message)
        except (StoreError, SecretKeyError) as exc:
            log.warning("gateway could not check a call: %s", type(exc).__name__)
            self._audit(call, "error", "unavailable", started)
            return _problem(503, "unavailable", "the gateway cannot check this call now")

    async def _ticket(self, request: Incoming) -> tuple[str, int]:
        """The execution and attempt (epoch) the request's ticket was issued to."""
        scheme, _, ticket = request.headers.get("authorization", "").partition(" ")
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
        """The redactor of these values (building one JSON-escapes each value 6 ways)."""
        key = (workspace_id, tuple(values))
        held = self._redactors.get(key)
        current = tuple(values.values())
        if held is None or held[0] != current:
            held = self._redactors[key] = (current, Redactor(values))
        return held[1]

    async def _forward(
        self,
        request: Incoming,
        connection: Connection,
        body: bytes,
        message: dict[str, Any],
        values: dict[str, str],
        redact: Redactor,
        call: dict[str, Any],
        started: float,
    ) -> Outgoing:
        headers = {k: v for k in _FORWARD if (v := request.headers.get(k)) is not None}
        for ref in connection.credentials:
            value = ref.prefix + values[ref.secret]
            if not value.isascii() or "\n" in value or "\r" in value:
                raise Refusal("secret_unusable", f"secret {ref.secret} cannot be an HTTP header")
            headers[ref.header] = value
        if self._upstream is None:
            self._upstream = self._new_upstream()
        try:
            async with self._upstream.request(
                request.method, connection.url, data=body, headers=headers, allow_redirects=False
            ) as answer:
                raw = await answer.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Errors may name the request; the URL carries no credential, but the message
            # is redacted all the same.
            self._audit(call, "error", "upstream_unreachable", started)
            return _problem(502, "upstream_unreachable", redact.text(f"{type(exc).__name__}"))
        except asyncio.CancelledError:
            # The caller gave up (a cancelled turn; in-process, its task is this one): the
            # request may have reached the service, so the call is audited all the same.
            self._audit(call, "error", "cancelled", started)
            raise
        content = redact.bytes(raw)
        if message.get("method") == "tools/call":
            outcome, code = _outcome(answer.status, answer.headers, content, message.get("id"))
            self._audit(call, outcome, code, started)
        back = {k: redact.text(v) for k in _BACK if (v := answer.headers.get(k)) is not None}
        return Outgoing(answer.status, content, back)

    def _audit(self, call: dict[str, Any], outcome: str, code: str | None, started: float) -> None:
        call["outcome"], call["code"] = outcome, code
        now = self._clock()
        self.audit.add(
            AuditRecord(
                audit_id=_audit_id(now),
                at=now,
                server=str(call.get("server", ""))[:200],
                outcome=outcome,
                code=code,
                latency_ms=(time.perf_counter() - started) * 1000,
                workspace_id=call.get("workspace_id"),
                principal_id=call.get("principal_id"),
                execution_id=call.get("execution_id"),
                tool=call.get("tool"),
                host=call.get("host"),
                credential=call.get("credential"),
            )
        )


@dataclass(frozen=True, slots=True)
class _Opened:
    sealed: str
    key_id: str
    value: str
    at: float


def _upstream_session() -> aiohttp.ClientSession:
    # No total limit: a tool call may stream for minutes; connecting and each read are
    # bounded instead. The caller's cookies are never kept (the jar is a dummy).
    timeout = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=300.0)
    return aiohttp.ClientSession(
        timeout=timeout,
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("Content-Type",),  # forwarded as the caller sent it, or not at all
    )


def _audit_id(now: float) -> str:
    return f"aud_{ULID.from_timestamp(now)}"


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
