"""The node's CIP-11 transport: QUIC listener + one ValidatorSession per runner connection (§6, §7.4, §10).

The interface to the rest of the node is deliberately narrow (DESIGN.md §4 "Transport"), so the listener can
later move into worker processes without touching execution:

- **in**: :class:`NodeLink` — the head height, the admission verdict for a runner key, what a committed job's
  assignment is, and the normal transaction-admission path (:meth:`NodeLink.submit_transaction`);
- **out**: :meth:`TransportService.local_presence` (the registry indices the proposer writes into
  ``PresenceInput``, §8.1) and the transactions carried by result frames, forwarded unchanged;
- **events from the producer**: :meth:`TransportService.on_block_committed` — push the block's new
  assignments (§10.1), cancel pushes of jobs that ended or were re-selected (§10.5), forward the early
  reveals whose window the block opened (§10.3, ``reveal_hold``), and re-check the runners holding a session
  against the registry at the new head (§6.2, §7.4): a deregistered (or vanished) runner loses its presence and
  its session with ``Goodbye{Deregistered}`` (``{NotRegistered}``); one not HEALTHY leaves local presence.
  Each block also re-reads the governed CIP-11 constants at the new head (:meth:`NodeLink.cip11_params`:
  PRESENCE_TIMEOUT_BLOCKS, ACK_TIMEOUT_BLOCKS, OVERLAP_BLOCKS, MIN_SUBSET/MAX_SUBSET) and closes the sessions
  no longer epoch-paired-valid (§5.3: after the OVERLAP_BLOCKS cutoff, ``Goodbye{OverlapExpired}``).

Everything protocol-level lives in the sans-I/O layers (``validator_session``, ``presence``, ``push``,
``result_frames``); this module only wires them to the QUIC adapter and the node, and counts what happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cowboy_node.observability.logging import get_logger
from cowboy_node.transport.presence import LocalPresence
from cowboy_node.transport.push import Outcome, PushTracker
from cowboy_node.transport.reveal_hold import HeldReveal, RevealHold, Verdict
from cowboy_protocol.quic.adapter import FrameConnection, QuicFrameServer, start_server
from cowboy_protocol.quic.certs import ensure_certificate, ensure_reset_key, generate_self_signed
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.transport.enums import AckKind, CancelReason, GoodbyeReason
from cowboy_protocol.transport.frames import Frame, Goodbye
from cowboy_protocol.transport.preimages import ValidatorKey, make_assignment
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, RemoteProtocolError, TransportError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.result_frames import FrameKind, check_result_tx
from cowboy_protocol.transport.session import (
    AckReceived,
    AckTimedOut,
    Authenticated,
    BackpressureReceived,
    Closed,
    Event,
    PresenceRefreshed,
    PresenceWithdrawn,
    ResultFrame,
)
from cowboy_protocol.transport.subset import EpochSnapshot, epoch_paired_valid, select_snapshot
from cowboy_protocol.transport.validator_session import Admission, ValidatorSession
from cowboy_protocol.types.jobspec import decode_job_spec
from cowboy_protocol.types.params import Cip11Params
from cowboy_protocol.types.runner import Health

if TYPE_CHECKING:
    from cowboy_node.transport.workers.pool import WorkerPool

log = get_logger("cowboy.transport")

TICK_INTERVAL_S = 0.2
"""How often session deadlines (handshake, idle, ack timeouts) are checked."""


@dataclass(frozen=True, slots=True)
class AssignmentInfo:
    """What the chain says about one job's current assignment (read at the committed head)."""

    job_spec: bytes
    """Canonical JobSpecV1 bytes (carried verbatim in JobAssignment)."""
    assignment_height: int
    """Block that made the assignment."""
    deadline_block: int
    """Chain-derived timeout-index block."""
    committee: tuple[int, ...]
    """Registry indices of the current committee's runners, in committee order (sessions are keyed by index)."""
    live: bool
    """False once the job is terminal."""
    failed: bool = False
    """Terminal and failed (cancel reason JobFailed rather than JobSettled)."""
    commit_end: int = 0
    """Last block of the commit phase: a multi-runner job's reveals are valid from ``commit_end + 1`` (§10.3)."""

    def reveal_too_early(self, next_height: int) -> bool:
        """Whether a reveal included at ``next_height`` (head + 1) would come before this job's reveal window:
        only jobs of M > 1 runners commit first (§10.3; M == 1 may reveal at once)."""
        # The job's M, not the seats drawn, as execution and admission decide: an under-filled committee (one
        # seat of an M > 1 job, §9.2) still commits before it reveals. ``job_spec`` is the chain's stored spec.
        return self.live and next_height <= self.commit_end and \
            decode_job_spec(self.job_spec).verification.runners > 1


