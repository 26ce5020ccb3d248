"""Prometheus metrics of the node and the ``/metrics`` HTTP endpoint.

Every metric lives on the :class:`NodeMetrics` instance's own registry (not the
process-global default one), under the ``cowboy`` namespace, so that several
nodes in one test process never collide and nothing else leaks into the output.

Label values must stay low-cardinality: ``route`` is the route *template*
(``/block/{height}``, not ``/block/17``), ``code`` is an error code.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import choose_encoder

from cowboy_node.chain.mempool import EVICTION_REASONS as MEMPOOL_EVICTION_REASONS
from cowboy_node.execution import presence_certificates
from cowboy_node.execution.context import EobReport
from cowboy_node.observability.job_activity import TRANSITIONS as JOB_TRANSITIONS
from cowboy_node.observability.job_activity import JobActivity
from cowboy_node.types.receipt import Receipt
from cowboy_protocol.types.presence_instructions import SubmitPresenceCertificate
from cowboy_protocol.types.transaction import Transaction

NAMESPACE = "cowboy"

BLOCK_INTERVAL_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
"""Seconds between consecutive commits; centred on the default 1 s block time."""
TXS_PER_BLOCK_BUCKETS = (0, 1, 10, 100, 500, 1000, 2000, 5000, 10000)
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Seconds spent building/executing or committing one block (well under the block time when healthy)."""
EOB_STEP_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Seconds spent in one End-of-Block step (most steps take well under a millisecond)."""
SELECTION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)
"""Seconds of one committee selection (goal: ≤ 2 ms for M = 1 over 5,000 eligible runners)."""
PUSH_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Seconds from an assignment's block commit to the runner's JobAck (goal: ≤ 5 ms; the buckets below it tell a
healthy push from one at the edge)."""
MEMPOOL_FULL_LOG_INTERVAL_S = 5.0
"""At most one "mempool full" log line per this many seconds (:meth:`NodeMetrics.mempool_refused_full`)."""


class MempoolStats(Protocol):
    """What :meth:`NodeMetrics.observe_mempool` reads (``chain.mempool.Mempool`` provides it)."""

    def __len__(self) -> int:
        """Pooled transactions."""
        ...

    @property
    def size_bytes(self) -> int:
        """Pooled body bytes."""
        ...

    @property
    def pending_count(self) -> int:
        """Executable pooled transactions."""
        ...

    @property
    def queued_count(self) -> int:
        """Nonce-gapped pooled transactions."""
        ...

    @property
    def evicted(self) -> Mapping[str, int]:
        """Cumulative evictions by reason."""
        ...


def _version() -> str:
    try:
        return metadata.version("cowboy-node")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "unknown"


CONSENSUS_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds from a view's proposal to its notarization or finalization."""


@dataclass(frozen=True)
class _Spec:
    """One metric of :class:`NodeMetrics`, as registered (the exposition lists them in this table's order)."""

    kind: type[Counter] | type[Gauge] | type[Histogram]
    """Prometheus type."""
    name: str
    """Name under the ``cowboy`` namespace (a counter's exposition adds ``_total``)."""
    help: str
    """The ``# HELP`` text."""
    labels: tuple[str, ...] = ()
    """Label names."""
    buckets: tuple[float, ...] = ()
    """A histogram's buckets (the client adds ``+Inf``)."""
    attr: str | None = None
    """The :class:`NodeMetrics` attribute, when it is not ``name``."""
    zeros: Iterable[str] = ()
    """Values of the one label exported at 0 from the start (so ``rate()`` works from the first event)."""


