"""The WAN model of the Simplex simulator (issue 33 §2; used by ``simnet.Sim(wan=...)``): per-link latency,
jitter, loss, slow validators, the scheme's costs as virtual CPU time, and the figures of a run.

Every link gets a fixed one-way latency drawn once from a log-normal (clipped to 30–150 ms) by its own seeded
generator; each message adds exponential jitter; 1 % of messages are lost; each validator is one CPU charged
:class:`CryptoCosts` for the scheme operations it performs (measured on the real BLS scheme by
``bench/consensus_scale.py``, fixed in the unit test), so events arriving while it is busy wait.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cowboy_node.consensus.simplex.scheme import Scheme

if TYPE_CHECKING:
    from tests.unit.consensus.simnet import Sim, SimResult


@dataclass(frozen=True, slots=True)
class CryptoCosts:
    """Virtual CPU time, in µs, of one call of each scheme operation (charged to the validator calling it)."""

    partial_sign_us: int
    """:meth:`Scheme.sign`: one threshold partial."""
    partial_verify_us: int
    """:meth:`Scheme.verify`: one partial checked alone."""
    pair_verify_us: int
    """:meth:`Scheme.verify_pair`: a vote's two partials (one pairing product)."""
    recover_pair_us: int
    """:meth:`Scheme.recover_pair` with the seed still unknown: a quorum's partials interpolated twice, one
    pairing product."""
    recover_known_seed_us: int
    """:meth:`Scheme.recover_pair` once the round's seed is known: one interpolation, one pairing check."""
    certificate_verify_us: int
    """:meth:`Scheme.verify_certificate`."""
    recover_checked_us: int
    """:meth:`Scheme.recover` (the checked path after a failed optimistic assembly): a batched check."""
    message_us: int
    """Every message received: decoding and the engine's own work."""


FIXED_COSTS = CryptoCosts(partial_sign_us=500, partial_verify_us=2000, pair_verify_us=3000, recover_pair_us=9000,
                          recover_known_seed_us=5000, certificate_verify_us=2000, recover_checked_us=15000,
                          message_us=60)
"""Costs of the unit test (n = 100 orders of magnitude on this machine), so that it never reads a clock."""


class CostingScheme:
    """A scheme that charges :class:`CryptoCosts` for each call it forwards (``spent_us``, taken by the sim)."""

    def __init__(self, inner: Scheme, costs: CryptoCosts) -> None:
        self._inner, self._costs = inner, costs
        self._seeds: set[bytes] = set()
        self._signed: set[bytes] = set()
        self.spent_us = 0
        """Virtual µs spent since the last :meth:`take`."""

    def take(self) -> int:
        spent, self.spent_us = self.spent_us, 0
        return spent

    @property
    def n(self) -> int:
        return self._inner.n

    @property
    def quorum(self) -> int:
        return self._inner.quorum

    def sign(self, message: bytes) -> bytes:
        if message not in self._signed:  # as ThresholdScheme: a round's seed partial is signed once
            self._signed.add(message)
            self.spent_us += self._costs.partial_sign_us
        return self._inner.sign(message)

    def verify(self, signer: int, message: bytes, signature: bytes) -> bool:
        self.spent_us += self._costs.partial_verify_us
        return self._inner.verify(signer, message, signature)

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        self.spent_us += self._costs.recover_checked_us
        return self._inner.recover(message, partials)

    def verify_certificate(self, message: bytes, signature: bytes) -> bool:
        self.spent_us += self._costs.certificate_verify_us
        return self._inner.verify_certificate(message, signature)

    def verify_pair(self, signer: int, message: bytes, signature: bytes, seed_message: bytes, seed: bytes) -> bool:
        self.spent_us += self._costs.pair_verify_us
        return self._inner.verify_pair(signer, message, signature, seed_message, seed)

    def recover_pair(self, message: bytes, partials: Sequence[tuple[int, bytes]], seed_message: bytes,
                     seed_partials: Sequence[tuple[int, bytes]]) -> tuple[bytes, bytes] | None:
        known = seed_message in self._seeds  # as ThresholdScheme: a verified seed is reused, not interpolated
        self.spent_us += self._costs.recover_known_seed_us if known else self._costs.recover_pair_us
        got = self._inner.recover_pair(message, partials, seed_message, seed_partials)
        if got is not None:
            self._seeds.add(seed_message)
        return got


