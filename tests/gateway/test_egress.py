"""The gateway's egress proxy in process, over a real store and a real upstream on
loopback: what a connection must prove, what it may reach, what the audit keeps. (With
real sandboxes and `nua serve`: test_egress_e2e.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from opennua.gateway import Gateway
from opennua.gateway._egress import parse_request
from opennua.gateway._resolve import Refusal
from opennua.secrets import SecretKey, SecretStore
from opennua.store import AuditRecord, Store, open_store
from tests.gateway._running import running_execution


@dataclass
class Pipe:
    """The sandbox's side of one connection: what it sends, what comes back."""

    sent: list[bytes]
    received: bytearray = field(default_factory=bytearray)
    ended: bool = False

    async def read(self) -> bytes:
        return self.sent.pop(0) if self.sent else b""

    async def write(self, data: bytes) -> None:
        self.received += data

    async def write_eof(self) -> None:
        self.ended = True

    async def close(self) -> None:
        self.ended = True


@dataclass
class World:
    store: Store
    gateway: Gateway
    ticket: str
    execution_id: str
    upstream: int

    async def connect(self, *request: bytes, ticket: str | None = None) -> bytes:
        pipe = Pipe(list(request))
        await self.gateway.egress.serve(self.ticket if ticket is None else ticket, pipe)
        return bytes(pipe.received)

    async def audit(self) -> list[AuditRecord]:
        await self.gateway.audit.flush()
        records = await self.store.list_audit(execution_id=self.execution_id, limit=100)
        return [r for r in records if r.server == "egress"]


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    data = await reader.read(65536)
    writer.write(b"echo:" + data)
    await writer.drain()
    writer.close()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    upstream = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with upstream, store:
        secrets = await SecretStore.open(store, SecretKey.generate())
        execution_id, ticket = await running_execution(store, [f"127.0.0.1:{port}"])
        gateway = Gateway(store, secrets)
        try:
            yield World(store, gateway, ticket, execution_id, port)
        finally:
            await gateway.aclose()


async def test_a_listed_port_is_reached_and_audited(world: World) -> None:
    connect = b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % world.upstream
    answer = await world.connect(connect, b"hello")
    assert answer == b"HTTP/1.1 200 Connection Established\r\n\r\necho:hello"
    (record,) = await world.audit()
    assert (record.host, record.port, record.outcome, record.code) == (
        "127.0.0.1", world.upstream, "ok", None,
    )  # fmt: skip
    assert (record.bytes_up, record.bytes_down) == (5, 10)
    assert record.principal_id is not None and record.workspace_id is not None


async def test_what_is_not_listed_is_refused_and_audited(world: World) -> None:
    other = world.upstream + 1 if world.upstream < 65535 else world.upstream - 1
    for request, code in (
        (b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % other, b"egress_denied"),
        (b"CONNECT localhost:%d HTTP/1.1\r\n\r\n" % world.upstream, b"egress_denied"),
        (b"GET http://10.0.0.1:%d/ HTTP/1.1\r\n\r\n" % world.upstream, b"egress_denied"),
        (b"GET https://127.0.0.1/ HTTP/1.1\r\n\r\n", b"bad_request"),
        (b"HELLO\r\n\r\n", b"bad_request"),
    ):
        answer = await world.connect(request)
        assert answer.startswith((b"HTTP/1.1 403", b"HTTP/1.1 400")), answer
        assert b"X-Opennua-Egress: " + code in answer
    refused = [r for r in await world.audit() if r.outcome == "refused"]
    assert [r.code for r in refused].count("egress_denied") == 3
    assert {r.bytes_up for r in refused} == {0}


async def test_a_connection_proves_its_attempt_and_grant(world: World) -> None:
    connect = b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % world.upstream
    assert (await world.connect(connect, ticket="")).startswith(b"HTTP/1.1 401")
    forged = f"gwt.{world.execution_id}.{'0' * 43}"
    assert (await world.connect(connect, ticket=forged)).startswith(b"HTTP/1.1 401")
    # A grant revoked (a token revoked, a member removed): the next connection is refused.
    await world.store.revoke_grant(world.execution_id, time.time(), "token_revoked")
    answer = await world.connect(connect, b"hello")
    assert answer.startswith(b"HTTP/1.1 403") and b"grant_revoked" in answer
    assert b"echo:" not in answer


def test_a_plain_request_goes_in_origin_form_without_proxy_headers() -> None:
    head = (
        b"POST http://Example.ORG:8080/a/b?c=d HTTP/1.1\r\nHost: example.org:8080\r\n"
        b"Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n"
        b"Connection: keep-alive\r\nContent-Length: 2\r\n\r\n"
    )
    request = parse_request(head)
    assert (request.host, request.port, request.connect) == ("example.org", 8080, False)
    assert request.head == (
        b"POST /a/b?c=d HTTP/1.1\r\nHost: example.org:8080\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n"
    )
    connect = parse_request(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n")
    assert (connect.host, connect.port, connect.connect, connect.head) == ("::1", 443, True, b"")
    with pytest.raises(Refusal, match="host:port"):
        parse_request(b"CONNECT example.org HTTP/1.1\r\n\r\n")
