"""What the gateway takes a remote server's host to be: an address as it is, a name as the
system resolver answers, an unknown name a 502 that says so (gateway/_resolve.py)."""

from __future__ import annotations

import ipaddress

import pytest

from opennua.gateway._resolve import Refusal, addresses_of


async def test_an_address_is_itself_without_a_lookup() -> None:
    assert await addresses_of("10.1.2.3", 80) == [ipaddress.ip_address("10.1.2.3")]
    assert await addresses_of("::1", 443) == [ipaddress.ip_address("::1")]


async def test_a_name_is_what_it_resolves_to() -> None:
    found = await addresses_of("localhost", 80)
    assert found and all(a.is_loopback for a in found)
    assert len(found) == len(set(found))


async def test_a_name_that_does_not_resolve_is_a_502_naming_it() -> None:
    with pytest.raises(Refusal) as refused:
        await addresses_of("no-such-host.invalid", 80)
    assert (refused.value.code, refused.value.status) == ("egress_unresolvable", 502)
    assert "no-such-host.invalid" in refused.value.detail
