"""Which IP addresses an HTTP job may reach (SSRF protection, docs/runner-executors.md §HTTP "Private addresses").

An IPv6 address that carries an IPv4 address reaches that IPv4 host through a translator or tunnel, so it is
judged by the IPv4 address it carries, never by its own (often "global") IPv6 range:

====================  ====================  ===============================================================
Form                  Range                 Carried IPv4 address
====================  ====================  ===============================================================
IPv4-mapped           ``::ffff:0:0/96``     the low 32 bits (the socket layer connects to that IPv4 host)
IPv4-compatible       ``::/96``             the low 32 bits (deprecated, RFC 4291 §2.5.5.1)
NAT64 well-known      ``64:ff9b::/96``      the low 32 bits (RFC 6052)
NAT64 local-use       ``64:ff9b:1::/48``    never reachable: a network-specific translator (RFC 8215)
6to4                  ``2002::/16``         bits 16..47 (RFC 3056)
Teredo                ``2001::/32``         the server and the (de-obfuscated) client address (RFC 4380)
====================  ====================  ===============================================================

Every carried address must be global; otherwise the IPv6 address itself must be global.
"""

from __future__ import annotations

import ipaddress

_NAT64_WKP = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_COMPAT = ipaddress.IPv6Network("::/96")
_LOW32 = 0xFFFF_FFFF


def embedded_ipv4(addr: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...] | None:
    """The IPv4 addresses ``addr`` carries (mapped, compatible, NAT64, 6to4, Teredo), or None when it is a plain
    IPv6 address. The empty tuple means "a translated form whose target cannot be known" (NAT64 local-use)."""
    if addr.ipv4_mapped is not None:
        return (addr.ipv4_mapped,)
    if addr in _NAT64_LOCAL:
        return ()
    if addr in _NAT64_WKP or (addr in _COMPAT and int(addr) > 1):  # :: and ::1 are not compatible forms
        return (ipaddress.IPv4Address(int(addr) & _LOW32),)
    if addr.sixtofour is not None:
        return (addr.sixtofour,)
    if addr.teredo is not None:
        server, client = addr.teredo
        return (server, client)
    return None


def _global_v4(addr: ipaddress.IPv4Address) -> bool:
    return addr.is_global and not addr.is_multicast


def is_global_address(text: str) -> bool:
    """True iff ``text`` is an IP address routable on the public Internet; an IPv6 form carrying an IPv4 address
    is judged by that IPv4 address (module docstring). A zone id (``%eth0``) is ignored; non-addresses are False."""
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv4Address):
        return _global_v4(addr)
    carried = embedded_ipv4(addr)
    if carried is not None:
        return bool(carried) and all(_global_v4(v4) for v4 in carried)
    return addr.is_global and not addr.is_multicast
