"""The egress proxy: the only way out of the sandbox (docs/gateway.md, "The egress proxy").

A sandboxed program speaks plain HTTP proxy protocol to the forwarder in its sandbox:
`CONNECT host:port` (HTTPS and anything else over TCP) or a request with an absolute
`http://` URL. Each connection reaches this class with the attempt's gateway ticket:
in-process from the supervisor's relay (`nua serve --role all`), or over a WebSocket at
`EGRESS_PATH` from a supervisor elsewhere (`--gateway-url`), whose binary messages carry
the bytes each way (an empty message ends that direction).

For every connection, before a byte goes out: the ticket is the running attempt's and its
grant holds (as for an MCP call); the host and port are on the *deployment's* egress list
(the plugin's own list is a request); the name is resolved here, never in the sandbox,
and only if the list names it; each address is checked (a name entry reaches public
addresses only, an address entry its own) and the connection is made to a checked
address, so a name that resolves elsewhere on the next lookup (DNS rebinding) gains
nothing. Every connection, allowed or refused, is one audit record: host, port, bytes
each way, outcome and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from starlette.types import Receive, Scope, Send

from opennua.host import EgressRule, may_resolve, permitted
from opennua.store import Execution, StoreError

from ._audit import AuditLog, record_of
from ._resolve import Refusal, Resolver, addresses_of

log = logging.getLogger("opennua.gateway")

EGRESS_PATH = "/v1/gateway/egress"
#: A request head larger than this is refused (a proxy request is a line and headers).
HEAD_LIMIT = 16 * 1024
#: Seconds to receive the request head, to resolve a name, to connect.
HEAD_TIMEOUT, CONNECT_TIMEOUT = 30.0, 10.0
_CHUNK = 256 * 1024
#: Not forwarded to the server of a plain HTTP request: they speak to the proxy (or hop).
_HOP = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive", b"te"}
_STATUS = {400: "Bad Request", 403: "Forbidden", 407: "Proxy Authentication Required"}
_STATUS |= {401: "Unauthorized", 502: "Bad Gateway", 503: "Service Unavailable"}


class Duplex(Protocol):
    """One side of a tunnel: `read` returns b"" once that direction ended."""

    async def read(self) -> bytes: ...
    async def write(self, data: bytes) -> None: ...
    async def write_eof(self) -> None: ...
    async def close(self) -> None: ...


@dataclass(slots=True)
class StreamDuplex:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def read(self) -> bytes:
        return await self.reader.read(_CHUNK)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def write_eof(self) -> None:
        if self.writer.can_write_eof() and not self.writer.is_closing():
            self.writer.write_eof()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


@dataclass(slots=True)
class _WebSocketDuplex:
    """An ASGI WebSocket as a tunnel side: binary messages, an empty one for the end."""

    receive: Receive
    send: Send
    ended: bool = False
    closed: bool = False

    async def read(self) -> bytes:
        if self.ended:
            return b""
        message = await self.receive()
        data = message.get("bytes") if message["type"] == "websocket.receive" else None
        if not data:
            self.ended = True
            return b""
        return bytes(data)

    async def write(self, data: bytes) -> None:
        if data and not self.closed:
            await self.send({"type": "websocket.send", "bytes": data})

    async def write_eof(self) -> None:
        if not self.closed:
            await self.send({"type": "websocket.send", "bytes": b""})

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                await self.send({"type": "websocket.close", "code": 1000})


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    host: str
    port: int
    connect: bool
    #: What goes to the server first: nothing for CONNECT, else the rewritten head.
    head: bytes


def parse_request(head: bytes) -> ProxyRequest:
    """A proxy request head (request line and headers, CRLF CRLF included). Raises
    `Refusal` (400) for anything else."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise Refusal("bad_request", "not an HTTP/1.x proxy request", 400)
    method, target, version = parts
    text = target.decode("ascii", "replace")
    if method == b"CONNECT":
        host, port = _authority(text)
        return ProxyRequest(host, port, True, b"")
    url = urlsplit(text)
    if url.scheme.lower() != "http" or not url.hostname:
        raise Refusal(
            "bad_request", "give an absolute http:// URL, or use CONNECT (https and others)", 400
        )
    try:
        port = url.port or 80
    except ValueError:
        raise Refusal("bad_request", f"bad port in {text!r}", 400) from None
    path = url.path or "/"
    origin = path + (f"?{url.query}" if url.query else "")
    headers = [
        line for line in lines[1:] if line and line.split(b":", 1)[0].strip().lower() not in _HOP
    ]
    if not any(line.lower().startswith(b"host:") for line in headers):
        headers.insert(0, b"Host: " + url.netloc.encode("ascii", "replace"))
    first = b" ".join((method, origin.encode("ascii", "replace"), version))
    rewritten = b"\r\n".join([first, *headers, b"Connection: close", b"", b""])
    return ProxyRequest(url.hostname.lower(), port, False, rewritten)


