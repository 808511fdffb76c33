"""The deployment's egress list, pure: what an entry means and which addresses it reaches."""

from __future__ import annotations

import ipaddress

import pytest

from opennua.host import EgressRule, EgressRuleError, is_public, may_resolve, parse_rules, permitted


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    "text",
    ["registry.npmjs.org:443", "*.example.org:443", "*:443", "127.0.0.1:8080", "[::1]:80",
     "10.0.0.0/8:5432", "[fd00::/8]:80", "api.example.com:8000-8100", " Host.Example.COM.:1 "],
)  # fmt: skip
def test_entries_that_parse(text: str) -> None:
    rule = EgressRule.parse(text)
    assert rule.text == text.strip()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("registry.npmjs.org", "expected HOST:PORT"),
        ("example.com:0", "ports are 1-65535"),
        ("example.com:70000", "ports are 1-65535"),
        ("example.com:90-80", "ports are 1-65535"),
        ("example.com:*", "a number or a range"),
        ("::1:80", "in brackets"),
        ("10.0.0.1/8:80", "not an address or network"),  # host bits set
        ("300.1.2.3:80", "not an address or network"),
        ("exa mple.com:80", "not a host name"),
        ("a.*.com:80", "not a host name"),
    ],
)
def test_entries_that_do_not(text: str, why: str) -> None:
    with pytest.raises(EgressRuleError, match=why):
        EgressRule.parse(text)


def test_public_is_not_ipaddress_is_private() -> None:
    # The documentation ranges are reachable: registry.npmjs.org resolves into one here.
    for address in ("203.0.113.80", "198.51.100.7", "192.0.2.1", "8.8.8.8", "2606:4700::1"):
        assert is_public(ip(address)), address
    assert ip("203.0.113.80").is_private  # which is why `is_private` is not the test
    for address in ("127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
                    "169.254.169.254", "0.0.0.0", "0.1.2.3", "224.0.0.1", "255.255.255.255",
                    "::1", "::", "fe80::1", "fd00::1", "ff02::1", "::ffff:127.0.0.1",
                    "64:ff9b::7f00:1", "2001::1"):  # fmt: skip
        assert not is_public(ip(address)), address


def test_a_name_entry_reaches_public_addresses_only() -> None:
    rules = parse_rules(["registry.npmjs.org:443", "*.example.org:80-90"])
    assert permitted(rules, "registry.npmjs.org", 443, ip("203.0.113.80"))
    assert not permitted(rules, "registry.npmjs.org", 80, ip("203.0.113.80"))  # port
    assert not permitted(rules, "registry.npmjs.org", 443, ip("127.0.0.1"))  # rebinding
    assert not permitted(rules, "registry.npmjs.org", 443, ip("::ffff:10.0.0.1"))
    assert permitted(rules, "a.b.example.org", 85, ip("93.184.216.34"))
    assert not permitted(rules, "example.org", 85, ip("93.184.216.34"))
    assert not permitted(rules, "evil.com", 443, ip("93.184.216.34"))


def test_an_address_entry_reaches_its_addresses_whatever_the_name() -> None:
    rules = parse_rules(["127.0.0.1:8080", "10.0.0.0/8:5432", "[::1]:8080"])
    assert permitted(rules, "127.0.0.1", 8080, ip("127.0.0.1"))
    assert permitted(rules, "127.0.0.1", 8080, ip("::ffff:127.0.0.1"))
    assert permitted(rules, "::1", 8080, ip("::1"))
    assert permitted(rules, "db.internal", 5432, ip("10.9.8.7"))
    assert not permitted(rules, "127.0.0.1", 5432, ip("127.0.0.1"))  # another port
    assert not permitted(rules, "127.0.0.2", 8080, ip("127.0.0.2"))


def test_only_a_listed_name_is_ever_resolved() -> None:
    rules = parse_rules(["registry.npmjs.org:443", "10.0.0.0/8:5432"])
    assert may_resolve(rules, "registry.npmjs.org", 443)
    assert not may_resolve(rules, "registry.npmjs.org", 80)
    # An address entry does not make every name worth a lookup (DNS is a way out).
    assert not may_resolve(rules, "secret-data.attacker.example", 5432)
