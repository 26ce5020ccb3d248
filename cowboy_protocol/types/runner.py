"""Runner Registry records (CIP-2 as used by CIP-11 §7.1, §9.1): capabilities, rate card, registration.

Every record has a canonical CBOR map form (small integer keys, strict decode).
The runner's identity is the 20-byte address of the key that registered it.
Reputation is fixed point ×1e9 (CIP-11 ``selection_reputation_x1e9``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import (
    ADDRESS_LEN,
    U32_MAX,
    decode_u128,
    encode_u128,
    expect_bytes,
    expect_map,
    expect_text,
    expect_uint,
)
from cowboy_protocol.types.validation_errors import DecodeError

JOB_KIND_LLM = 0x00
JOB_KIND_HTTP = 0x01
JOB_KIND_MCP = 0x02
JOB_KIND_CUSTOM = 0x03
JOB_KIND_PUBLISH_CHAIN_ROOT = 0x04
JOB_KIND_AGENT = 0x05
JOB_KINDS: dict[str, int] = {
    "llm": JOB_KIND_LLM, "http": JOB_KIND_HTTP, "mcp": JOB_KIND_MCP, "custom": JOB_KIND_CUSTOM,
    "publish_chain_root": JOB_KIND_PUBLISH_CHAIN_ROOT, "agent": JOB_KIND_AGENT,
}
"""CIP-11 §9.4 ``job_kind`` byte table (append only; pinned by a test)."""
JOB_KIND_NAMES: dict[int, str] = {v: k for k, v in JOB_KINDS.items()}

MAX_LIST_ITEMS = 64
"""Most entries in any capability list (regions, domains, pools, TEE types, job kinds)."""
MAX_ITEM_BYTES = 253
"""Longest capability string (a DNS name)."""


class Health(IntEnum):
    """Runner health state (stored as this byte)."""

    HEALTHY = 0
    UNHEALTHY = 1
    PAUSED = 2
    DEREGISTERED = 3


def _text_list(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_LIST_ITEMS:
        raise DecodeError(f"{name}: expected an array of at most {MAX_LIST_ITEMS} strings", field=name)
    out = tuple(expect_text(v, name, MAX_ITEM_BYTES) for v in value)
    if list(out) != sorted(set(out)):
        raise DecodeError(f"{name}: must be sorted and without duplicates", field=name)
    return out


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a runner serves. Lists are kept sorted and duplicate-free so the encoding is canonical."""

    job_kinds: tuple[int, ...]
    """Job kinds served (CIP-11 §9.4 bytes), ascending."""
    regions: tuple[str, ...]
    """Regions the runner operates in (informational filter input)."""
    http_domains: tuple[str, ...]
    """Hosts HTTP jobs may target: ``example.com`` exactly, ``*.example.com`` any subdomain, ``*`` any host."""
    max_concurrent_jobs: int
    """Most jobs assigned at once (concurrency filter)."""
    tee_types: tuple[str, ...] = ()
    """TEE attestations the runner offers (e.g. ``sgx``, ``sev-snp``, ``tdx``); empty: none."""
    pools: tuple[bytes, ...] = ()
    """Runner pools this runner is entitled to serve (``required_runner_pool`` filter)."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {0: list(self.job_kinds), 1: list(self.regions), 2: list(self.http_domains),
                3: self.max_concurrent_jobs, 4: list(self.tee_types), 5: list(self.pools)}

    @classmethod
    def from_cbor(cls, value: object) -> Capabilities:
        """Strict decode (sorted, duplicate-free lists; known job kinds)."""
        m = expect_map(value, frozenset(range(6)), "capabilities")
        kinds_raw = m[0]
        if not isinstance(kinds_raw, list) or not kinds_raw or len(kinds_raw) > len(JOB_KINDS):
            raise DecodeError("capabilities.job_kinds: expected a non-empty array of job kinds", field="job_kinds")
        kinds = tuple(expect_uint(k, "capabilities.job_kinds", 0xFF) for k in kinds_raw)
        if list(kinds) != sorted(set(kinds)) or any(k not in JOB_KIND_NAMES for k in kinds):
            raise DecodeError("capabilities.job_kinds: unknown, unsorted or duplicate job kind", field="job_kinds")
        pools_raw = m[5]
        if not isinstance(pools_raw, list) or len(pools_raw) > MAX_LIST_ITEMS:
            raise DecodeError("capabilities.pools: expected an array", field="pools")
        pools = tuple(expect_bytes(p, "capabilities.pools", max_len=32) for p in pools_raw)
        if list(pools) != sorted(set(pools)):
            raise DecodeError("capabilities.pools: must be sorted and without duplicates", field="pools")
        mcj = expect_uint(m[3], "capabilities.max_concurrent_jobs", U32_MAX)
        if mcj == 0:
            raise DecodeError("capabilities.max_concurrent_jobs: must be at least 1", field="max_concurrent_jobs")
        return cls(job_kinds=kinds, regions=_text_list(m[1], "capabilities.regions"),
                   http_domains=_text_list(m[2], "capabilities.http_domains"), max_concurrent_jobs=mcj,
                   tee_types=_text_list(m[4], "capabilities.tee_types"), pools=pools)


@dataclass(frozen=True, slots=True)
class Rate:
    """Price of one job kind: ``base_price + units × price_per_unit`` (units as reported by the runner)."""

    base_price: int
    """Price of a job before usage (u128); the price filter compares it with ``max_price``."""
    price_per_unit: int
    """Price per unit of usage (tokens, bytes, seconds: kind-specific) (u128)."""


@dataclass(frozen=True, slots=True)
class RateCard:
    """A runner's prices per job kind; a kind missing from the card is not offered."""

    rates: tuple[tuple[int, Rate], ...]
    """(job_kind, rate) pairs, ascending by job kind."""

    def rate_for(self, job_kind: int) -> Rate | None:
        """The rate of ``job_kind``, or None."""
        for kind, rate in self.rates:
            if kind == job_kind:
                return rate
        return None

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map ``{job_kind: {0: base_price, 1: price_per_unit}}`` (u128 as byte strings)."""
        return {k: {0: encode_u128(r.base_price), 1: encode_u128(r.price_per_unit)} for k, r in self.rates}

    @classmethod
    def from_cbor(cls, value: object) -> RateCard:
        """Strict decode."""
        if not isinstance(value, dict) or len(value) > len(JOB_KINDS):
            raise DecodeError("rate_card: expected a map of job kind to rate", field="rate_card")
        # Check every key before sorting: mixed key types (int and text) would make sorted() raise TypeError.
        for k in value:
            if not isinstance(k, int) or isinstance(k, bool) or k not in JOB_KIND_NAMES:
                raise DecodeError(f"rate_card: unknown job kind {k!r}", field="rate_card")
        rates = []
        for k in sorted(value):
            r = expect_map(value[k], frozenset({0, 1}), "rate_card.rate")
            rates.append((k, Rate(decode_u128(r[0], "rate_card.base_price"),
                                  decode_u128(r[1], "rate_card.price_per_unit"))))
        return cls(tuple(rates))


@dataclass(frozen=True, slots=True)
class RunnerRecord:
    """A runner's registration (Runner Registry 0x…01), keyed by its address."""

    address: bytes
    """Runner identity: the address of the registering secp256k1 key."""
    index: int
    """Position in the append-only active-runner array (the PresenceInput index basis, CIP-11 §7.2)."""
    stake: int
    """Bonded stake (u128)."""
    capabilities: Capabilities
    """What it serves."""
    rate_card: RateCard
    """Its prices."""
    health: Health
    """healthy / unhealthy / paused / deregistered."""
    registered_at: int
    """Height of the RunnerRegister."""
    last_heartbeat: int
    """Height of the last RunnerHeartbeat (the registration counts as one)."""
    reputation_x1e9: int
    """Reputation ×1e9 (starts at RunnerConfig.initial_reputation_x1e9)."""
    active_jobs: int
    """Jobs currently assigned to it and not settled (concurrency filter)."""
    unbonding_until: int
    """0 while registered; after RunnerDeregister the height at which the stake is returned."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {0: self.address, 1: self.index, 2: encode_u128(self.stake), 3: self.capabilities.to_cbor(),
                4: self.rate_card.to_cbor(), 5: int(self.health), 6: self.registered_at, 7: self.last_heartbeat,
                8: self.reputation_x1e9, 9: self.active_jobs, 10: self.unbonding_until}

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    @classmethod
    def from_cbor(cls, value: object) -> RunnerRecord:
        """Strict decode."""
        m = expect_map(value, frozenset(range(11)), "runner")
        health = expect_uint(m[5], "runner.health", 3)
        return cls(address=expect_bytes(m[0], "runner.address", ADDRESS_LEN),
                   index=expect_uint(m[1], "runner.index", U32_MAX), stake=decode_u128(m[2], "runner.stake"),
                   capabilities=Capabilities.from_cbor(m[3]), rate_card=RateCard.from_cbor(m[4]),
                   health=Health(health), registered_at=expect_uint(m[6], "runner.registered_at"),
                   last_heartbeat=expect_uint(m[7], "runner.last_heartbeat"),
                   reputation_x1e9=expect_uint(m[8], "runner.reputation_x1e9"),
                   active_jobs=expect_uint(m[9], "runner.active_jobs", U32_MAX),
                   unbonding_until=expect_uint(m[10], "runner.unbonding_until"))

    @classmethod
    def decode(cls, raw: bytes) -> RunnerRecord:
        """Decode canonical bytes."""
        return cls.from_cbor(decode(raw))

