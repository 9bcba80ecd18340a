"""Hosts a tenant names for the server to connect to (a GitOps repository, a kubeconfig's API
server): public addresses only, so a tenant cannot aim the server at its own network.

A host is resolved and refused when any of its addresses is not globally routable
(loopback, private, link-local, carrier-grade NAT, unique-local, multicast, reserved,
unspecified) or is a cloud metadata endpoint, unless it lies in a network the operator
allowed (BROKER_OUTBOUND_ALLOWED_NETWORKS, e.g. a private Git server or on-premises API
servers). Checked when a cluster is registered and again before each connection, so a
name that later resolves elsewhere is caught at the next dispatch (docs/dispatch.md).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

# instance metadata and host services that answer on addresses that may look routable
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (a public-looking address)
        "192.0.0.192",  # Oracle Cloud
    )
)


def parse_networks(values: Sequence[str]) -> tuple[IPNetwork, ...]:
    """The operator's allow-list: CIDRs or single addresses (ValueError names a bad entry)."""
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip())


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _refused(ip: IPAddress) -> str | None:
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global or ip.is_multicast:
        return "not a public address"
    return None


def outbound_problem(host: str, port: int, allowed: Sequence[IPNetwork], resolve: Resolver = _resolve) -> str | None:
    """Why the server must not connect to host:port for a tenant, or None when it may."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    try:
        addresses = (
            [literal] if literal is not None else [ipaddress.ip_address(a.split("%")[0]) for a in resolve(host, port)]
        )
    except (OSError, UnicodeError, ValueError):
        return f"host {host!r} does not resolve"
    if not addresses:
        return f"host {host!r} does not resolve"
    for ip in addresses:
        if any(ip in net for net in allowed):
            continue
        why = _refused(ip)
        if why is not None:
            return f"host {host!r} is {why} ({ip}); the operator may allow it in BROKER_OUTBOUND_ALLOWED_NETWORKS"
    return None


def default_port(scheme: str, port: int | None) -> int:
    return port if port is not None else (80 if scheme == "http" else 443)


def check_outbound(
    host: str, port: int, allowed: Sequence[IPNetwork], loc: list[Any], field: str, resolve: Resolver = _resolve
) -> None:
    """Raise the 422 naming `loc` when the server must not connect there for a tenant."""
    from broker.errors import InvalidRequest

    why = outbound_problem(host, port, allowed, resolve)
    if why is not None:
        raise InvalidRequest(f"{field}: {why}", errors=[{"loc": loc, "msg": why}])
