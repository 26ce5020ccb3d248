"""Candidate filter chain of the job dispatcher (CIP-11 §7.1, §9.1; DESIGN.md §4 "Runner registry").

The chain runs in this fixed order; a runner is counted against the first
filter it fails (the per-filter counts feed the "no runner can serve this job"
error and metrics):

1. ``floor``       — health is HEALTHY and ``height − last_heartbeat ≤ heartbeat_timeout_blocks``
                     (saturating: a heartbeat "from the future" counts as fresh);
2. ``reputation``  — ``reputation_x1e9 ≥ cfg.min_reputation_x1e9``;
3. ``capability``  — the job kind is served; for HTTP jobs with a host, a domain pattern matches it;
4. ``tee``         — ``tee_required`` ⇒ some TEE offered; ``required_tee_type`` ⇒ that TEE offered;
5. ``price``       — the rate card has the kind and its ``base_price ≤ max_price``;
6. ``concurrency`` — ``active_jobs < max_concurrent_jobs``;
7. ``pool``        — no pool required, or the required pool is among the runner's pools;
8. ``excluded``    — not timed out on this job already.

Presence is deliberately not a filter (CIP-11 §7.3: present-first orders the
draw, it never removes a floor-eligible runner). The output is ordered by
address ascending: the "address ordering at block T" that the snapshot root
and the draw consume.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter, eq

from cowboy_protocol.jobs.hosts import normalized_host_matches
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_HTTP, Health, RunnerRecord

FILTER_NAMES: tuple[str, ...] = (
    "floor", "reputation", "capability", "tee", "price", "concurrency", "pool", "excluded",
)
"""Filter names in chain order (keys of the rejection report)."""
_ADDRESS = attrgetter("address")


@dataclass(frozen=True, slots=True)
class SelectionRequest:
    """What a job asks of its runners: the inputs of the filter chain that come from the job spec."""

    job_kind: int
    """CIP-11 §9.4 job kind byte."""
    http_host: str | None
    """Target host of an HTTP job (matched against ``http_domains``); None: no host constraint."""
    tee_required: bool
    """The job must run in some TEE."""
    required_tee_type: str | None
    """The job must run in this TEE type (implies a TEE); None: any or none."""
    max_price: int
    """Highest acceptable ``base_price`` for the job kind (u128)."""
    required_runner_pool: bytes | None
    """Runner pool the job is restricted to; None: any runner."""
    excluded: frozenset[bytes] = frozenset()
    """Addresses already timed out on this job (timeout re-selection, CIP-11 §11.2)."""


def eligible_with_report(runners: Iterable[RunnerRecord], req: SelectionRequest, *, height: int,
                         heartbeat_timeout_blocks: int,
                         cfg: RunnerConfig) -> tuple[list[RunnerRecord], dict[str, int]]:
    """The candidates passing the whole chain (address ascending) and the rejections per filter.

    Raises ValueError if two records share an address (the registry is keyed by address).
    """
    # One flat loop with the request unpacked into locals: this runs over the whole registry for every job
    # (CIP-11 §6.6 sizes it at ~5,000 runners), so per-runner call and attribute overhead is what costs.
    healthy = Health.HEALTHY
    kind = req.job_kind
    host = req.http_host.lower().rstrip(".") if req.http_host is not None and kind == JOB_KIND_HTTP else None
    tee_required, tee_type, max_price = req.tee_required, req.required_tee_type, req.max_price
    pool, excluded, min_rep = req.required_runner_pool, req.excluded, cfg.min_reputation_x1e9
    stale_before = height - heartbeat_timeout_blocks  # age ≤ timeout ⇔ last_heartbeat ≥ this (saturating)
    host_ok: dict[tuple[str, ...], bool] = {}  # runners often share domain lists; a per-call pure memo
    floor = rep = capability = tee = price = concurrency = pools = excl = 0
    out: list[RunnerRecord] = []
    for r in runners:
        if r.health is not healthy or r.last_heartbeat < stale_before:
            floor += 1
            continue
        if r.reputation_x1e9 < min_rep:
            rep += 1
            continue
        caps = r.capabilities
        if kind not in caps.job_kinds:
            capability += 1
            continue
        if host is not None:
            domains = caps.http_domains
            ok = host_ok.get(domains)
            if ok is None:
                ok = host_ok[domains] = normalized_host_matches(host, domains)
            if not ok:
                capability += 1
                continue
        if (tee_required and not caps.tee_types) or (tee_type is not None and tee_type not in caps.tee_types):
            tee += 1
            continue
        for k, rate in r.rate_card.rates:
            if k == kind:
                base_price = rate.base_price
                break
        else:
            base_price = None
        if base_price is None or base_price > max_price:
            price += 1
            continue
        if r.active_jobs >= caps.max_concurrent_jobs:
            concurrency += 1
            continue
        if pool is not None and pool not in caps.pools:
            pools += 1
            continue
        if r.address in excluded:
            excl += 1
            continue
        out.append(r)
    # the input order (a registry scan, a dict) must not matter: sort by address, the §9.2 candidate order
    out.sort(key=_ADDRESS)
    addresses = list(map(_ADDRESS, out))
    if any(map(eq, addresses, addresses[1:])):
        raise ValueError("duplicate runner address")
    counts = (floor, rep, capability, tee, price, concurrency, pools, excl)
    return out, dict(zip(FILTER_NAMES, counts, strict=True))


def eligible(runners: Iterable[RunnerRecord], req: SelectionRequest, *, height: int, heartbeat_timeout_blocks: int,
             cfg: RunnerConfig) -> list[RunnerRecord]:
    """The candidates passing the whole filter chain, ordered by address ascending."""
    return eligible_with_report(runners, req, height=height, heartbeat_timeout_blocks=heartbeat_timeout_blocks,
                                cfg=cfg)[0]


def filter_report(runners: Iterable[RunnerRecord], req: SelectionRequest, *, height: int,
                  heartbeat_timeout_blocks: int, cfg: RunnerConfig) -> dict[str, int]:
    """Runners rejected by each filter (each counted at its first failing filter), keyed by FILTER_NAMES."""
    return eligible_with_report(runners, req, height=height, heartbeat_timeout_blocks=heartbeat_timeout_blocks,
                                cfg=cfg)[1]
