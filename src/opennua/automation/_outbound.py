"""Outbound webhook requests: one POST to a URL an admin configured, made only to an
address the egress rule allows (docs/subscriptions.md, "Egress").

The name is resolved here and the connection made to a checked address (the gateway's
rule: a name that resolves elsewhere on the next lookup gains nothing). Loopback, private
and other non-public addresses (`opennua.host.is_public`) are refused unless the server
was started with `--allow-private-subscriptions`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpcore

from opennua.host import is_public

#: Seconds to connect, and for the whole answer to arrive.
CONNECT_TIMEOUT, TIMEOUT = 10.0, 30.0


class EgressRefused(Exception):
    """The URL's host is not an address deliveries may go to: not worth a retry."""


class SendFailed(Exception):
    """No HTTP answer (refused, reset, timed out): worth a retry."""


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, allow_private: bool) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._allow_private = allow_private

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await _resolve(host, port)
        allowed = [a for a in addresses if self._allow_private or is_public(a)]
        if not allowed:
            raise EgressRefused(
                f"{host} is not a public address (a server started with "
                "--allow-private-subscriptions delivers to private ones)"
            )
        last: Exception | None = None
        for address in allowed:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - never configured
        raise EgressRefused("deliveries go over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
    out: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address not in out:
            out.append(address)
    return out


async def refused_target(url: str, allow_private: bool) -> str | None:
    """Why a delivery to `url` would be refused now (its host is no public address, or
    does not resolve), or None; the deliverer checks again at each try."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        addresses = await _resolve(host, parts.port or (443 if parts.scheme == "https" else 80))
    except httpcore.ConnectError as exc:
        return str(exc)
    if not allow_private and not any(is_public(a) for a in addresses):
        return (
            f"{host} is not a public address (a server started with "
            "--allow-private-subscriptions delivers to private ones)"
        )
    return None


class Outbound:
    """A connection pool that POSTs to checked addresses; `aclose()` when done."""

    def __init__(self, *, allow_private: bool = False, max_connections: int = 32) -> None:
        self.allow_private = allow_private
        self._pool = httpcore.AsyncConnectionPool(
            max_connections=max_connections,
            network_backend=_CheckedBackend(allow_private),
        )

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        """The answer's status; `EgressRefused` or `SendFailed` when there is none."""
        timeout = {"connect": CONNECT_TIMEOUT, "read": TIMEOUT, "write": TIMEOUT, "pool": TIMEOUT}
        try:
            # The answer's body is never read: only its status counts (a receiver cannot
            # make the deliverer hold a large one).
            async with (
                asyncio.timeout(TIMEOUT),
                self._pool.stream(
                    "POST",
                    url,
                    headers=[(k.encode(), v.encode()) for k, v in headers.items()],
                    content=body,
                    extensions={"timeout": timeout},
                ) as response,
            ):
                return response.status
        except EgressRefused:
            raise
        except (httpcore.TimeoutException, TimeoutError):
            raise SendFailed("timed out") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
            raise SendFailed(str(exc) or type(exc).__name__) from None

    async def aclose(self) -> None:
        await self._pool.aclose()
