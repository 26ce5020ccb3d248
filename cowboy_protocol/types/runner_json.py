"""JSON forms of the Runner Registry types (docs/runners.md §4).

The capabilities file given to ``cowboy-node tx register-runner --capabilities FILE.json``::

    {"job_types": ["http"], "regions": ["eu-west"], "http_domains": ["example.com", "*.example.org"],
     "max_concurrent_jobs": 4, "tee_types": [], "pools": [],
     "rate_card": {"http": {"base_price": "1000", "price_per_unit": "0"}}}

Unknown keys are errors naming the key. Lists are normalised (sorted, duplicates dropped; HTTP domains
lower-cased) before the canonical record is built, so two files that differ only in order give the same
bytes. Amounts are decimal strings or non-negative integers. The same shapes (amounts always as decimal
strings) are what the RPC returns.
"""

from __future__ import annotations

import re
from typing import Any

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.fields import U32_MAX, U128_MAX
from cowboy_protocol.types.runner import (
    JOB_KIND_NAMES,
    JOB_KINDS,
    MAX_ITEM_BYTES,
    MAX_LIST_ITEMS,
    Capabilities,
    Health,
    Rate,
    RateCard,
    RunnerRecord,
)
from cowboy_protocol.types.validation_errors import ValidationError

E_INVALID_CAPABILITIES = "invalid_capabilities"
"""Stable error code of every capabilities / rate card JSON problem."""
HEALTH_NAMES: dict[Health, str] = {Health.HEALTHY: "healthy", Health.UNHEALTHY: "unhealthy",
                                   Health.PAUSED: "paused", Health.DEREGISTERED: "deregistered"}
"""JSON name of each health state."""

CAPABILITY_KEYS = ("job_types", "regions", "http_domains", "max_concurrent_jobs", "tee_types", "pools")
"""Keys of the capabilities object (``job_types`` and ``max_concurrent_jobs`` are required)."""
FILE_KEYS = (*CAPABILITY_KEYS, "rate_card")
"""Keys of a capabilities file: the capabilities plus ``rate_card``."""
RATE_KEYS = ("base_price", "price_per_unit")
"""Keys of one rate card entry (both required)."""
MAX_POOL_BYTES = 32
"""Longest pool id (bytes)."""

_DOMAIN_RE = re.compile(r"(?:\*|(?:\*\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)")
_HEX_RE = re.compile(r"0x((?:[0-9a-fA-F]{2})+)")
_DECIMAL_RE = re.compile(r"[0-9]{1,39}")


def _fail(where: str, message: str) -> ValidationError:
    return ValidationError(E_INVALID_CAPABILITIES, f"{where}: {message}", field=where)


def _object(value: object, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "expected a JSON object")
    for key in sorted(str(k) for k in value):
        if key not in allowed:
            raise _fail(f"{where}.{key}" if where else key, f"unknown key {key!r}; allowed: {', '.join(allowed)}")
    return value


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list):
        raise _fail(where, "expected an array of strings")
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise _fail(f"{where}[{i}]", "expected a non-empty string")
        try:
            n = len(item.encode("utf-8"))
        except UnicodeEncodeError:
            raise _fail(f"{where}[{i}]", "not valid text") from None
        if n > MAX_ITEM_BYTES:
            raise _fail(f"{where}[{i}]", f"longer than {MAX_ITEM_BYTES} bytes")
        out.append(item)
    return out


def _normalised(items: list[str] | list[bytes], where: str) -> list[Any]:
    out: list[Any] = sorted(set(items))  # one element type per call: str or bytes
    if len(out) > MAX_LIST_ITEMS:
        raise _fail(where, f"at most {MAX_LIST_ITEMS} distinct entries, got {len(out)}")
    return out


def parse_amount(value: object, where: str) -> int:
    """A u128 amount given as a decimal string or a non-negative JSON integer."""
    if isinstance(value, bool):
        raise _fail(where, "expected an amount (decimal string or integer), got a boolean")
    if isinstance(value, int):
        amount = value
    elif isinstance(value, str) and _DECIMAL_RE.fullmatch(value):
        amount = int(value)
    else:
        raise _fail(where, f"expected an amount (decimal string or non-negative integer), got {value!r}")
    if not 0 <= amount <= U128_MAX:
        raise _fail(where, "amount out of u128 range")
    return amount


def _job_kind(name: object, where: str) -> int:
    if not isinstance(name, str) or name not in JOB_KINDS:
        raise _fail(where, f"unknown job type {name!r}; known: {', '.join(JOB_KINDS)}")
    return JOB_KINDS[name]


