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


class NodeMetrics:
    """Prometheus metrics of the node (namespace ``cowboy``), on their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry: CollectorRegistry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        ns = NAMESPACE
        self.build_info = Info("build", "Version of the running cowboy-node.", namespace=ns, registry=r)
        self.build_info.info({"version": _version()})
        self.height = Gauge("height", "Height of the last committed block.", namespace=ns, registry=r)
        self.block_interval = Histogram(
            "block_interval_seconds", "Wall-clock time between two consecutive block commits.",
            namespace=ns, registry=r, buckets=BLOCK_INTERVAL_BUCKETS)
        self.txs_per_block = Histogram(
            "txs_per_block", "Transactions included per committed block.",
            namespace=ns, registry=r, buckets=TXS_PER_BLOCK_BUCKETS)
        self.mempool_size = Gauge("mempool_txs", "Transactions held in the mempool.", namespace=ns, registry=r)
        self.mempool_bytes = Gauge("mempool_bytes", "Encoded bytes held in the mempool.", namespace=ns, registry=r)
        self.mempool_pending = Gauge(
            "mempool_pending", "Pooled transactions that are executable (continue their sender's account nonce).",
            namespace=ns, registry=r)
        self.mempool_queued = Gauge(
            "mempool_queued", "Pooled transactions behind a nonce gap (not executable until the gap fills).",
            namespace=ns, registry=r)
        self.mempool_evicted = Counter(
            "mempool_evicted", "Transactions the mempool dropped on its own, by reason: queued_expired, "
            "queued_for_pending, queued_cap, priority, stale.", ["reason"], namespace=ns, registry=r)
        for reason in MEMPOOL_EVICTION_REASONS:  # exported at 0 from the start
            self.mempool_evicted.labels(reason=reason)
        self._mempool_evicted_seen: dict[str, int] = {}
        self.mempool_full = Counter(
            "mempool_full", "Admissions refused because the pool (mempool_full) or its queued space (queued_full) "
            "was full.", namespace=ns, registry=r)
        self._mempool_full_logged_at: float | None = None
        self.commit_duration = Histogram(
            "block_commit_duration_seconds", "Time to write one block (synced LevelDB batch).",
            namespace=ns, registry=r, buckets=DURATION_BUCKETS)
        self.execution_duration = Histogram(
            "block_execution_duration_seconds", "Time to build and execute one block, end-of-block included.",
            namespace=ns, registry=r, buckets=DURATION_BUCKETS)
        self.basefee = Gauge("basefee", "Basefee of the last committed block, per metered resource.",
                             ["resource"], namespace=ns, registry=r)
        self.txs_rejected = Counter("txs_rejected", "Transactions refused at admission, by error code.",
                                    ["code"], namespace=ns, registry=r)
        self.tx_internal_errors = Counter(
            "tx_internal_errors", "Transactions failed (receipt internal_error) or left out of a block because "
            "of an unexpected exception in the node's own code; each one is logged with its hash.",
            namespace=ns, registry=r)
        self.block_production_failures = Counter(
            "block_production_failures", "Block production attempts that raised outside transaction execution "
            "(logged; the producer tries again at the next slot).", namespace=ns, registry=r)
        # Consensus (threshold Simplex, cowboy_node/node/consensus_service.py).
        self.consensus_view = Gauge("consensus_view", "Current consensus view.", namespace=ns, registry=r)
        self.consensus_finalized_height = Gauge("consensus_finalized_height", "Height of the last finalized, "
                                                "committed block.", namespace=ns, registry=r)
        self.consensus_peers = Gauge("consensus_peers", "Validator peers with an authenticated connection.",
                                     namespace=ns, registry=r)
        self.consensus_voting = Gauge("consensus_voting", "1 while this validator signs votes; 0 while it abstains "
                                      "(the double-sign guard: started without its vote journal) or stopped on a "
                                      "journal error.", namespace=ns, registry=r)
        latency = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
        self.consensus_notarization_seconds = Histogram(
            "consensus_notarization_seconds", "From a view's proposal (built here or first seen) to its "
            "notarization.", namespace=ns, registry=r, buckets=latency)
        self.consensus_finalization_seconds = Histogram(
            "consensus_finalization_seconds", "From a view's proposal (built here or first seen) to its "
            "finalization.", namespace=ns, registry=r, buckets=latency)
        self.consensus_nullifications = Counter("consensus_nullifications", "Views that ended nullified.",
                                                namespace=ns, registry=r)
        self.consensus_certificates = Counter("consensus_certificates", "Certificates formed or received, by kind.",
                                              ["kind"], namespace=ns, registry=r)
        self.consensus_messages_sent = Counter("consensus_messages_sent", "Consensus messages broadcast, by kind.",
                                               ["kind"], namespace=ns, registry=r)
        self.consensus_messages_received = Counter("consensus_messages_received", "Consensus messages received "
                                                   "from peers, by kind.", ["kind"], namespace=ns, registry=r)
        self.consensus_bad_messages = Counter("consensus_bad_messages", "Peer messages refused, by reason.",
                                              ["reason"], namespace=ns, registry=r)
        self.consensus_faults = Counter("consensus_faults", "Protocol violations seen (equivocation, "
                                        "impersonation, bad signature, safety), by kind; kept as evidence.",
                                        ["reason"], namespace=ns, registry=r)
        self.presence_gossip = Counter("presence_gossip", "Presence announcements from other validators (CIP-11 "
                                       "§8.2), by result: accepted or the refusal reason.", ["result"],
                                       namespace=ns, registry=r)
        self.tx_gossip = Counter("tx_gossip", "Transaction gossip between validators (cowboy_node/node/tx_gossip.py), "
                                 "by result: sent, batches_sent, received, admitted, rejected, malformed "
                                 "(messages), queue_full (dropped, receive queue full).", ["result"],
                                 namespace=ns, registry=r)
        self.consensus_invalid_blocks = Counter("consensus_invalid_blocks", "Proposals this validator refused to "
                                                "vote for, by reason.", ["reason"], namespace=ns, registry=r)
        self.consensus_synced_blocks = Counter("consensus_synced_blocks", "Finalized blocks fetched from peers "
                                               "and committed while catching up.", namespace=ns, registry=r)
        self.consensus_requests_refused = Counter(
            "consensus_requests_refused", "Peer requests (sync runs, block bodies, certificate fetches) this "
            "validator refused to serve, by kind and reason (node/sync_server.py).", ["kind", "reason"],
            namespace=ns, registry=r)
        self.consensus_sync_refused = Counter(
            "consensus_sync_refused", "Sync answers this validator refused or gave up waiting for, by reason "
            "(node/sync_client.py).", ["reason"], namespace=ns, registry=r)
        self.consensus_sync_served_bytes = Counter(
            "consensus_sync_served_bytes", "Bytes of stored blocks sent to syncing peers.", namespace=ns, registry=r)
        self.rpc_requests = Counter("rpc_requests", "HTTP API requests, by route template and status code.",
                                    ["route", "status"], namespace=ns, registry=r)
        # HTTP API connection limits (cowboy_node/rpc/conn_limits.py).
        self.rpc_connections = Gauge("rpc_connections", "Open HTTP API connections (admitted ones).",
                                     namespace=ns, registry=r)
        self.rpc_connections_refused = Counter(
            "rpc_connections_refused", "HTTP API connections refused at accept, by reason: global_cap "
            "(rpc.max_connections, lowered to fit the open-file limit) or per_ip_cap (rpc.max_connections_per_ip).",
            ["reason"], namespace=ns, registry=r)
        for reason in ("global_cap", "per_ip_cap"):  # exported at 0 from the start
            self.rpc_connections_refused.labels(reason=reason)
        self.rpc_header_timeouts = Counter(
            "rpc_header_timeouts", "HTTP API connections closed because the request headers were not complete "
            "within rpc.header_timeout_ms.", namespace=ns, registry=r)
        # Read-only calls (POST /actor/read) through the bounded read pool (cowboy_node/rpc/read_pool.py).
        self.rpc_read_queue_depth = Gauge(
            "rpc_read_queue_depth", "Read-only calls waiting for the read pool's worker (at most rpc.read_max_queue).",
            namespace=ns, registry=r)
        self.rpc_read_rejected = Counter(
            "rpc_read_rejected", "Read-only calls refused or cut short, by reason: busy_queue (503, wait queue "
            "full, or waited rpc.read_max_wait_ms without starting), busy_budget (503, execution budget spent), "
            "rate_limited (429, per-client rate), timeout (stopped at rpc.read_call_timeout_ms: error read_timeout).",
            ["reason"], namespace=ns, registry=r)
        self.rpc_read_seconds = Histogram(
            "rpc_read_seconds", "Wall-clock execution time of one read-only call in the read pool (queue wait "
            "excluded).", namespace=ns, registry=r, buckets=DURATION_BUCKETS)
        self.timers_fired = Counter(
            "timers_fired", "Timer handlers run by DeliverTimers (successful or not).", namespace=ns, registry=r)
        self.timers_deferred = Counter(
            "timers_deferred", "Blocks whose timer lane budget closed while due timers remained "
            "(those fire first in the next block).", namespace=ns, registry=r)
        self.timers_expired = Counter(
            "timers_expired", "Timers removed without firing because their TTL (expires_at) had passed.",
            namespace=ns, registry=r)
        self.timers_self_destructed = Counter(
            "timers_self_destructed", "Timers removed without firing because their fee payer could not cover "
            "the maximum cost of a fire.", namespace=ns, registry=r)
        self.timers_terminal = Counter(
            "timers_terminal", "Timers (and Mailbox entries) that ended without running, by reason, counted from "
            "the committed blocks' events: expired (TTL), insufficient_funds (fee payer could not cover a fire), "
            "mailbox_dropped, cancelled_by_governance (rpc/event_queries.TERMINAL_REASONS).",
            ["reason"], namespace=ns, registry=r)
        self.mailbox_delivered = Counter(
            "mailbox_delivered", "Mailbox entries run by End-of-Block ExecuteMailbox (successful or not).",
            namespace=ns, registry=r)
        self.mailbox_dropped = Counter(
            "mailbox_dropped", "Mailbox entries removed unrun because their fee payer could not cover them.",
            namespace=ns, registry=r)
        self.mailbox_pending = Gauge(
            "mailbox_pending", "Mailbox entries left pending after the last block's ExecuteMailbox.",
            namespace=ns, registry=r)
        self.eob_step_duration = Histogram(
            "eob_step_seconds", "Wall-clock time of one End-of-Block step, by step name.", ["step"],
            namespace=ns, registry=r, buckets=EOB_STEP_BUCKETS)
        self.job_transitions = Counter(
            "job_transitions", "Job events in committed blocks: submitted, assigned (first selection and "
            "re-selections), committed and revealed results, settled and failed jobs.", ["transition"],
            namespace=ns, registry=r)
        for t in JOB_TRANSITIONS:  # exported at 0 from the start, so rate() works from the first job
            self.job_transitions.labels(transition=t)
        self.job_reselections = Counter(
            "job_reselections", "Timeout re-selections of a job's committee (CIP-11 §11.2).", namespace=ns,
            registry=r)
        self.job_selection = Histogram(
            "job_selection_seconds", "Wall time of committee selection as execution ran it, per section: "
            "phase=filter (registry scan and filter chain), phase=draw (present-first partition and weighted draw).",
            ["phase"], namespace=ns, registry=r, buckets=SELECTION_BUCKETS)
        # CIP-11 transport (cowboy_node/transport/service.py reports through the three methods below).
        self.transport_events = Counter(
            "transport_events", "CIP-11 transport events by kind: handshake (admission outcome), frame (received, by "
            "type), goodbye (local:/peer: reason), ack (accepted, duplicate, reject, hard_failure), dispatch (pushed, "
            "cancels, no_session, not_present), result (commit/result forwarded or refused, protocol errors), quic "
            "(QUIC-layer counters: ignored datagrams, Retry, refusals, decode and stream errors).",
            ["kind", "label"], namespace=ns, registry=r)
        self.runners_connected = Gauge("runners_connected", "Runner sessions authenticated on this validator.",
                                       namespace=ns, registry=r)
        self.runners_present = Gauge("runners_present", "Runners in this validator's local presence.",
                                     namespace=ns, registry=r)
        self.push_latency_seconds = Histogram(
            "push_latency_seconds", "Assignment block commit to the runner's JobAck{Accepted}.", namespace=ns,
            registry=r, buckets=PUSH_LATENCY_BUCKETS)
        self.presence_certificates = Counter(
            "presence_certificates", "CIP-11 Mode A SubmitPresenceCertificate transactions in committed blocks, by "
            "outcome: accepted, or the refusal code (mode_a_disabled, too_few_receipts, duplicate_receipt, "
            "foreign_epoch, stale_receipt, bad_signature, not_in_subset, anchor_not_newer, ...).", ["outcome"],
            namespace=ns, registry=r)
        for code in ("accepted", *presence_certificates.REFUSAL_CODES):  # exported at 0 from the start
            self.presence_certificates.labels(outcome=code)
        self.present_pool = Gauge(
            "present_pool_size", "Runners marked present by the PresenceInput of the last committed block.",
            namespace=ns, registry=r)

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