METRICS: tuple[_Spec, ...] = (
    _Spec(Gauge, "height", "Height of the last committed block."),
    _Spec(Histogram, "block_interval_seconds", "Wall-clock time between two consecutive block commits.",
        buckets=BLOCK_INTERVAL_BUCKETS, attr="block_interval"),
    _Spec(Histogram, "txs_per_block", "Transactions included per committed block.", buckets=TXS_PER_BLOCK_BUCKETS),
    _Spec(Gauge, "mempool_txs", "Transactions held in the mempool.", attr="mempool_size"),
    _Spec(Gauge, "mempool_bytes", "Encoded bytes held in the mempool."),
    _Spec(Gauge, "mempool_pending", "Pooled transactions that are executable (continue their sender's account nonce)."),
    _Spec(Gauge, "mempool_queued", "Pooled transactions behind a nonce gap (not executable until the gap fills)."),
    _Spec(Counter, "mempool_evicted", "Transactions the mempool dropped on its own, by reason: queued_expired, "
        "queued_for_pending, queued_cap, priority, stale.", labels=("reason",), zeros=MEMPOOL_EVICTION_REASONS),
    _Spec(Counter, "mempool_full", "Admissions refused because the pool (mempool_full) or its queued space "
        "(queued_full) was full."),
    _Spec(Histogram, "block_commit_duration_seconds", "Time to write one block (synced LevelDB batch).",
        buckets=DURATION_BUCKETS, attr="commit_duration"),
    _Spec(Histogram, "block_execution_duration_seconds", "Time to build and execute one block, end-of-block included.",
        buckets=DURATION_BUCKETS, attr="execution_duration"),
    _Spec(Gauge, "basefee", "Basefee of the last committed block, per metered resource.", labels=("resource",)),
    _Spec(Counter, "txs_rejected", "Transactions refused at admission, by error code.", labels=("code",)),
    _Spec(Counter, "tx_internal_errors", "Transactions failed (receipt internal_error) or left out of a block "
        "because of an unexpected exception in the node's own code; each one is logged with its hash."),
    _Spec(Counter, "block_production_failures", "Block production attempts that raised outside transaction execution "
        "(logged; the producer tries again at the next slot)."),
    # Consensus (threshold Simplex, cowboy_node/consensus/service/; the ConsensusMetrics methods below).
    _Spec(Gauge, "consensus_view", "Current consensus view."),
    _Spec(Gauge, "consensus_finalized_height", "Height of the last finalized, committed block."),
    _Spec(Gauge, "consensus_peers", "Validator peers with an authenticated connection."),
    _Spec(Gauge, "consensus_voting", "1 while this validator signs votes; 0 while it abstains (the double-sign "
        "guard: started without its vote journal) or stopped on a journal error."),
    _Spec(Histogram, "consensus_notarization_seconds", "From a view's proposal (built here or first seen) to its "
        "notarization.", buckets=CONSENSUS_LATENCY_BUCKETS),
    _Spec(Histogram, "consensus_finalization_seconds", "From a view's proposal (built here or first seen) to its "
        "finalization.", buckets=CONSENSUS_LATENCY_BUCKETS),
    _Spec(Counter, "consensus_nullifications", "Views that ended nullified."),
    _Spec(Counter, "consensus_certificates", "Certificates formed or received, by kind.", labels=("kind",)),
    _Spec(Counter, "consensus_messages_sent", "Consensus messages broadcast, by kind.", labels=("kind",)),
    _Spec(Counter, "consensus_messages_received", "Consensus messages received from peers, by kind.", labels=("kind",)),
    _Spec(Counter, "consensus_bad_messages", "Peer messages refused, by reason.", labels=("reason",)),
    _Spec(Counter, "consensus_faults", "Protocol violations seen (equivocation, impersonation, bad signature, "
        "safety), by kind; kept as evidence.", labels=("reason",)),
    _Spec(Counter, "presence_gossip", "Presence announcements from other validators (CIP-11 §8.2), by result: "
        "accepted or the refusal reason.", labels=("result",)),
    _Spec(Counter, "tx_gossip", "Transaction gossip between validators (cowboy_node/node/tx_gossip.py), by result: "
        "sent, batches_sent, received, admitted, rejected, malformed (messages), queue_full (dropped, receive queue "
        "full).", labels=("result",)),
    _Spec(Counter, "consensus_invalid_blocks", "Proposals this validator refused to vote for, by reason.",
        labels=("reason",)),
    _Spec(Counter, "consensus_synced_blocks", "Finalized blocks fetched from peers and committed while catching up."),
    _Spec(Counter, "consensus_requests_refused", "Peer requests (sync runs, block bodies, certificate fetches) this "
        "validator refused to serve, by kind and reason (node/sync_server.py).", labels=("kind", "reason")),
    _Spec(Counter, "consensus_sync_refused", "Sync answers this validator refused or gave up waiting for, by reason "
        "(node/sync_client.py).", labels=("reason",)),
    _Spec(Counter, "consensus_sync_served_bytes", "Bytes of stored blocks sent to syncing peers."),
    _Spec(Counter, "rpc_requests", "HTTP API requests, by route template and status code.", labels=("route", "status")),
    # HTTP API connection limits (cowboy_node/rpc/conn_limits.py).
    _Spec(Gauge, "rpc_connections", "Open HTTP API connections (admitted ones)."),
    _Spec(Counter, "rpc_connections_refused", "HTTP API connections refused at accept, by reason: global_cap "
        "(rpc.max_connections, lowered to fit the open-file limit) or per_ip_cap (rpc.max_connections_per_ip).",
        labels=("reason",), zeros=("global_cap", "per_ip_cap")),
    _Spec(Counter, "rpc_header_timeouts", "HTTP API connections closed because the request headers were not complete "
        "within rpc.header_timeout_ms."),
    # Read-only calls (POST /actor/read) through the bounded read pool (cowboy_node/rpc/read_pool.py).
    _Spec(Gauge, "rpc_read_queue_depth", "Read-only calls waiting for the read pool's worker (at most "
        "rpc.read_max_queue)."),
    _Spec(Counter, "rpc_read_rejected", "Read-only calls refused or cut short, by reason: busy_queue (503, wait "
        "queue full, or waited rpc.read_max_wait_ms without starting), busy_budget (503, execution budget spent), "
        "rate_limited (429, per-client rate), timeout (stopped at rpc.read_call_timeout_ms: error read_timeout).",
        labels=("reason",)),
    _Spec(Histogram, "rpc_read_seconds", "Wall-clock execution time of one read-only call in the read pool (queue "
        "wait excluded).", buckets=DURATION_BUCKETS),
    _Spec(Counter, "timers_fired", "Timer handlers run by DeliverTimers (successful or not)."),
    _Spec(Counter, "timers_deferred", "Blocks whose timer lane budget closed while due timers remained (those fire "
        "first in the next block)."),
    _Spec(Counter, "timers_expired", "Timers removed without firing because their TTL (expires_at) had passed."),
    _Spec(Counter, "timers_self_destructed", "Timers removed without firing because their fee payer could not cover "
        "the maximum cost of a fire."),
    _Spec(Counter, "timers_terminal", "Timers (and Mailbox entries) that ended without running, by reason, counted "
        "from the committed blocks' events: expired (TTL), insufficient_funds (fee payer could not cover a fire), "
        "mailbox_dropped, cancelled_by_governance (rpc/event_queries.TERMINAL_REASONS).", labels=("reason",)),
    _Spec(Counter, "mailbox_delivered", "Mailbox entries run by End-of-Block ExecuteMailbox (successful or not)."),
    _Spec(Counter, "mailbox_dropped", "Mailbox entries removed unrun because their fee payer could not cover them."),
    _Spec(Gauge, "mailbox_pending", "Mailbox entries left pending after the last block's ExecuteMailbox."),
    _Spec(Histogram, "eob_step_seconds", "Wall-clock time of one End-of-Block step, by step name.",
        labels=("step",), buckets=EOB_STEP_BUCKETS, attr="eob_step_duration"),
    _Spec(Counter, "job_transitions", "Job events in committed blocks: submitted, assigned (first selection and "
        "re-selections), committed and revealed results, settled and failed jobs.",
        labels=("transition",), zeros=JOB_TRANSITIONS),
    _Spec(Counter, "job_reselections", "Timeout re-selections of a job's committee (CIP-11 §11.2)."),
    _Spec(Histogram, "job_selection_seconds", "Wall time of committee selection as execution ran it, per section: "
        "phase=filter (registry scan and filter chain), phase=draw (present-first partition and weighted draw).",
        labels=("phase",), buckets=SELECTION_BUCKETS, attr="job_selection"),
    # CIP-11 transport (cowboy_node/transport/service.py reports through transport_event/_gauges, push_latency).
    _Spec(Counter, "transport_events", "CIP-11 transport events by kind: handshake (admission outcome), frame "
        "(received, by type), goodbye (local:/peer: reason), ack (accepted, duplicate, reject, hard_failure), "
        "dispatch (pushed, cancels, no_session, not_present), result (commit/result forwarded or refused, protocol "
        "errors), quic (QUIC-layer counters: ignored datagrams, Retry, refusals, decode and stream errors).",
        labels=("kind", "label")),
    _Spec(Gauge, "runners_connected", "Runner sessions authenticated on this validator."),
    _Spec(Gauge, "runners_present", "Runners in this validator's local presence."),
    _Spec(Histogram, "push_latency_seconds", "Assignment block commit to the runner's JobAck{Accepted}.",
        buckets=PUSH_LATENCY_BUCKETS),
    _Spec(Counter, "presence_certificates", "CIP-11 Mode A SubmitPresenceCertificate transactions in committed "
        "blocks, by outcome: accepted, or the refusal code (mode_a_disabled, too_few_receipts, duplicate_receipt, "
        "foreign_epoch, stale_receipt, bad_signature, not_in_subset, anchor_not_newer, ...).",
        labels=("outcome",), zeros=("accepted", *presence_certificates.REFUSAL_CODES)),
    _Spec(Gauge, "present_pool_size", "Runners marked present by the PresenceInput of the last committed block.",
        attr="present_pool"),
)
"""Every metric of :class:`NodeMetrics` but ``build_info`` (an Info, registered first)."""


