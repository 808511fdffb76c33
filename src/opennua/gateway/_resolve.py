"""Where a call goes: an execution's session → its snapshot (plugin version, deployment
digest) → the remote MCP server's URL, the plugin's access policy and the credential
references of that tool connection. The runtime never tells the gateway where a server
is: a URL from the runtime is not trusted to receive a credential.

Snapshots never change under their digests, so a session's resolution is computed once
per process.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from opennua.host import (
    CredentialRef,
    DeploymentSpec,
    EgressRule,
    Registry,
    is_public,
    parse_rules,
    permitted,
    remote_urls,
)
from opennua.plugins import AccessPolicy
from opennua.store import AuthStore, FileStore, LogStore, NotFound, RegistryStore, SealedSecretStore


class ResolverStore(LogStore, FileStore, RegistryStore, AuthStore, SealedSecretStore, Protocol):
    """What resolving an execution's deployment reads: its session and the registry's
    facts (a host `Registry` over the same roles)."""


#: The transport of a connection that is a remote A2A agent (`.a2a.json`), not MCP.
A2A = "a2a"
#: How long a remote server's name may take to resolve.
RESOLVE_TIMEOUT = 10.0

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


#: The egress list of the deployment whose call this task is forwarding: what the upstream
#: session's resolver lets through (`_pinned.CheckedResolver`). Set with the connection.
REACHABLE: ContextVar[tuple[EgressRule, ...]] = ContextVar("opennua_gateway_reachable", default=())


def reachable(rules: tuple[EgressRule, ...], host: str, port: int, address: Address) -> bool:
    """Whether the gateway may connect to `address` for `host:port` under these rules: a
    public address, or one an admin listed as an address or network entry."""
    return is_public(address) or permitted(rules, host, port, address)


async def addresses_of(host: str, port: int) -> list[Address]:
    """The addresses `host` names: itself if it is one, else what it resolves to (in
    order, once each); Refusal `egress_unresolvable` (502) if it does not resolve."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT
        )
    except (OSError, TimeoutError) as exc:
        raise Refusal("egress_unresolvable", f"{host} does not resolve: {exc}", 502) from None
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


def _check_address(
    rules: tuple[EgressRule, ...], what: str, host: str, port: int, address: Address
) -> None:
    """A remote server's host is the plugin's to name (within its egress list), but the
    gateway reaches a loopback, link-local or private address for it only where an admin
    listed that address in the deployment's egress list (an address or network entry): the
    rule the egress proxy applies to sandboxed code. Otherwise a published plugin could have
    the gateway call the services beside it (its own loopback, a metadata endpoint).

    Checked at each call, and again by the upstream session's resolver when it connects
    (`_pinned`), so a name whose records change in between (DNS rebinding) is caught there."""
    if reachable(rules, host, port, address):
        return
    where = host if str(address) == host else f"{host} resolves to {address}, which"
    raise Refusal(
        "egress_address_denied",
        f"{what}: {where} is not a public address: only an admin's address entry in the "
        f"deployment's egress list (an IP or network, e.g. {address}:{port}) allows it",
    )


class Refusal(Exception):
    """A call the gateway does not forward: ``code`` and an HTTP status for the caller."""

    def __init__(self, code: str, detail: str, status: int = 403) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.status = status


@dataclass(frozen=True, slots=True)
class Connection:
    server: str
    #: What the model calls the server's tools by (`<prefix>__<tool>`): the name the
    #: access policy's patterns match.
    prefix: str
    url: str
    host: str
    policy: AccessPolicy
    credentials: tuple[CredentialRef, ...]
    #: How the server speaks: streamable HTTP, or HTTP+SSE (a stream, and a message URL);
    #: `a2a` for a remote A2A agent.
    transport: str = "http"
    #: The deployment's egress list: the private addresses the gateway may reach for it.
    egress: tuple[EgressRule, ...] = ()


@dataclass(frozen=True, slots=True)
class _Resolved:
    plugin: str
    policy: AccessPolicy
    urls: dict[str, str]
    prefixes: dict[str, str]
    credentials: tuple[CredentialRef, ...]
    egress: tuple[EgressRule, ...] = ()
    transports: dict[str, str] | None = None


#: What a host name's addresses are: `addresses_of`, or a test's stand-in for the DNS.
Lookup = Callable[[str, int], Awaitable[list[Address]]]


class Resolver:
    def __init__(self, store: ResolverStore, addresses: Lookup = addresses_of) -> None:
        self._store = store
        self._addresses = addresses
        self._registry = Registry(store)
        self._sessions: dict[str, _Resolved] = {}

    async def egress(self, session_id: str) -> tuple[EgressRule, ...]:
        """The deployment's egress list for sandboxed code (the plugin's is a request)."""
        return (await self._resolved(session_id)).egress

    async def _resolved(self, session_id: str) -> _Resolved:
        resolved = self._sessions.get(session_id)
        if resolved is None:
            resolved = self._sessions[session_id] = await self._resolve(session_id)
        return resolved

    async def connection(self, session_id: str, server: str, *, a2a: bool = False) -> Connection:
        """The remote MCP server (or, `a2a`, the remote A2A agent) `server` of the session's
        snapshot; a name of the other kind is as unknown as a typo."""
        resolved = await self._resolved(session_id)
        url = resolved.urls.get(server)
        transport = (resolved.transports or {}).get(server, "http")
        kind = "A2A agent" if a2a else "MCP server"
        if url is None or (transport == A2A) != a2a:
            raise Refusal(
                "unknown_server", f"{resolved.plugin} has no remote {kind} {server!r}", 404
            )
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        # Checked on every call, not only when the deployment was saved: a configuration
        # saved before a policy existed, or written around the registry, is still refused.
        if not resolved.policy.allows_host(host):
            raise Refusal("egress_denied", f"{kind} {server} at {host} is not in the egress list")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        for address in await self._addresses(host, port):
            _check_address(resolved.egress, f"{kind} {server}", host, port, address)
        refs = tuple(c for c in resolved.credentials if c.server == server)
        return Connection(
            server=server,
            prefix=resolved.prefixes.get(server, server),
            url=url,
            host=host,
            policy=resolved.policy,
            credentials=refs,
            transport=transport,
            egress=resolved.egress,
        )

    async def _resolve(self, session_id: str) -> _Resolved:
        session = await self._store.get_session(session_id)
        if session.plugin is None or session.deployment_digest is None:
            raise Refusal("unknown_server", "this session's agent has no remote MCP servers", 404)
        name, _, version = session.plugin.partition("@")
        try:
            published = await self._store.get_plugin_version(name, version)
            config = await self._store.get_deployment_config(session.deployment_digest)
        except NotFound as exc:
            raise Refusal("snapshot_mismatch", f"the session's snapshot is gone: {exc}") from exc
        if published.digest != session.plugin_digest:
            raise Refusal("snapshot_mismatch", f"{session.plugin} no longer has its digest")
        plugin = await self._registry.plugin_of(published)
        spec = DeploymentSpec.model_validate(config.spec)
        return _Resolved(
            plugin=session.plugin,
            policy=plugin.settings.access,
            urls=remote_urls(plugin, spec),
            prefixes={s.name: s.prefix for s in plugin.mcp_servers}
            | {a.name: a.prefix for a in plugin.a2a_agents},
            credentials=tuple(spec.credentials),
            egress=parse_rules(spec.egress),
            transports={s.name: s.transport for s in plugin.mcp_servers}
            | {a.name: A2A for a in plugin.a2a_agents},
        )