class NodeLink(Protocol):
    """What the transport needs from the node (all reads at the committed head)."""

    @property
    def chain_id(self) -> str:
        """The chain's id (Hello check, assignment preimage)."""
        ...

    def head_height(self) -> int:
        """Committed height."""
        ...

    def admission(self, runner: PubKey, subset_epoch: int | None = None,
                  offered_hash: bytes | None = None) -> Admission:
        """§6.2 admission verdict for the runner key offered in a Hello, epoch-paired with the Hello's
        ``(subset_epoch, validator_set_hash)`` (§5.3; WrongValidatorSet when it selects no valid snapshot)."""
        ...

    def valid_snapshots(self) -> tuple[EpochSnapshot, ...]:
        """The validator-set snapshots whose ``(subset_epoch, validator_set_hash)`` are valid at the head, oldest
        first (§5.3: one outside a reconfiguration overlap, epochs E and E+1 during it)."""
        ...

    def cip11_params(self) -> Cip11Params:
        """The governed CIP-11 §13 constants at the committed head."""
        ...

    def assignment_for(self, job_id: bytes) -> AssignmentInfo | None:
        """The job's current assignment, or None if the job does not exist."""
        ...

    def runner_health(self, addresses: Sequence[bytes]) -> list[Health | None]:
        """Registry health of each runner address at the head (None: no registration), in one read."""
        ...

    def forward_transaction(self, tx_bytes: bytes) -> None:
        """Admit a runner's result transaction through the node's normal admission path; raises
        :class:`TransactionRefused` with the admission's error code on a refusal."""
        ...


class TransactionRefused(Exception):
    """The node's admission refused a forwarded transaction; ``code`` is the stable admission error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class TransportMetrics(Protocol):
    """The counters the service reports (``NodeMetrics`` implements it)."""

    def transport_event(self, kind: str, label: str) -> None:
        """Count one event: ``kind`` in handshake / frame / goodbye / ack / dispatch / result / quic."""
        ...

    def transport_gauges(self, *, connected: int, present: int) -> None:
        """Current connected (authenticated) runners and local-presence size."""
        ...

    def push_latency(self, seconds: float) -> None:
        """Block commit → JobAck for one push."""
        ...


class _NullMetrics:
    def transport_event(self, kind: str, label: str) -> None:
        pass

    def transport_gauges(self, *, connected: int, present: int) -> None:
        pass

    def push_latency(self, seconds: float) -> None:
        pass


@dataclass(frozen=True, slots=True)
class TransportConfig:
    """Where and how the node's transport listens."""

    host: str = "127.0.0.1"
    """UDP listen address."""
    port: int = 4433
    """UDP port (0: any free port)."""
    cert_path: Path | None = None
    """Self-signed certificate (created on first start when missing); None: an ephemeral one in memory."""
    key_path: Path | None = None
    """Its private key."""
    reset_key_path: Path | None = None
    """Persistent QUIC stateless-reset secret (RFC 9000 §10.3; 32 bytes, mode 0600, created on first start), so
    a restarted validator resets its previous run's runner connections at once. None: ``quic-reset.key`` next to
    ``key_path`` when that is set, else a secret for this run only."""

    def reset_key_file(self) -> Path | None:
        """Where the stateless-reset secret lives (None: in memory only)."""
        if self.reset_key_path is not None:
            return self.reset_key_path
        return None if self.key_path is None else self.key_path.with_name("quic-reset.key")
    limits: ServerLimits = field(default_factory=ServerLimits)
    """Connection caps, Retry threshold, per-peer Hello rate, idle timeouts."""
    presence_timeout_blocks: int | None = None
    """Drop a silent runner from local presence after this many blocks (§6.3). None (the default): the governed
    PRESENCE_TIMEOUT_BLOCKS at the committed head, re-read every block; a number pins it (tests, operators)."""
    ack_timeout_blocks: int | None = None
    """HardFailure threshold after a push (§10.6). None: the governed ACK_TIMEOUT_BLOCKS at the head."""
    subset_epoch: int = 0
    """Validator-set epoch offered in Hello (static set: 0)."""
    workers: int = 1
    """QUIC worker processes (``[quic] workers``): 1 terminates QUIC in this process; N > 1 in N worker
    processes sharing the port (``transport/workers``), the sessions staying here."""


