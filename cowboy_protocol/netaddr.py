"""``HOST:PORT`` listen/connect addresses as operators write them in config files (node and runner alike)."""

from __future__ import annotations

import ipaddress


def parse_host_port(text: str, *, key: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` or ``[IPV6]:PORT`` (port 0-65535) into ``(host, port)``.

    The brackets are removed from an IPv6 host. Raises ``ValueError`` naming ``key``.
    """
    expected = "expected HOST:PORT or [IPV6]:PORT with a port in 0-65535 (e.g. 127.0.0.1:4000)"
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise ValueError(f"{key}: {expected}, got {text!r}")
    if host.startswith("[") or host.endswith("]"):
        inner = host[1:-1] if host.startswith("[") and host.endswith("]") else ""
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise ValueError(f"{key}: {expected}; {host!r} is not a bracketed IPv6 address") from None
        return inner, int(port_text)
    if ":" in host:
        raise ValueError(f"{key}: {expected}; an IPv6 host must be in brackets, got {text!r}")
    if any(c.isspace() or c in "/?#@[]" for c in host):
        raise ValueError(f"{key}: {expected}; {host!r} is not a host name or address")
    return host, int(port_text)


def normalize_ip(host: str) -> str:
    """A source address as a rate-limit / connection-cap key: the IP (zone id dropped), IPv4-mapped IPv6 folded
    to IPv4 so one client is one key whichever socket family accepted it; a non-IP string is returned as is."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
