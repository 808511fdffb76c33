"""The upstream session's resolver: a name reaches only the addresses its call may reach.

The gateway checks a remote server's addresses before each call (`_resolve`), but the HTTP
client looks the name up again when it connects. A name whose records change in between
(DNS rebinding: public when checked, 127.0.0.1 when connected) would slip past the check;
this resolver applies the same rule at the lookup the connection uses, with the egress list
of the call the current task forwards (`REACHABLE`). Loaded with aiohttp, on first use.
"""

from __future__ import annotations

import ipaddress
import socket

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from ._resolve import REACHABLE, reachable


class CheckedResolver(AbstractResolver):
    """aiohttp's default resolver, keeping only the addresses the current call may reach.

    Used without aiohttp's DNS cache: a cached answer would be the first caller's, filtered
    by that caller's egress list."""

    def __init__(self) -> None:
        self._inner = aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        rules = REACHABLE.get()
        kept = [r for r in found if reachable(rules, host, port, ipaddress.ip_address(r["host"]))]
        if not kept:
            addresses = ", ".join(sorted({r["host"] for r in found}))
            raise OSError(f"{host} resolves to {addresses}: none may be reached for this call")
        return kept

    async def close(self) -> None:
        await self._inner.close()


def connector() -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(resolver=CheckedResolver(), use_dns_cache=False)