class _RunnerConnection:
    """The ConnectionHandler of one QUIC connection: feeds frames to its session, handles its events."""

    def __init__(self, service: TransportService, conn: FrameConnection) -> None:
        self.service = service
        self.conn = conn
        self.serial = next(service._serials)
        """Service-local number of this connection (key of its held reveals)."""
        self.session: ValidatorSession | None = None
        self.runner_index: int | None = None
        self.address: bytes | None = None
        self.runner_pubkey: PubKey | None = None
        self.epoch_valid_under: tuple[object, ...] | None = None
        """The ``(valid snapshots, MIN_SUBSET, MAX_SUBSET)`` under which this session was last found
        epoch-paired-valid (:meth:`TransportService._recheck_epochs`); None: not checked yet."""

    # --- ConnectionHandler ---
    def on_open(self, conn: FrameConnection) -> None:
        s = self.service
        self.session = ValidatorSession(
            chain_id=s.link.chain_id, key=s.key, validator_set_hash=s.validator_set_hash,
            subset_epoch=s.config.subset_epoch, channel_binding=conn.channel_binding,
            challenge_nonce=secrets.token_bytes(32), admit=s.admit, height=s.link.head_height, now=s.now(),
            ack_timeout_blocks=s.ack_timeout_blocks, admit_paired=s.admit_paired)
        s.connections.add(self)

    def on_frame(self, frame: Frame) -> None:
        if self.session is None:
            return
        self.service.metrics.transport_event("frame", type(frame).__name__)
        self.handle(self.session.receive(frame, self.service.now()))

    def on_close(self, reason: str) -> None:
        if self.session is not None:
            if reason.startswith("protocol_error:"):
                # The adapter refused the peer's bytes (decoder or stream misuse) and already sent
                # Goodbye{ProtocolError}: count it as the local protocol-error close it is, not a lost connection.
                error = RemoteProtocolError(reason.split(":", 1)[1], "refused by the QUIC adapter")
                self.handle(self.session.receive_error(error, self.service.now()), transport_closed=True)
            else:
                self.handle(self.session.connection_lost(), transport_closed=True)
        self.service.connections.discard(self)
        self.service._forget(self)

    # --- events ---
    def handle(self, events: list[Event], *, transport_closed: bool = False) -> None:
        """Apply session events, then flush the session's outbound frames (a Goodbye closes the connection)."""
        for ev in events:
            self.service._on_event(self, ev)
        self.flush(transport_closed=transport_closed)

    def flush(self, *, transport_closed: bool = False) -> None:
        """Send queued frames; a queued Goodbye goes out last with the close."""
        if self.session is None:
            return
        goodbye: Goodbye | None = None
        for frame in self.session.take_outbound():
            if isinstance(frame, Goodbye):
                goodbye = frame
            elif not transport_closed and not self.conn.closed:
                self.conn.send(frame)
        if goodbye is not None and not transport_closed and not self.conn.closed:
            self.conn.close(goodbye)

    def fail(self, error: TransportError) -> None:
        """Close this session for a protocol error the node found (e.g. a bad result transaction)."""
        if self.session is not None:
            self.service.metrics.transport_event("result", error.code)
            self.handle(self.session.close(error.reason, error.code))


