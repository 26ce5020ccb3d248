"""HTTP host patterns of runner capabilities (``http_domains``): one matching rule for the dispatcher's
capability filter and the runner's own HTTP executor, so the two can never disagree about a host."""

from __future__ import annotations

from collections.abc import Iterable


def host_matches(host: str, patterns: Iterable[str]) -> bool:
    """True iff ``host`` matches a pattern: exact name, ``*.suffix`` (a strict subdomain, not the apex), or ``*``.

    Comparison is ASCII case-insensitive (DNS names are); a trailing root dot on the host is ignored.
    """
    return normalized_host_matches(host.lower().rstrip("."), patterns)


def normalized_host_matches(h: str, patterns: Iterable[str]) -> bool:
    """:func:`host_matches` for a host already lower-cased and stripped of its trailing dot."""
    for p in patterns:
        p = p.lower()
        if p == "*" or p == h:
            return True
        if p.startswith("*.") and h.endswith(p[1:]) and len(h) > len(p) - 1:
            return True
    return False
