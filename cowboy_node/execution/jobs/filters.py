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
from itertools import pairwise

from cowboy_node.types.params import RunnerConfig
from cowboy_node.types.runner import JOB_KIND_HTTP, Health, RunnerRecord

FILTER_NAMES: tuple[str, ...] = (
    "floor", "reputation", "capability", "tee", "price", "concurrency", "pool", "excluded",
)
"""Filter names in chain order (keys of the rejection report)."""


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


def host_matches(host: str, patterns: Iterable[str]) -> bool:
    """True iff ``host`` matches a pattern: exact name, ``*.suffix`` (a strict subdomain, not the apex), or ``*``.

    Comparison is ASCII case-insensitive (DNS names are); a trailing root dot on the host is ignored.
    """
    h = host.lower().rstrip(".")
    for p in patterns:
        p = p.lower()
        if p == "*" or p == h:
            return True
        if p.startswith("*.") and h.endswith(p[1:]) and len(h) > len(p) - 1:
            return True
    return False


def _first_failure(r: RunnerRecord, req: _Context) -> int:
    """Index in FILTER_NAMES of the first filter ``r`` fails, or -1 if it passes them all."""
    if r.health is not Health.HEALTHY or (req.height - r.last_heartbeat) > req.timeout:
        return 0
    if r.reputation_x1e9 < req.min_rep:
        return 1
    caps = r.capabilities
    if req.job_kind not in caps.job_kinds:
        return 2
    if req.host is not None and not host_matches(req.host, caps.http_domains):
        return 2
    if (req.tee_required and not caps.tee_types) or (
            req.tee_type is not None and req.tee_type not in caps.tee_types):
        return 3
    rate = r.rate_card.rate_for(req.job_kind)
    if rate is None or rate.base_price > req.max_price:
        return 4
    if r.active_jobs >= caps.max_concurrent_jobs:
        return 5
    if req.pool is not None and req.pool not in caps.pools:
        return 6
    if r.address in req.excluded:
        return 7
    return -1


@dataclass(frozen=True, slots=True)
class _Context:
    """The request flattened with the block context, so the per-runner check reads plain attributes."""

    job_kind: int
    """Job kind."""
    host: str | None
    """HTTP host to match (only for HTTP jobs)."""
    tee_required: bool
    """Some TEE required (``required_tee_type`` implies it through its own check)."""
    tee_type: str | None
    """Required TEE type."""
    max_price: int
    """Price ceiling."""
    pool: bytes | None
    """Required pool."""
    excluded: frozenset[bytes]
    """Timed-out runners."""
    height: int
    """Block height of the selection snapshot (T = S)."""
    timeout: int
    """HEARTBEAT_TIMEOUT_BLOCKS."""
    min_rep: int
    """Reputation threshold ×1e9."""


def _view(req: SelectionRequest, height: int, heartbeat_timeout_blocks: int, cfg: RunnerConfig) -> _Context:
    return _Context(
        job_kind=req.job_kind, host=req.http_host if req.job_kind == JOB_KIND_HTTP else None,
        tee_required=req.tee_required, tee_type=req.required_tee_type, max_price=req.max_price,
        pool=req.required_runner_pool, excluded=req.excluded, height=height, timeout=heartbeat_timeout_blocks,
        min_rep=cfg.min_reputation_x1e9)


def eligible_with_report(runners: Iterable[RunnerRecord], req: SelectionRequest, *, height: int,
                         heartbeat_timeout_blocks: int,
                         cfg: RunnerConfig) -> tuple[list[RunnerRecord], dict[str, int]]:
    """The candidates passing the whole chain (address ascending) and the rejections per filter.

    Raises ValueError if two records share an address (the registry is keyed by address).
    """
    view = _view(req, height, heartbeat_timeout_blocks, cfg)
    rejected = [0] * len(FILTER_NAMES)
    out: list[RunnerRecord] = []
    for r in runners:
        k = _first_failure(r, view)
        if k < 0:
            out.append(r)
        else:
            rejected[k] += 1
    # the input order (a registry scan, a dict) must not matter: sort by address, the §9.2 candidate order
    out.sort(key=_address)
    for a, b in pairwise(out):
        if a.address == b.address:
            raise ValueError(f"duplicate runner address {a.address.hex()}")
    return out, dict(zip(FILTER_NAMES, rejected, strict=True))


def _address(r: RunnerRecord) -> bytes:
    return r.address


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