def capabilities_from_json(doc: object, *, where: str = "") -> Capabilities:
    """Capabilities from a JSON object with :data:`CAPABILITY_KEYS` (a ``rate_card`` key is ignored here)."""
    obj = _object(doc, where, FILE_KEYS)
    prefix = f"{where}." if where else ""
    for required in ("job_types", "max_concurrent_jobs"):
        if required not in obj:
            raise _fail(prefix + required, "required key is missing")
    raw_types = obj["job_types"]
    if not isinstance(raw_types, list) or not raw_types:
        raise _fail(prefix + "job_types", "expected a non-empty array of job types")
    kinds = sorted({_job_kind(t, f"{prefix}job_types[{i}]") for i, t in enumerate(raw_types)})
    mcj = obj["max_concurrent_jobs"]
    if isinstance(mcj, bool) or not isinstance(mcj, int) or not 1 <= mcj <= U32_MAX:
        raise _fail(prefix + "max_concurrent_jobs", f"expected an integer in 1..{U32_MAX}")
    domains = [d.lower() for d in _strings(obj.get("http_domains", []), prefix + "http_domains")]
    for i, d in enumerate(domains):
        if _DOMAIN_RE.fullmatch(d) is None:
            raise _fail(f"{prefix}http_domains[{i}]",
                        f"{d!r} is not a host name, '*.' + a host name, or '*'")
    pools: list[bytes] = []
    raw_pools = obj.get("pools", [])
    if not isinstance(raw_pools, list):
        raise _fail(prefix + "pools", "expected an array of 0x-hex pool ids")
    for i, p in enumerate(raw_pools):
        m = _HEX_RE.fullmatch(p) if isinstance(p, str) else None
        if m is None or len(m.group(1)) > 2 * MAX_POOL_BYTES:
            raise _fail(f"{prefix}pools[{i}]", f"expected 0x + 1..{MAX_POOL_BYTES} bytes of hex")
        pools.append(bytes.fromhex(m.group(1)))
    return Capabilities(
        job_kinds=tuple(kinds),
        regions=tuple(_normalised(_strings(obj.get("regions", []), prefix + "regions"), prefix + "regions")),
        http_domains=tuple(_normalised(domains, prefix + "http_domains")),
        max_concurrent_jobs=mcj,
        tee_types=tuple(_normalised(_strings(obj.get("tee_types", []), prefix + "tee_types"), prefix + "tee_types")),
        pools=tuple(_normalised(pools, prefix + "pools")),
    )


def rate_card_from_json(doc: object, *, where: str = "rate_card") -> RateCard:
    """``{"<job type>": {"base_price": amount, "price_per_unit": amount}}`` -> :class:`RateCard`."""
    if not isinstance(doc, dict):
        raise _fail(where, "expected a JSON object of job type -> rate")
    rates: list[tuple[int, Rate]] = []
    for name in sorted(str(k) for k in doc):
        kind = _job_kind(name, f"{where}.{name}")
        entry = _object(doc[name], f"{where}.{name}", RATE_KEYS)
        for key in RATE_KEYS:
            if key not in entry:
                raise _fail(f"{where}.{name}.{key}", "required key is missing")
        rates.append((kind, Rate(parse_amount(entry["base_price"], f"{where}.{name}.base_price"),
                                 parse_amount(entry["price_per_unit"], f"{where}.{name}.price_per_unit"))))
    rates.sort(key=lambda kr: kr[0])
    return RateCard(tuple(rates))


def runner_file_from_json(doc: object, *, require_rate_card: bool) -> tuple[Capabilities, RateCard | None]:
    """Parse a capabilities file: ``(capabilities, rate card or None when absent and not required)``.

    Every job type priced in ``rate_card`` must be one of ``job_types`` (a price for a kind the runner does
    not serve is almost certainly a mistake in the file).
    """
    caps = capabilities_from_json(doc)
    assert isinstance(doc, dict)
    if "rate_card" not in doc:
        if require_rate_card:
            raise _fail("rate_card", "required key is missing")
        return caps, None
    card = rate_card_from_json(doc["rate_card"])
    for kind, _rate in card.rates:
        if kind not in caps.job_kinds:
            name = JOB_KIND_NAMES[kind]
            raise _fail(f"rate_card.{name}", f"job type {name!r} is priced but not listed in job_types")
    return caps, card


def capabilities_to_json(caps: Capabilities) -> dict[str, Any]:
    """The JSON object :func:`capabilities_from_json` reads (canonical order)."""
    return {"job_types": [JOB_KIND_NAMES[k] for k in caps.job_kinds], "regions": list(caps.regions),
            "http_domains": list(caps.http_domains), "max_concurrent_jobs": caps.max_concurrent_jobs,
            "tee_types": list(caps.tee_types), "pools": ["0x" + p.hex() for p in caps.pools]}


def rate_card_to_json(card: RateCard) -> dict[str, Any]:
    """``{"<job type>": {"base_price": "<decimal>", "price_per_unit": "<decimal>"}}``."""
    return {JOB_KIND_NAMES[k]: {"base_price": str(r.base_price), "price_per_unit": str(r.price_per_unit)}
            for k, r in card.rates}


def record_to_json(rec: RunnerRecord) -> dict[str, Any]:
    """JSON view of a registration (address EIP-55, stake as a decimal string)."""

    return {"address": to_checksum_address(rec.address), "index": rec.index, "stake": str(rec.stake),
            "health": HEALTH_NAMES[rec.health], "registered_at": rec.registered_at,
            "last_heartbeat": rec.last_heartbeat, "reputation_x1e9": rec.reputation_x1e9,
            "active_jobs": rec.active_jobs, "unbonding_until": rec.unbonding_until,
            "capabilities": capabilities_to_json(rec.capabilities), "rate_card": rate_card_to_json(rec.rate_card)}