class NodeMetrics:
    """Prometheus metrics of the node (namespace ``cowboy``), on their own registry; one attribute per row of
    :data:`METRICS`."""

    height: Gauge
    block_interval: Histogram
    txs_per_block: Histogram
    mempool_size: Gauge
    mempool_bytes: Gauge
    mempool_pending: Gauge
    mempool_queued: Gauge
    mempool_evicted: Counter
    mempool_full: Counter
    commit_duration: Histogram
    execution_duration: Histogram
    basefee: Gauge
    txs_rejected: Counter
    tx_internal_errors: Counter
    block_production_failures: Counter
    consensus_view: Gauge
    consensus_finalized_height: Gauge
    consensus_peers: Gauge
    consensus_voting: Gauge
    consensus_notarization_seconds: Histogram
    consensus_finalization_seconds: Histogram
    consensus_nullifications: Counter
    consensus_certificates: Counter
    consensus_messages_sent: Counter
    consensus_messages_received: Counter
    consensus_bad_messages: Counter
    consensus_faults: Counter
    presence_gossip: Counter
    tx_gossip: Counter
    consensus_invalid_blocks: Counter
    consensus_synced_blocks: Counter
    consensus_requests_refused: Counter
    consensus_sync_refused: Counter
    consensus_sync_served_bytes: Counter
    rpc_requests: Counter
    rpc_connections: Gauge
    rpc_connections_refused: Counter
    rpc_header_timeouts: Counter
    rpc_read_queue_depth: Gauge
    rpc_read_rejected: Counter
    rpc_read_seconds: Histogram
    timers_fired: Counter
    timers_deferred: Counter
    timers_expired: Counter
    timers_self_destructed: Counter
    timers_terminal: Counter
    mailbox_delivered: Counter
    mailbox_dropped: Counter
    mailbox_pending: Gauge
    eob_step_duration: Histogram
    job_transitions: Counter
    job_reselections: Counter
    job_selection: Histogram
    transport_events: Counter
    runners_connected: Gauge
    runners_present: Gauge
    push_latency_seconds: Histogram
    presence_certificates: Counter
    present_pool: Gauge

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry: CollectorRegistry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.build_info = Info("build", "Version of the running cowboy-node.", namespace=NAMESPACE, registry=r)
        self.build_info.info({"version": _version()})
        for spec in METRICS:
            metric: Counter | Gauge | Histogram
            if spec.kind is Histogram:
                metric = Histogram(spec.name, spec.help, spec.labels, namespace=NAMESPACE, registry=r,
                                   buckets=spec.buckets)
            else:
                metric = spec.kind(spec.name, spec.help, spec.labels, namespace=NAMESPACE, registry=r)
            for value in spec.zeros:
                metric.labels(value)
            setattr(self, spec.attr or spec.name, metric)
        self._mempool_evicted_seen: dict[str, int] = {}
        self._mempool_full_logged_at: float | None = None

    def transport_event(self, kind: str, label: str) -> None:
        """Count one transport event (see ``cowboy_transport_events_total``)."""
        self.transport_events.labels(kind=kind, label=label).inc()

    def transport_gauges(self, *, connected: int, present: int) -> None:
        """Current authenticated sessions and local-presence size."""
        self.runners_connected.set(connected)
        self.runners_present.set(present)

    def push_latency(self, seconds: float) -> None:
        """Commit → JobAck{Accepted} of one push."""
        self.push_latency_seconds.observe(seconds)

    # ConsensusMetrics (cowboy_node/consensus/service/ports.py): what consensus reports, under the same names.

    def consensus_message(self, direction: str, kind: str) -> None:
        """One consensus message ``sent`` or ``received``, by kind."""
        (self.consensus_messages_sent if direction == "sent" else self.consensus_messages_received).labels(
            kind=kind).inc()

    def consensus_bad_message(self, reason: str) -> None:
        """A peer message refused (``cowboy_consensus_bad_messages_total``)."""
        self.consensus_bad_messages.labels(reason=reason).inc()

    def consensus_fault(self, reason: str) -> None:
        """A protocol violation seen (``cowboy_consensus_faults_total``)."""
        self.consensus_faults.labels(reason=reason).inc()

    def consensus_invalid_block(self, reason: str) -> None:
        """A proposal refused (``cowboy_consensus_invalid_blocks_total``)."""
        self.consensus_invalid_blocks.labels(reason=reason).inc()

    def consensus_certificate(self, kind: str) -> None:
        """A certificate formed or received; a nullification also counts a nullified view."""
        self.consensus_certificates.labels(kind=kind).inc()
        if kind == "nullification":
            self.consensus_nullifications.inc()

    def consensus_latency(self, stage: str, seconds: float) -> None:
        """Proposal → ``notarization`` or ``finalization`` of one view."""
        (self.consensus_notarization_seconds if stage == "notarization" else
         self.consensus_finalization_seconds).observe(seconds)

    def consensus_gauges(self, *, view: int | None = None, finalized_height: int | None = None,
                         peers: int | None = None, voting: bool | None = None) -> None:
        """Set the consensus gauges given."""
        if view is not None:
            self.consensus_view.set(view)
        if finalized_height is not None:
            self.consensus_finalized_height.set(finalized_height)
        if peers is not None:
            self.consensus_peers.set(peers)
        if voting is not None:
            self.consensus_voting.set(1 if voting else 0)

    def block_production_failed(self) -> None:
        """A build or commit raised outside transaction execution."""
        self.block_production_failures.inc()

    def block_observer(self) -> StepTimer:
        """A fresh :class:`StepTimer` for one block's End of Block."""
        return StepTimer()

    def observe_jobs(self, activity: JobActivity) -> None:
        """Record what one committed block did to jobs (``observability.job_activity.block_job_activity``)."""
        for name, n in activity.transitions.items():
            if n:
                self.job_transitions.labels(transition=name).inc(n)
        self.job_reselections.inc(activity.reselections)
        for section, seconds in activity.selection:
            self.job_selection.labels(phase=section.removeprefix("job_")).observe(seconds)
        self.present_pool.set(activity.present_pool)

    def observe_presence_certificates(self, transactions: Iterable[Transaction], receipts: Iterable[Receipt]) -> None:
        """Count the committed block's Mode A certificates by outcome (``cowboy_presence_certificates_total``)."""
        for tx, receipt in zip(transactions, receipts, strict=True):
            if isinstance(tx.instruction, SubmitPresenceCertificate):
                self.presence_certificates.labels(outcome=receipt.error_code or "accepted").inc()

    def observe_mempool(self, pool: MempoolStats) -> None:
        """Mempool gauges, and ``cowboy_mempool_evicted_total`` brought up to the pool's cumulative ``evicted``."""
        self.mempool_size.set(len(pool))
        self.mempool_bytes.set(pool.size_bytes)
        self.mempool_pending.set(pool.pending_count)
        self.mempool_queued.set(pool.queued_count)
        seen = self._mempool_evicted_seen
        for reason, total in pool.evicted.items():
            before = seen.get(reason, 0)
            if total < before:  # a new pool: its counts start again from zero
                before = 0
            if total > before:
                self.mempool_evicted.labels(reason=reason).inc(total - before)
            seen[reason] = total

    def mempool_refused_full(self) -> bool:
        """Count one admission refused for a full pool; True when a log line is due (at most one every
        :data:`MEMPOOL_FULL_LOG_INTERVAL_S`)."""
        self.mempool_full.inc()
        now = time.monotonic()
        last = self._mempool_full_logged_at
        if last is not None and now - last < MEMPOOL_FULL_LOG_INTERVAL_S:
            return False
        self._mempool_full_logged_at = now
        return True

    def observe_block(self, *, height: int, interval_s: float | None, tx_count: int, commit_s: float,
                      execution_s: float, basefee_cycles: int, basefee_cells: int) -> None:
        """Record one committed block. ``interval_s`` is None for the first block after start-up."""
        self.height.set(height)
        if interval_s is not None:
            self.block_interval.observe(interval_s)
        self.txs_per_block.observe(tx_count)
        self.commit_duration.observe(commit_s)
        self.execution_duration.observe(execution_s)
        self.basefee.labels(resource="cycles").set(basefee_cycles)
        self.basefee.labels(resource="cells").set(basefee_cells)

    def observe_timers(self, *, fired: int, deferred: bool, expired: int, self_destructed: int) -> None:
        """Record one committed block's DeliverTimers outcome."""
        self.timers_fired.inc(fired)
        if deferred:
            self.timers_deferred.inc()
        self.timers_expired.inc(expired)
        self.timers_self_destructed.inc(self_destructed)

    def observe_eob(self, report: EobReport) -> None:
        """Record what one committed block's End of Block did (``BlockContext.eob``)."""
        # deferred counts blocks that left due timers behind (FIFO lane closed, or Globalbox fires queued).
        self.observe_timers(fired=report.timers_fired, deferred=report.timers_deferred > 0,
                            expired=report.timers_expired, self_destructed=report.timers_self_destructed)
        self.mailbox_delivered.inc(report.mailbox_delivered)
        self.mailbox_dropped.inc(report.mailbox_dropped)
        self.mailbox_pending.set(report.mailbox_left)

    def observe_eob_steps(self, durations: Iterable[tuple[str, float]]) -> None:
        """Record the ``(step name, seconds)`` of one block's End-of-Block steps."""
        for step, seconds in durations:
            self.eob_step_duration.labels(step=step).observe(seconds)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The registry rendered for an HTTP ``Accept`` header: (body, content type)."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


class StepTimer:
    """Times the steps of one block's End of Block: pass it as ``observe`` to the execution layer.

    ``execution/`` never reads the clock; it calls ``observe(step_name)`` and runs the step inside the
    returned context manager. The durations are only kept here and recorded once the block commits.
    """

    def __init__(self) -> None:
        self.durations: list[tuple[str, float]] = []
        """``(step name, seconds)`` in execution order."""

    @contextlib.contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.durations.append((step, time.perf_counter() - t0))


async def start_metrics_server(metrics: NodeMetrics, host: str, port: int) -> web.AppRunner:
    """Serve ``GET /metrics`` on ``host:port``; returns the started runner (the caller must ``cleanup()`` it).

    Raises ``OSError`` if the address cannot be bound (nothing is left running then).
    """

    async def handle_metrics(request: web.Request) -> web.Response:
        body, content_type = metrics.exposition(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def handle_index(request: web.Request) -> web.Response:
        return web.Response(text="cowboy-node metrics: see /metrics\n")

    app = web.Application()
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/", handle_index)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


__all__ = [
    "NAMESPACE",
    "NodeMetrics",
    "StepTimer",
    "start_metrics_server",
]