class TransportService:
    """Owns the QUIC server, the sessions, local presence and push bookkeeping. Runs on the node's event loop."""

    def __init__(self, link: NodeLink, key: ValidatorKey, *, validator_set_hash: bytes,
                 config: TransportConfig | None = None, metrics: TransportMetrics | None = None) -> None:
        self.link = link
        self.key = key
        self.validator_set_hash = validator_set_hash
        self.config = config or TransportConfig()
        self.metrics: TransportMetrics = metrics or _NullMetrics()
        self.params: Cip11Params = link.cip11_params()
        """The governed CIP-11 constants in force (re-read at each committed block)."""
        self.presence = LocalPresence(timeout_blocks=self.presence_timeout_blocks)
        self.pushes = PushTracker()
        self.connections: set[_RunnerConnection] = set()
        self._by_index: dict[int, _RunnerConnection] = {}
        self._commit_time: dict[bytes, float] = {}  # job_id → monotonic time its assignment block committed
        self.reveals = RevealHold()
        """Early reveals held until their window opens (§10.3)."""
        self._serials = itertools.count(1)
        self._server: QuicFrameServer | WorkerPool | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._stats_seen: dict[str, int] = {}  # QUIC adapter counter → value already reported as events
        self._epoch_inputs: tuple[object, ...] | None = None  # _recheck_epochs' inputs at the last block

    # --- lifecycle ---
    @property
    def port(self) -> int:
        """The bound UDP port (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("transport not started")
        return self._server.port

    async def start(self) -> None:
        """Listen and start the deadline ticker. Raises OSError if the address cannot be bound."""
        cfg = self.config
        if cfg.cert_path is not None and cfg.key_path is not None:
            cert, key = ensure_certificate(cfg.cert_path, cfg.key_path, "cowboy-validator")
        else:
            cert, key = generate_self_signed("cowboy-validator")
        reset_file = cfg.reset_key_file()
        reset_secret = ensure_reset_key(reset_file) if reset_file is not None else None
        if cfg.workers > 1:
            from cowboy_node.transport.workers.pool import WorkerPool  # spawns processes: only when configured
            pool = WorkerPool(host=cfg.host, port=cfg.port, workers=cfg.workers, limits=cfg.limits,
                              certificate_pem=cert, private_key_pem=key,
                              reset_secret=reset_secret or secrets.token_bytes(32),
                              handler_factory=lambda c: _RunnerConnection(self, c), metrics=self.metrics)
            await pool.start()
            self._server = pool
        else:
            self._server = await start_server(cfg.host, cfg.port,
                                              handler_factory=lambda c: _RunnerConnection(self, c),
                                              limits=cfg.limits, certificate_pem=cert, private_key_pem=key,
                                              reset_secret=reset_secret)
        self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())
        log.info("transport listening", addr=f"{cfg.host}:{self.port}")

    async def stop(self) -> None:
        """Say Goodbye{Shutdown} to every runner and close the listener."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for c in list(self.connections):
            if c.session is not None:
                c.handle(c.session.close(GoodbyeReason.SHUTDOWN, "validator shutting down"))
        if self.connections:
            await asyncio.sleep(0.05)  # let the Goodbyes leave before the socket closes
        self._publish_stats()
        if self._server is not None:
            self._server.close()
            self._server = None

    @staticmethod
    def now() -> float:
        """Monotonic seconds (session deadlines)."""
        return time.monotonic()

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            self.tick()

    def tick(self) -> None:
        """Run session deadlines and refresh the gauges."""
        height = self.link.head_height()
        now = self.now()
        for c in list(self.connections):
            if c.session is not None:
                events = c.session.tick(now, height)
                if events or c.session.has_outbound:  # the usual tick finds nothing: skip the flush
                    c.handle(events)
        self.metrics.transport_gauges(connected=len(self._by_index), present=len(self.presence.present(height)))
        self._publish_stats()

    def _publish_stats(self) -> None:
        """Report what the QUIC adapter refused or dropped before any session saw it (garbage datagrams, bad frame
        bytes, caps, rate limit, Retry) as ``transport_event("quic", label)``; label is the ServerStats counter name,
        or ``name:key`` for its per-reason dicts. Only increases since the last call are reported."""
        if self._server is None:
            return
        stats = self._server.stats
        current = {"ignored_datagrams": stats.ignored_datagrams, "retries_sent": stats.retries_sent,
                   "handler_errors": stats.handler_errors, "stateless_resets_sent": stats.stateless_resets_sent}
        for group in ("refused", "decode_errors", "stream_errors"):
            for key, value in getattr(stats, group).items():
                current[f"{group}:{key}"] = value
        for label in sorted(current):
            delta = current[label] - self._stats_seen.get(label, 0)
            self._stats_seen[label] = current[label]
            for _ in range(max(0, delta)):
                self.metrics.transport_event("quic", label)

    @property
    def presence_timeout_blocks(self) -> int:
        """PRESENCE_TIMEOUT_BLOCKS in force: the configured override, else the governed value at the head."""
        pinned = self.config.presence_timeout_blocks
        return self.params.PRESENCE_TIMEOUT_BLOCKS if pinned is None else pinned

    @property
    def ack_timeout_blocks(self) -> int:
        """ACK_TIMEOUT_BLOCKS in force: the configured override, else the governed value at the head."""
        pinned = self.config.ack_timeout_blocks
        return self.params.ACK_TIMEOUT_BLOCKS if pinned is None else pinned

    def apply_params(self, params: Cip11Params) -> None:
        """Take the governed constants active at the new head: presence timeout now, ACK timeout for every
        session (a pending push's deadline is ``pushed_height + ACK_TIMEOUT_BLOCKS`` under the value in force at
        each check)."""
        self.params = params
        self.presence.timeout_blocks = self.presence_timeout_blocks
        for c in self.connections:
            if c.session is not None:
                c.session.ack_timeout_blocks = self.ack_timeout_blocks

    # --- the node's side of the interface ---
    def admit(self, runner: PubKey) -> Admission:
        """The node's admission verdict (against the newest valid snapshot), counted by outcome."""
        return self._count_admission(self.link.admission(runner))

    def admit_paired(self, runner: PubKey, subset_epoch: int, offered_hash: bytes) -> Admission:
        """§5.3/§6.2 epoch-paired admission of a Hello's runner key and ``(subset_epoch, validator_set_hash)``."""
        return self._count_admission(self.link.admission(runner, subset_epoch, offered_hash))

    def _count_admission(self, verdict: Admission) -> Admission:
        label = "admitted" if verdict.ok else (verdict.reason or GoodbyeReason.NOT_REGISTERED).name.lower()
        self.metrics.transport_event("handshake", label)
        return verdict

    def local_presence(self, height: int) -> frozenset[int]:
        """Registry indices present at ``height`` (what the proposer encodes into PresenceInput)."""
        return self.presence.present(height)

    def on_block_committed(self, jobs_assigned: Iterable[bytes], jobs_finished: Iterable[bytes]) -> None:
        """Push the block's assignments to live sessions and cancel pushes that the chain superseded (§10.1, §10.5).
        First take the governed constants at the new head and close sessions past the §5.3 overlap cutoff."""
        committed_at = self.now()
        self.apply_params(self.link.cip11_params())
        self._recheck_epochs()
        for job_id in jobs_finished:
            self._end_job(job_id)
        for job_id in jobs_assigned:
            info = self.link.assignment_for(job_id)
            if info is None or not info.live:
                continue
            self._commit_time[job_id] = committed_at
            self._cancel_superseded(job_id, info)
            for index in info.committee:
                self._push(job_id, info, index)
        self._release_reveals()
        self._recheck_registry()

    # --- internals ---
    def _recheck_epochs(self) -> None:
        """§5.3 routing & presence: "A validator routes/attests for a runner only over an epoch-paired-valid
        connection"; "After the window (at block activation_height + OVERLAP_BLOCKS [...]) only Sub_{E+1}(R),
        validator_set_hash(E+1) [...] are valid. Either side MAY initiate closing an epoch-E-only connection [...]
        with Goodbye { reason: OverlapExpired }". A session whose pair is no longer valid at the head loses its
        presence and is closed that way (in-flight work drains per §11.5: the runner keeps its result txs).
        During the overlap both epochs' sessions stay valid, so a runner present via either subset counts."""
        if not self._by_index:
            return
        valid = self.link.valid_snapshots()
        me = self.key.pubkey.key
        # The verdict is a function of (valid snapshots, MIN_SUBSET, MAX_SUBSET) and of the session's fixed
        # (runner key, epoch, hash): a connection found valid under the same inputs is not re-derived (one
        # Sub(R) — a keccak per validator and a sort — per runner per block otherwise).
        inputs = (tuple(valid), self.params.MIN_SUBSET, self.params.MAX_SUBSET)
        if inputs == self._epoch_inputs:
            inputs = self._epoch_inputs  # the same object: the per-connection comparisons below are by identity
        self._epoch_inputs = inputs
        for conn in list(self._by_index.values()):
            session, pubkey = conn.session, conn.runner_pubkey
            if session is None or pubkey is None or conn.runner_index is None:
                continue
            if conn.epoch_valid_under is inputs:
                continue
            if epoch_paired_valid(me, pubkey.key, valid, session.subset_epoch, session.validator_set_hash,
                                  min_subset=self.params.MIN_SUBSET, max_subset=self.params.MAX_SUBSET):
                conn.epoch_valid_under = inputs
                continue
            # Its epoch's pair no longer valid: OverlapExpired (§5.3). Pair still valid but this validator left the
            # runner's Sub(R) of that epoch (governed MIN_SUBSET/MAX_SUBSET changed): NotInSubset (§5.2).
            expired = select_snapshot(valid, session.subset_epoch, session.validator_set_hash) is None
            reason = GoodbyeReason.OVERLAP_EXPIRED if expired else GoodbyeReason.NOT_IN_SUBSET
            log.info("closing a session no longer epoch-paired-valid", index=conn.runner_index,
                     subset_epoch=session.subset_epoch, reason=reason.name)
            self.presence.connection_closed(conn.runner_index)
            conn.handle(session.close(reason, f"epoch {session.subset_epoch} session not valid at height "
                                              f"{self.link.head_height()}"))
            self._forget(conn)

    def _recheck_registry(self) -> None:
        """§6.2 admission, re-applied at each committed head to the runners holding a session: "the runner
        party_pubkey MUST [...] resolve to a RunnerRegistration with health != Deregistered". One registry read
        per live session under one lock (the decoded records are memoised), nothing when no runner is connected.
        The subset gate (§5.2) is re-run per epoch by :meth:`_recheck_epochs`."""
        conns = [c for c in self._by_index.values() if c.address is not None and c.session is not None]
        if not conns:
            return
        healths = self.link.runner_health([c.address for c in conns if c.address is not None])
        for conn, health in zip(conns, healths, strict=True):
            index = conn.runner_index
            if index is None or conn.session is None:
                continue
            if health is None or health == Health.DEREGISTERED:
                reason = GoodbyeReason.NOT_REGISTERED if health is None else GoodbyeReason.DEREGISTERED
                self.metrics.transport_event("registry", reason.name.lower())
                log.info("closing the session of a runner the registry no longer admits", index=index,
                         reason=reason.name)
                self.presence.connection_closed(index)  # out of PresenceInput from the next block on
                conn.handle(conn.session.close(reason, "registration changed at height "
                                                       f"{self.link.head_height()}"))
                self._forget(conn)
            else:
                self.presence.registry_standing(index, healthy=health == Health.HEALTHY)

    def _push(self, job_id: bytes, info: AssignmentInfo, index: int) -> None:
        conn = self._by_index.get(index)
        if conn is None or conn.session is None or conn.runner_pubkey is None or conn.runner_index is None:
            self.metrics.transport_event("dispatch", "no_session")
            return
        if conn.runner_index not in self.presence:
            self.metrics.transport_event("dispatch", "not_present")
            return
        frame = make_assignment(self.link.chain_id, self.key, job_id, info.job_spec, info.assignment_height,
                                info.deadline_block, conn.runner_pubkey)
        try:
            conn.session.push(frame)
        except LocalProtocolError as e:
            self.metrics.transport_event("dispatch", e.code)
            return
        self.pushes.pushed(job_id, conn.runner_index)
        self.metrics.transport_event("dispatch", "pushed")
        conn.flush()

    def _cancel_superseded(self, job_id: bytes, info: AssignmentInfo) -> None:
        for p in self.pushes.for_job(job_id):
            conn = self._by_index.get(p.runner_index)
            if conn is not None and p.runner_index not in info.committee:
                self._cancel(conn, job_id, CancelReason.RESELECTED)

    def _end_job(self, job_id: bytes) -> None:
        info = self.link.assignment_for(job_id)
        reason = CancelReason.JOB_FAILED if info is not None and info.failed else CancelReason.JOB_SETTLED
        for p in self.pushes.for_job(job_id):
            conn = self._by_index.get(p.runner_index)
            if conn is not None and p.outcome is not Outcome.SUCCESS:
                self._cancel(conn, job_id, reason)
            if conn is not None and conn.session is not None:
                conn.session.forget(job_id)
        self.pushes.forget_job(job_id)
        self._commit_time.pop(job_id, None)

    def _cancel(self, conn: _RunnerConnection, job_id: bytes, reason: CancelReason) -> None:
        if conn.session is None:
            return
        try:
            if conn.session.cancel(job_id, reason):
                self.metrics.transport_event("dispatch", f"cancel_{reason.name.lower()}")
        except LocalProtocolError:
            return
        conn.flush()

    def _forget(self, conn: _RunnerConnection) -> None:
        if self.reveals.drop_owner(conn.serial):  # the runner keeps its transaction and rebroadcasts (§10.3)
            self.metrics.transport_event("result", "held_reveal_dropped:closed")
        if conn.runner_index is not None and self._by_index.get(conn.runner_index) is conn:
            del self._by_index[conn.runner_index]
            self.presence.connection_closed(conn.runner_index)
            self.pushes.forget_runner(conn.runner_index)

    def _on_event(self, conn: _RunnerConnection, ev: Event) -> None:
        m = self.metrics
        if isinstance(ev, Authenticated):
            self._authenticated(conn, ev)
        elif isinstance(ev, PresenceRefreshed):
            if ev.runner_index is not None and ev.accepting_new:
                self.presence.ping(ev.runner_index, ev.height)
        elif isinstance(ev, PresenceWithdrawn):
            if ev.runner_index is not None:
                self.presence.backpressure(ev.runner_index, accepting_new=False)
        elif isinstance(ev, BackpressureReceived):
            if conn.runner_index is not None:
                self.presence.backpressure(conn.runner_index, ev.accepting_new)
        elif isinstance(ev, AckReceived):
            self._ack(conn, ev)
        elif isinstance(ev, AckTimedOut):
            m.transport_event("ack", "hard_failure")
            if conn.runner_index is not None:
                self.presence.hard_failure(conn.runner_index)
                if self.pushes.get(ev.job_id, conn.runner_index) is not None:
                    self.pushes.hard_failure(ev.job_id, conn.runner_index)
        elif isinstance(ev, ResultFrame):
            self._result(conn, ev)
        elif isinstance(ev, Closed):
            label = ev.reason.name.lower() if ev.reason is not None else "connection_lost"
            m.transport_event("goodbye", f"{'peer' if ev.by_peer else 'local'}:{label}")
            self._forget(conn)

    def _authenticated(self, conn: _RunnerConnection, ev: Authenticated) -> None:
        conn.runner_index, conn.address, conn.runner_pubkey = ev.runner_index, ev.address, ev.peer_pubkey
        conn.conn.mark_authenticated()  # no longer half-open for the QUIC layer
        if ev.runner_index is None:
            return
        old = self._by_index.get(ev.runner_index)
        self._by_index[ev.runner_index] = conn
        if old is not None and old is not conn and old.session is not None:
            old.runner_index = None  # its close must not clear the new session's presence
            old.handle(old.session.close(GoodbyeReason.REPLACED, "a newer session of this runner authenticated"))
        log.info("runner session authenticated", index=ev.runner_index, address="0x" + (ev.address or b"").hex())

    def _ack(self, conn: _RunnerConnection, ev: AckReceived) -> None:
        kind = ev.status.kind
        self.metrics.transport_event("ack", kind.name.lower())
        if conn.runner_index is None:
            return
        if self.pushes.get(ev.job_id, conn.runner_index) is not None:
            self.pushes.acked(ev.job_id, conn.runner_index, kind)
        t = self._commit_time.get(ev.job_id)
        if t is not None and kind is AckKind.ACCEPTED:
            self.metrics.push_latency(self.now() - t)

    def _result(self, conn: _RunnerConnection, ev: ResultFrame) -> None:
        if conn.address is None:
            return
        kind: FrameKind = "commit" if ev.kind == "commit" else "result"
        try:
            check_result_tx(ev.tx_bytes, kind=kind, job_id=ev.job_id, runner_address=conn.address)
        except RemoteProtocolError as e:
            conn.fail(e)
            return
        if kind == "result":
            info = self.link.assignment_for(ev.job_id)
            if info is not None and info.reveal_too_early(self.link.head_height() + 1):
                self._hold_reveal(conn, ev)
                return
        self._forward(kind, ev.job_id, ev.tx_bytes, conn.runner_index)

    def _hold_reveal(self, conn: _RunnerConnection, ev: ResultFrame) -> None:
        """§10.3: "A validator receiving JobResult for a multi-runner job before the commitment is included /
        reveal window opens MUST hold it or reject with Goodbye { ProtocolError }; it MUST NOT submit an early
        reveal." Held within the RevealHold bounds; beyond them, refused with Goodbye{ProtocolError}."""
        if self.reveals.hold(HeldReveal(conn.serial, ev.job_id, ev.tx_bytes, conn.runner_index)):
            self.metrics.transport_event("result", "reveal_held")
            return
        conn.fail(RemoteProtocolError("early_reveal_hold_full",
                                      "a reveal before its window opened and no room left to hold it (§10.3)"))

    def _release_reveals(self) -> None:
        """Forward the held reveals whose window is open at head + 1; drop those whose job ended (§10.3)."""
        if not len(self.reveals):
            return
        next_height = self.link.head_height() + 1
        infos: dict[bytes, AssignmentInfo | None] = {}

        def decide(entry: HeldReveal) -> Verdict:
            if entry.job_id not in infos:
                infos[entry.job_id] = self.link.assignment_for(entry.job_id)
            info = infos[entry.job_id]
            if info is None or not info.live:
                return Verdict.DROP
            return Verdict.KEEP if info.reveal_too_early(next_height) else Verdict.RELEASE

        released, dropped = self.reveals.sweep(decide)
        for _ in range(dropped):
            self.metrics.transport_event("result", "held_reveal_dropped:job_ended")
        for entry in released:
            self.metrics.transport_event("result", "reveal_released")
            self._forward("result", entry.job_id, entry.tx_bytes, entry.runner_index)

    def _forward(self, kind: FrameKind, job_id: bytes, tx_bytes: bytes, runner_index: int | None) -> None:
        try:
            self.link.forward_transaction(tx_bytes)
            self.metrics.transport_event("result", f"{kind}_forwarded")
        except TransactionRefused as e:
            # Duplicate admission or a nonce already used after inclusion are non-failures (§10.3): the runner
            # keeps its retained transaction and rebroadcasts; nothing is minted or amended here.
            self.metrics.transport_event("result", f"{kind}_refused:{e.code}")
            return
        if runner_index is not None and self.pushes.get(job_id, runner_index) is not None:
            self.pushes.result_forwarded(job_id, runner_index)
