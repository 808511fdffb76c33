"""A deployment's egress list: which hosts and ports sandboxed code may reach through the
egress proxy (docs/gateway.md, "The egress proxy"). Pure: parsing and matching, no I/O.

An entry is `HOST:PORT`. HOST is a name (`registry.npmjs.org`), a name pattern
(`*.example.org`, `*`), an IP address (`127.0.0.1`, `[::1]`) or a network in CIDR form
(`10.0.0.0/8`, `[fd00::/8]`); PORT is a number or a range (`8000-8100`). A name entry
allows the *public* addresses its names resolve to; an address or network entry allows
its addresses whatever name led to them. So loopback, link-local, private and other
non-public ranges are reachable only where an admin listed them as addresses.

"Public" here is not `ipaddress`'s `is_private`, which also refuses the documentation
ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24): some networks serve real hosts
from them, and a registry there must be reachable when listed.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Never reached by a name entry: this network, RFC 1918, CGNAT, loopback, link-local,
#: IETF protocol assignments, benchmarking, multicast, reserved and broadcast; for IPv6
#: unspecified, loopback, IPv4-compatible, discard, NAT64, Teredo, ULA, site- and
#: link-local, multicast. (An IPv4-mapped address is judged as its IPv4 address.)
NON_PUBLIC: tuple[Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/96",
        "100::/64",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "2001::/32",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)
_NAME = re.compile(r"^(\*|(\*\.)?[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*)$")
_PORT = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")


class EgressRuleError(ValueError):
    """An entry that is not `HOST:PORT`; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class EgressRule:
    """One entry: a name pattern or a network, and a port range."""

    text: str
    low: int
    high: int
    name: str | None = None
    network: Network | None = None

    @classmethod
    def parse(cls, text: str) -> EgressRule:
        raw = text.strip()
        host, sep, port = raw.rpartition(":")
        if not sep or not host:
            raise EgressRuleError(f"{text!r}: expected HOST:PORT (e.g. registry.npmjs.org:443)")
        low, high = _ports(text, port)
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise EgressRuleError(f"{text!r}: write an IPv6 address in brackets, [::1]:PORT")
        try:
            network = ipaddress.ip_network(host, strict=True)
        except ValueError:
            if "/" in host or host.replace(".", "").isdigit():
                raise EgressRuleError(f"{text!r}: {host!r} is not an address or network") from None
            name = host.lower().rstrip(".")
            if not _NAME.match(name):
                raise EgressRuleError(f"{text!r}: {host!r} is not a host name or pattern") from None
            return cls(raw, low, high, name=name)
        return cls(raw, low, high, network=_unmapped_network(network))

    def allows_port(self, port: int) -> bool:
        return self.low <= port <= self.high

    def names(self, host: str) -> bool:
        """Whether this name entry covers `host` (a name or an address as requested)."""
        return self.name is not None and fnmatch.fnmatchcase(host.lower().rstrip("."), self.name)


def _ports(text: str, port: str) -> tuple[int, int]:
    found = _PORT.match(port)
    if found is None:
        raise EgressRuleError(f"{text!r}: the port must be a number or a range (8000-8100)")
    low = int(found.group(1))
    high = int(found.group(2) or low)
    if not 1 <= low <= high <= 65535:
        raise EgressRuleError(f"{text!r}: ports are 1-65535, the range low to high")
    return low, high


def parse_rules(entries: Iterable[str]) -> tuple[EgressRule, ...]:
    """Every entry parsed; `EgressRuleError` names the first that is not `HOST:PORT`."""
    return tuple(EgressRule.parse(entry) for entry in entries)


def unmapped(address: Address) -> Address:
    """An IPv4-mapped IPv6 address as its IPv4 address (so ::ffff:127.0.0.1 is loopback)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _unmapped_network(network: Network) -> Network:
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            return ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}")
    return network


def is_public(address: Address) -> bool:
    address = unmapped(address)
    return not any(address.version == n.version and address in n for n in NON_PUBLIC)


def permitted(rules: Sequence[EgressRule], host: str, port: int, address: Address) -> bool:
    """Whether a connection to `host:port`, resolved to `address`, is allowed: a name entry
    covering `host` and the port, for a public address; or an address entry covering the
    address and the port."""
    address = unmapped(address)
    for rule in rules:
        if not rule.allows_port(port):
            continue
        if rule.network is not None:
            if address.version == rule.network.version and address in rule.network:
                return True
        elif rule.names(host) and is_public(address):
            return True
    return False


def may_resolve(rules: Sequence[EgressRule], host: str, port: int) -> bool:
    """Whether `host` may be looked up at all: only a name some entry names for this port
    (an address needs no lookup). An unlisted name is never resolved: sandboxed code
    cannot make the proxy send it to a DNS server (a way out for data)."""
    return any(rule.allows_port(port) and rule.names(host) for rule in rules)
