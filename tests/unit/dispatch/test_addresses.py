"""Tenant-named hosts the server would connect to: public addresses only, unless allowed."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from broker.dispatch.addresses import outbound_problem, parse_networks


def resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> Sequence[str]:
        if host not in table:
            raise OSError("unknown host")
        return table[host]

    return resolve


DNS = resolver(
    {
        "git.example.com": ["140.82.121.4"],
        "sneaky.example.com": ["140.82.121.4", "10.1.2.3"],  # one private answer is enough to refuse
        "metadata.example.com": ["169.254.169.254"],
        "localhost": ["127.0.0.1", "::1"],
        "mapped.example.com": ["::ffff:127.0.0.1"],
    }
)


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("localhost", "loopback"),
        ("[::1]", "loopback"),
        ("10.0.0.5", "private"),
        ("192.168.1.1", "private"),
        ("172.16.0.1", "private"),
        ("169.254.169.254", "metadata"),
        ("metadata.example.com", "metadata"),
        ("168.63.129.16", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.10.10", "link-local"),
        ("100.64.0.1", "not a public"),  # carrier-grade NAT
        ("0.0.0.0", "address"),
        ("sneaky.example.com", "private"),
        ("mapped.example.com", "loopback"),
        ("nowhere.invalid", "does not resolve"),
    ],
)
def test_non_public_hosts_are_refused(host: str, reason: str) -> None:
    why = outbound_problem(host, 443, (), DNS)
    assert why is not None and reason in why


def test_public_hosts_pass() -> None:
    assert outbound_problem("git.example.com", 443, (), DNS) is None
    assert outbound_problem("140.82.121.4", 443, (), DNS) is None


def test_the_operator_allow_list_permits_its_networks_only() -> None:
    allowed = parse_networks(["10.0.0.0/8", "127.0.0.1"])
    assert outbound_problem("10.9.8.7", 443, allowed, DNS) is None
    assert outbound_problem("localhost", 443, allowed, DNS) is not None  # ::1 is not allowed
    assert outbound_problem("192.168.1.1", 443, allowed, DNS) is not None
    with pytest.raises(ValueError):
        parse_networks(["not-a-network"])
