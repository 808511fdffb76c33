"""The gateway's upstream connections look a name up through a resolver that keeps only the
addresses the current call may reach (gateway/_pinned.py): a name that looked public when
the call was checked but resolves to loopback when the connection is made (DNS rebinding)
does not connect there, unless the deployment listed that address; and a connection kept
alive for one deployment's call is not reused by a call with another egress list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from opennua.gateway import Gateway
from opennua.gateway._pinned import CheckedResolver, connector
from opennua.gateway._resolve import REACHABLE
from opennua.host import parse_rules

HITS: list[str] = []


@pytest.fixture
async def local_port() -> AsyncIterator[int]:
    """A server on 127.0.0.1 that answers every request with 200 (and notes it in HITS)."""
    app = web.Application()
    HITS.clear()

    async def hello(request: web.Request) -> web.Response:
        HITS.append(request.path)
        return web.Response(text="inside")

    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port
    finally:
        await runner.cleanup()


async def _get(url: str) -> int:
    async with (
        aiohttp.ClientSession(connector=connector()) as session,
        session.get(url) as answer,
    ):
        return answer.status


async def test_a_name_that_resolves_to_loopback_does_not_connect_without_an_address_entry(
    local_port: int,
) -> None:
    REACHABLE.set(parse_rules(["localhost:1-65535"]))  # a name entry is not an address entry
    with pytest.raises(aiohttp.ClientConnectorError):
        await _get(f"http://localhost:{local_port}/")
    assert HITS == []


async def test_the_same_name_connects_where_the_deployment_lists_the_address(
    local_port: int,
) -> None:
    REACHABLE.set(parse_rules([f"127.0.0.1:{local_port}"]))
    assert await _get(f"http://localhost:{local_port}/") == 200
    assert HITS == ["/"]


async def test_the_resolver_keeps_public_addresses_and_drops_the_others() -> None:
    resolver = CheckedResolver()
    try:
        REACHABLE.set(())
        with pytest.raises(OSError, match="localhost resolves to"):
            await resolver.resolve("localhost", 80)
        REACHABLE.set(parse_rules(["127.0.0.0/8:80"]))
        kept = await resolver.resolve("localhost", 80)
        assert kept and all(r["host"].startswith("127.") for r in kept)
    finally:
        await resolver.close()


async def _get_with(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as answer:
        await answer.read()
        return answer.status


async def test_a_kept_alive_connection_serves_only_calls_with_the_list_that_opened_it(
    local_port: int,
) -> None:
    gateway = Gateway(cast(Any, None), cast(Any, None))
    url = f"http://localhost:{local_port}/"
    listed, public_only = parse_rules([f"127.0.0.1:{local_port}"]), ()
    try:
        REACHABLE.set(listed)
        assert await _get_with(gateway._session(listed), url) == 200
        # Why one session per list: the connection just opened stays open, and a call
        # whose list does not allow the address would be carried over it unchecked.
        REACHABLE.set(public_only)
        assert await _get_with(gateway._session(listed), url) == 200
        assert HITS == ["/", "/"]
        # The gateway hands that call its own list's session, which must resolve again.
        assert gateway._session(public_only) is not gateway._session(listed)
        assert gateway._session(listed) is gateway._session(listed)
        with pytest.raises(aiohttp.ClientConnectorError):
            await _get_with(gateway._session(public_only), url)
        assert HITS == ["/", "/"]
    finally:
        await gateway.aclose()