def _authority(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise Refusal("bad_request", f"CONNECT needs host:port, not {text!r}", 400)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.lower(), int(port)


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


Admit = Callable[[str, dict[str, Any]], Awaitable[Execution]]


class Egress:
    """The egress proxy's checks and its tunnels (part of the `Gateway`)."""

    def __init__(
        self,
        admit: Admit,
        resolver: Resolver,
        audit: AuditLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._admit = admit
        self._resolver = resolver
        self._audit_log = audit
        self._clock = clock

    async def over_stream(
        self, ticket: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One connection from a relay in this process."""
        await self.serve(ticket, StreamDuplex(reader, writer))

    async def over_websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One connection from a relay in another process, tunnelled over a WebSocket."""
        if (await receive())["type"] != "websocket.connect":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        scheme, _, ticket = headers.get("authorization", "").partition(" ")
        await send({"type": "websocket.accept"})
        down = _WebSocketDuplex(receive, send)
        await self.serve(ticket.strip() if scheme.lower() == "bearer" else "", down)

    async def serve(self, ticket: str, down: Duplex) -> None:
        started = time.perf_counter()
        call: dict[str, Any] = {}
        counts = [0, 0]
        try:
            try:
                head, rest = await asyncio.wait_for(_read_head(down), HEAD_TIMEOUT)
            except TimeoutError:
                raise Refusal("bad_request", "no proxy request arrived", 400) from None
            request = parse_request(head)
            call["host"], call["port"] = request.host, request.port
            if not ticket:
                raise Refusal("unauthorized", "a gateway ticket is required", 401)
            execution = await self._admit(ticket, call)
            rules = await self._resolver.egress(execution.session_id)
            reader, writer = await self._open(rules, request, call)
        except Refusal as refusal:
            self._audit(call, "refused", refusal.code, started, counts)
            with contextlib.suppress(Exception):
                await down.write(_answer(refusal))
            await down.close()
            return
        except StoreError as exc:
            log.warning("egress could not check a connection: %s", type(exc).__name__)
            self._audit(call, "error", "unavailable", started, counts)
            await down.close()
            return
        upstream = StreamDuplex(reader, writer)
        outcome, code = "ok", None
        try:
            if request.connect:
                await down.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            first = request.head + rest
            if first:
                counts[0] += len(first)
                await upstream.write(first)
            await _relay(down, upstream, counts)
        except asyncio.CancelledError:
            outcome, code = "error", "cancelled"
            raise
        except OSError:
            outcome, code = "error", "connection_lost"
        finally:
            self._audit(call, outcome, code, started, counts)
            await upstream.close()
            await down.close()

    async def _open(
        self, rules: tuple[EgressRule, ...], request: ProxyRequest, call: dict[str, Any]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = request.host, request.port
        literal = _literal(host)
        if literal is not None:
            addresses = [literal]
        elif may_resolve(rules, host, port):
            addresses = await addresses_of(host, port)
        else:
            raise Refusal("egress_denied", f"{host}:{port} is not in the deployment's egress list")
        allowed = [a for a in addresses if permitted(rules, host, port, a)]
        if not allowed and not may_resolve(rules, host, port):
            raise Refusal("egress_denied", f"{host}:{port} is not in the deployment's egress list")
        if not allowed:
            which = ", ".join(sorted({str(a) for a in addresses}))
            where = f"{host} is" if literal is not None else f"{host} resolves to {which},"
            raise Refusal(
                "egress_address_denied",
                f"{where} not a public address: only an admin's address entry "
                "(an IP or network) allows it",
            )
        call["address"] = str(allowed[0])
        last: Exception | None = None
        for address in allowed:  # the checked addresses, and only them
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(str(address), port), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError) as exc:
                last = exc
        raise Refusal("upstream_unreachable", f"{host}:{port}: {type(last).__name__}: {last}", 502)

    def _audit(
        self,
        call: dict[str, Any],
        outcome: str,
        code: str | None,
        started: float,
        counts: list[int],
    ) -> None:
        call["server"] = "egress"
        record = record_of(
            call, outcome, code, started, self._clock(),
            port=call.get("port"), bytes_up=counts[0], bytes_down=counts[1],
        )  # fmt: skip
        self._audit_log.add(record)


async def _read_head(down: Duplex) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise Refusal("bad_request", f"a proxy request head is at most {HEAD_LIMIT} bytes", 400)
        chunk = await down.read()
        if not chunk:
            raise Refusal("bad_request", "the connection ended before its request", 400)
        data += chunk
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


async def _relay(down: Duplex, upstream: Duplex, counts: list[int]) -> None:
    """Bytes both ways until both directions ended (`counts`: up, down)."""

    async def pump(source: Duplex, target: Duplex, index: int) -> None:
        while chunk := await source.read():
            counts[index] += len(chunk)
            await target.write(chunk)
        await target.write_eof()

    tasks = [
        asyncio.ensure_future(pump(down, upstream, 0)),
        asyncio.ensure_future(pump(upstream, down, 1)),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # an error ends the tunnel both ways
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _answer(refusal: Refusal) -> bytes:
    body = f"opennua egress proxy: {refusal.code}: {refusal.detail}\n".encode()
    status = refusal.status if refusal.status in _STATUS else 403
    return (
        f"HTTP/1.1 {status} {_STATUS[status]}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        f"X-Opennua-Egress: {refusal.code}\r\nConnection: close\r\n\r\n"
    ).encode() + body
