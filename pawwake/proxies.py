"""Which forwarded headers to believe: only those added by proxies named in TRUSTED_PROXIES.

Anyone can send ``X-Forwarded-For`` or ``Forwarded``; only a proxy we were told to trust can
vouch for the client behind it. The client chain is walked from the right (the entries our own
proxies appended) past trusted hops only, so an entry a client wrote on the left never wins.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from yarl import URL

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# "private": the addresses a platform's own load balancer connects from (Render, Fly, Docker).
PRIVATE_NETWORKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                    "127.0.0.0/8", "169.254.0.0/16", "::1/128", "fc00::/7", "fe80::/10")
X_FORWARDED = ("X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host")
MAX_HOPS = 20  # a longer chain is not walked further (nobody runs twenty proxies)
_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


@dataclass(frozen=True)
class TrustedProxies:
    networks: tuple[Network, ...] = ()

    def trusts(self, address: str | None) -> bool:
        ip = parse_address(address)
        return ip is not None and any(ip in network for network in self.networks)


def parse_trusted_proxies(raw: str) -> TrustedProxies:
    """Read TRUSTED_PROXIES: addresses, networks and ``private``; a bad entry is logged, skipped."""
    networks: list[Network] = []
    for entry in re.split(r"[,\s]+", raw.strip()):
        if not entry:
            continue
        if entry.lower() == "private":
            networks.extend(ipaddress.ip_network(n) for n in PRIVATE_NETWORKS)
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            log.warning("TRUSTED_PROXIES: %r is not an IP address or network; ignored", entry)
    return TrustedProxies(tuple(networks))


def setting_to_trust(peer: str | None) -> str:
    """What to set so that ``peer``, a proxy whose forwarded headers were ignored, is
    believed: ``private`` for a platform's load balancer on a private network (Render,
    Fly, Docker), else the peer's own address."""
    if parse_trusted_proxies("private").trusts(peer):
        return "TRUSTED_PROXIES=private"
    address = parse_address(peer)
    return f"TRUSTED_PROXIES={address}" if address is not None else "TRUSTED_PROXIES=private"


def parse_address(value: str | None) -> Address | None:
    """An IP address from a peer or a chain entry (``[v6]:port`` and ``v4:port`` allowed)."""
    if not value:
        return None
    value = value.strip().strip('"')
    if value.startswith("["):
        value = value[1:].split("]", 1)[0]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(frozen=True)
class ClientView:
    """The client as the browser sees the site: its address, the scheme and host it used."""

    address: str
    scheme: str
    host: str
    forwarded_ignored: bool  # forwarded headers came from a peer that is not trusted


def resolve_client(peer: str | None, headers: Mapping[str, str], proxies: TrustedProxies, *,
                   scheme: str, host: str) -> ClientView:
    """Apply the forwarded headers a trusted peer vouches for; ignore them from anyone else."""
    has_x = any(name in headers for name in X_FORWARDED)
    has_forwarded = "Forwarded" in headers
    address = _shown(peer)
    if not proxies.trusts(peer):
        return ClientView(address, scheme, host, has_x or has_forwarded)
    if has_x:  # a proxy that writes X-Forwarded-* is the one we listen to; never mix the two
        fors = _split(headers.get("X-Forwarded-For"))
        protos = _split(headers.get("X-Forwarded-Proto"))
        hosts = _split(headers.get("X-Forwarded-Host"))
    elif has_forwarded:
        fors, protos, hosts = _forwarded_elements(headers.get("Forwarded", ""))
    else:
        return ClientView(address, scheme, host, False)
    hops = 1  # the peer itself
    for entry in reversed(fors[-MAX_HOPS:]):
        if not entry:  # a hop that did not say whom it served: the last known address stands
            break
        address = _shown(entry)
        if not proxies.trusts(entry):
            break
        hops += 1
    proto = _pick(protos, hops).lower()
    forwarded_host = _pick(hosts, hops)
    return ClientView(
        address,
        proto if proto in ("http", "https") else scheme,
        forwarded_host if _valid_host(forwarded_host) else host,
        False)


def _shown(value: str | None) -> str:
    """An address as a string: normalised when it parses, else cut short (it is only a key)."""
    ip = parse_address(value)
    if ip is not None:
        return str(ip)
    return (value or "unknown").strip()[:64] or "unknown"


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",")] if value else []


def _pick(values: list[str], hops: int) -> str:
    """The value written by the outermost trusted hop (each proxy appends its own on the right)."""
    if not values:
        return ""
    return values[max(0, len(values) - hops)]


def _valid_host(value: str) -> bool:
    if not value or not _HOST.fullmatch(value):
        return False
    try:
        return URL(f"http://{value}/").host is not None
    except ValueError:
        return False


def _forwarded_elements(value: str) -> tuple[list[str], list[str], list[str]]:
    """RFC 7239 ``Forwarded``: per element its ``for``, ``proto`` and ``host`` ("" if absent)."""
    fors: list[str] = []
    protos: list[str] = []
    hosts: list[str] = []
    for element in _split_outside_quotes(value, ","):
        pairs: dict[str, str] = {}
        for pair in _split_outside_quotes(element, ";"):
            name, sep, raw = pair.partition("=")
            if sep:
                pairs[name.strip().lower()] = raw.strip().strip('"')
        fors.append(pairs.get("for", ""))
        protos.append(pairs.get("proto", ""))
        hosts.append(pairs.get("host", ""))
    return fors, protos, hosts


def _split_outside_quotes(value: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in value:
        if char == '"':
            quoted = not quoted
        if char == separator and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]