@dataclass(frozen=True, slots=True)
class Wan:
    """A wide-area network: per-link one-way latency, jitter, loss, CPU costs and slow validators."""

    median_ms: float = 70.0
    """Median of the per-link log-normal one-way latency."""
    sigma: float = 0.35
    """Log-normal shape: with the median 70 ms, 5 % of links under ~40 ms and 5 % over ~125 ms."""
    lo_ms: float = 30.0
    hi_ms: float = 150.0
    """Per-link latencies are clipped to [lo_ms, hi_ms]."""
    jitter_ms: float = 5.0
    """Mean of the exponential delay added to each message (queueing; reorders messages now and then)."""
    loss: float = 0.01
    """Probability that a message is lost."""
    slow: int = 1
    """How many validators are slow (chosen by the seed)."""
    slow_factor: float = 3.0
    """A slow validator's CPU costs are this many times the others'."""
    slow_delay_ms: int = 50
    """And each of its outputs leaves this much later (a loaded machine, a GC pause)."""
    costs: CryptoCosts = FIXED_COSTS


@dataclass
class WanStats:
    """What a WAN run measured (simulated time, ms)."""

    latencies_ms: list[float] = field(default_factory=list)
    """Per honest validator and finalized block: finalization time − the leader's ProposalWanted time."""
    latency_views: list[int] = field(default_factory=list)
    """The view of each entry of ``latencies_ms``."""
    proposers: dict[int, int] = field(default_factory=dict)
    """View → the validator that was asked for its block."""
    sent: int = 0
    """Messages handed to the network (to another validator), lost ones included."""
    lost: int = 0
    """Of those, lost."""
    delays_ms: list[float] = field(default_factory=list)
    """One-way delay of every delivered message (link latency + jitter)."""
    links_ms: list[float] = field(default_factory=list)
    """The drawn per-link latencies (each unordered pair once)."""
    bytes_sent: dict[int, int] = field(default_factory=dict)
    """Validator → bytes it sent (encoded messages × recipients, lost ones included)."""
    nullified: set[int] = field(default_factory=set)
    """Views some honest validator saw nullified."""
    slow: frozenset[int] = frozenset()
    late_votes: dict[int, int] = field(default_factory=dict)
    """Signer → its votes an honest validator received for a view it had already finalized (too late to count
    towards a certificate)."""
    votes: dict[int, int] = field(default_factory=dict)
    """Signer → its votes honest validators received (the denominator of ``late_votes``)."""
    cpu_us: dict[int, int] = field(default_factory=dict)
    """Validator → virtual CPU µs spent."""


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in (0, 100])."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class WanFigures:
    """The figures of one WAN run (issue 33 §2), simulated time."""

    n: int
    views: int
    """Views entered (the highest view an honest validator reached)."""
    finalized: int
    """Blocks finalized by the slowest honest validator."""
    latency_p50_ms: float
    latency_p99_ms: float
    """Finalization latency over every (honest validator, finalized block): from the leader's ProposalWanted."""
    median_one_way_ms: float
    """Median one-way delay of the delivered messages (link + jitter)."""
    median_link_ms: float
    """Median of the drawn per-link latencies."""
    nullified_per_1000: float
    """Views nullified (seen by any honest validator) per 1,000 views."""
    bytes_per_validator_per_view: float
    """Bytes sent by an honest validator per view (mean over honest validators)."""
    cpu_ms_per_view: float
    """Virtual CPU per view per honest validator (the :class:`CryptoCosts` charged)."""


def wan_figures(sim: Sim, r: SimResult) -> WanFigures:
    """Figures of a finished WAN run (``sim.wan`` set)."""
    st = sim.stats
    views = max(r.views[i] for i in r.honest if i in r.views)
    honest = [i for i in r.honest if i in r.views]
    return WanFigures(
        n=sim.n, views=views, finalized=min(len(r.logs[i].finalized) for i in honest),
        latency_p50_ms=percentile(st.latencies_ms, 50), latency_p99_ms=percentile(st.latencies_ms, 99),
        median_one_way_ms=statistics.median(st.delays_ms), median_link_ms=statistics.median(st.links_ms),
        nullified_per_1000=1000 * len(st.nullified) / views,
        bytes_per_validator_per_view=sum(st.bytes_sent[i] for i in honest) / len(honest) / views,
        cpu_ms_per_view=sum(st.cpu_us[i] for i in honest) / len(honest) / views / 1000)
