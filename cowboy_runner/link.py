"""A runner's session with one validator over CIP-11 QUIC: connect, authenticate, heartbeat, take assignments,
hand them to a job handler, send the result transactions back on the Accepted stream, reconnect with backoff.

This is the transport half of the runner; what to do with an assignment (dedup across validators, journal,
executors, commit/reveal timing) is the caller's ``on_assignment`` callback. The minimal form used by the
transport's end-to-end tests executes one trivial job kind; the daemon (``cowboy_runner/daemon.py``) plugs in
the real executors and the durable journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from cowboy_protocol.quic.adapter import ClientConnection, ConnectionClosed, connect
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import AckStatus, Goodbye, JobAssignment, PresenceReceiptFrame
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.protocol_errors import LocalProtocolError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import (
    AssignmentReceived,
    AssignmentRejected,
    Authenticated,
    CancelReceived,
    Closed,
    Event,
    PongReceived,
    PresenceReceiptReceived,
)
from cowboy_runner.schedule import backoff_delay

log = logging.getLogger("cowboy.runner.link")


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """Where the validator is and who it must be."""

    host: str
    """Validator QUIC host."""
    port: int
    """Validator QUIC port (UDP)."""
    chain_id: str
    """Chain the runner serves."""
    validator_set: tuple[bytes, ...]
    """Ordered raw Ed25519 peer keys of the validator-set snapshot (§5.4)."""
    expected_validator: bytes | None = None
    """Raw Ed25519 key the validator must prove (None: any snapshot member)."""
    subset_epoch: int = 0
    """Epoch of the snapshot ``validator_set`` belongs to (§5.3)."""
    ping_interval_s: float = 1.0
    """HeartbeatPing cadence (HEARTBEAT_BLOCKS = 1 at 1-second blocks)."""
    max_attempts: int | None = None
    """Stop reconnecting after this many consecutive failures (None: forever)."""
    dead_after_pings: int = 5
    """Close the session (``Goodbye{IdleTimeout}``) and reconnect when this many ping intervals (at least
    :data:`MIN_DEAD_AFTER_S`) pass without a verified pong. A killed validator sends no close and a restarted
    one silently drops packets of connections it no longer knows; without this the runner would only notice
    through the 30 s QUIC idle timeout, with push and the poll fallback both off meanwhile."""
    local_host: str | None = None
    """Source address to bind the QUIC socket to (None: the wildcard address, the OS picks the route)."""


MIN_DEAD_AFTER_S = 3.0
"""Floor of the dead-validator timeout, so fast blocks under load do not cause reconnect churn."""

AssignmentHandler = Callable[["Link", JobAssignment], Awaitable[None]]
"""Called for each verified assignment; it must ack it (``Link.ack``) and later send result frames."""


class Link:
    """One validator session with reconnects. ``height`` returns the runner's view of the chain head."""

    def __init__(self, key: SessionKey, config: LinkConfig, *, height: Callable[[], int],
                 on_assignment: AssignmentHandler, on_cancel: Callable[[bytes], None] | None = None,
                 rng: random.Random | None = None,
                 on_receipt: Callable[[PresenceReceiptFrame], None] | None = None) -> None:
        self.key = key
        self.config = config
        self.height = height
        self.on_assignment = on_assignment
        self.on_cancel = on_cancel
        self.on_receipt = on_receipt
        self.want_receipts = False
        """Mode A (CIP-11 §8.3): ask the validator for PresenceReceipts on every session (``set_want_receipts``)."""
        self.rng = rng or random.Random()
        self.session: RunnerSession | None = None
        self.conn: ClientConnection | None = None
        self.authenticated = asyncio.Event()
        self.accepting_new = True
        self.connects = 0
        self.authentications = 0
        """Sessions that completed the handshake so far (the first one and every reconnect)."""
        self.last_rtt: float | None = None
        self.last_pong_at: float | None = None
        """Wall-clock time of the last verified HeartbeatPong (presence, shown by ``status``)."""
        self.last_close: str | None = None
        """Why the last session ended (Goodbye reason and detail, or "connection lost"), for ``status``."""
        self.dead_peer_closes = 0
        """Sessions this link closed because the validator stopped answering pings."""
        self.stateless_resets = 0
        """Sessions ended by a QUIC stateless reset (RFC 9000 §10.3): the validator restarted and no longer knows
        the connection; the link reconnects at once (first §11.3 backoff step) instead of waiting for pings."""
        self.unavailable: frozenset[str] = frozenset()
        """Job kinds the runner cannot take now (executor full or unhealthy): advertised to the validator as removed
        capabilities (CapabilityDelta, §6.5) on every session, and re-added when they recover."""
        self.deltas_sent = 0
        """CapabilityDelta frames sent (status, tests)."""
        self._answered_at = 0.0  # monotonic time of the handshake or the last verified pong
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()

    # --- sending (valid only while a session is up) ---
    def ack(self, job_id: bytes, status: AckStatus) -> None:
        """Sign and send a JobAck for an assignment received on the current session."""
        self._with_session(lambda s: s.ack(job_id, status))

    def send_commit(self, job_id: bytes, tx_bytes: bytes) -> None:
        """Send a JobResultCommit frame (the runner-signed transaction) on the Accepted stream."""
        self._with_session(lambda s: s.send_commit(job_id, tx_bytes))

    def send_result(self, job_id: bytes, tx_bytes: bytes) -> None:
        """Send a JobResult frame (the runner-signed JobResultSubmit) on the Accepted stream."""
        self._with_session(lambda s: s.send_result(job_id, tx_bytes))

    def set_accepting(self, accepting: bool) -> None:
        """Backpressure (§6.4): a signed BackpressureSignal goes out at once on a live session (so the validator
        stops routing pushes before the next ping), and every later ping carries the same state."""
        if accepting == self.accepting_new:
            return
        self.accepting_new = accepting
        s = self.session
        if s is not None and not s.closed and self.authenticated.is_set():
            s.backpressure(accepting, self.height())
            self._flush()

    def set_want_receipts(self, want: bool) -> None:
        """Start or stop asking this validator for Mode A PresenceReceipts (now on a live session, and on every
        later one)."""
        if want == self.want_receipts:
            return
        self.want_receipts = want
        s = self.session
        if s is not None and not s.closed and self.authenticated.is_set():
            s.request_presence_receipts(want)
            self._flush()

    def set_unavailable(self, kinds: frozenset[str]) -> None:
        """Advisory capability delta (§6.5): on a live session, a CapabilityDelta removing the kinds that became
        unavailable and re-adding those that recovered goes out at once; a new session starts with one removing
        every unavailable kind (the validator keeps deltas per session)."""
        previous, self.unavailable = self.unavailable, frozenset(kinds)
        if previous != self.unavailable and self.authenticated.is_set():
            self._send_delta(add=previous - self.unavailable, remove=self.unavailable - previous)

    def _send_delta(self, *, add: frozenset[str], remove: frozenset[str]) -> None:
        s = self.session
        if s is None or s.closed or not (add or remove):
            return
        s.capability_delta(self.height(), add_capabilities=add, remove_capabilities=remove)
        self.deltas_sent += 1
        self._flush()

    def _with_session(self, fn: Callable[[RunnerSession], None]) -> None:
        s = self.session
        if s is None or s.closed:
            raise LocalProtocolError("no_session", "no live session with the validator")
        fn(s)
        self._flush()

    def _flush(self) -> None:
        s, c = self.session, self.conn
        if s is None or c is None:
            return
        for frame in s.take_outbound():
            if isinstance(frame, Goodbye):
                c.close(frame)
            elif not c.closed:
                c.send(frame)

    # --- lifecycle ---
    def stop(self) -> None:
        """Say Goodbye{Shutdown} and stop reconnecting."""
        self._stopping = True
        if self.session is not None and not self.session.closed:
            self.session.close(GoodbyeReason.SHUTDOWN, "runner stopping")
            self._flush()

    async def run(self) -> None:
        """Keep a session up until :meth:`stop` (or ``max_attempts`` consecutive failures)."""
        failures = 0
        while not self._stopping:
            ok = await self._one_session()
            if self._stopping:
                break
            failures = 0 if ok else failures + 1
            if self.config.max_attempts is not None and failures >= self.config.max_attempts:
                raise ConnectionError(f"validator unreachable after {failures} attempts")
            await asyncio.sleep(backoff_delay(failures, self.rng))  # §11.3: 100 ms × 2^n, cap 30 s, ±25%

    async def _one_session(self) -> bool:
        """Connect and serve one session; True if it authenticated."""
        cfg = self.config
        try:
            conn = await connect(cfg.host, cfg.port, timeout_s=5.0, local_host=cfg.local_host)
        except (OSError, ConnectionClosed, TimeoutError) as e:
            log.warning("validator unreachable: %s", e)
            return False
        self.connects += 1
        expected = PubKey.validator(cfg.expected_validator) if cfg.expected_validator is not None else None
        session = RunnerSession(chain_id=cfg.chain_id, key=self.key, expected_validator=expected,
                                validator_set=cfg.validator_set, subset_epoch=cfg.subset_epoch,
                                channel_binding=conn.channel_binding, challenge_nonce=secrets.token_bytes(32))
        self.session, self.conn = session, conn
        session.start(time.monotonic(), self.height())
        self._flush()
        pinger = asyncio.get_running_loop().create_task(self._ping_loop(session))
        authenticated = False
        try:
            while not session.closed:
                try:
                    frame = await asyncio.wait_for(conn.recv(), timeout=cfg.ping_interval_s)
                except TimeoutError:
                    self._handle(session.tick(time.monotonic(), self.height()))
                    continue
                except ConnectionClosed as e:
                    if e.reason == "stateless_reset":
                        self.stateless_resets += 1
                        log.info("validator reset the connection (restarted?); reconnecting")
                    self._handle(session.connection_lost())
                    break
                authenticated |= self._handle(session.receive(frame, time.monotonic()))
        finally:
            pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinger
            self.authenticated.clear()
            self.session = None
            if not conn.closed:
                conn.close()
            try:  # let the Goodbye/close leave, then always release the UDP socket (also when cancelled)
                await asyncio.wait_for(conn.wait_closed(), timeout=2.0)
            except TimeoutError:
                pass
            finally:
                conn.abort()
        return authenticated

    def dead_after_s(self) -> float:
        """Seconds without a verified pong after which the validator is treated as gone."""
        return max(MIN_DEAD_AFTER_S, self.config.dead_after_pings * self.config.ping_interval_s)

    async def _ping_loop(self, session: RunnerSession) -> None:
        await self.authenticated.wait()
        self._answered_at = time.monotonic()
        while not session.closed:
            now = time.monotonic()
            if now - self._answered_at > self.dead_after_s():
                self.dead_peer_closes += 1
                log.warning("validator answered no ping for %.1f s; reconnecting", now - self._answered_at)
                session.close(GoodbyeReason.IDLE_TIMEOUT, "no pong")
                self._flush()
                return
            session.ping(now, self.height(), accepting_new=self.accepting_new)
            self._flush()
            await asyncio.sleep(self.config.ping_interval_s)

    def _handle(self, events: Sequence[Event]) -> bool:
        authenticated = False
        for ev in events:
            if isinstance(ev, Authenticated):
                authenticated = True
                self.authentications += 1
                self.authenticated.set()
                log.info("session authenticated with validator %s", ev.peer_pubkey.key.hex()[:16])
                self._send_delta(add=frozenset(), remove=self.unavailable)
                if self.want_receipts and self.session is not None:
                    self.session.request_presence_receipts(True)
            elif isinstance(ev, PresenceReceiptReceived):
                if self.on_receipt is not None:
                    self.on_receipt(ev.receipt)
            elif isinstance(ev, AssignmentReceived):
                self._spawn(self.on_assignment(self, ev.frame))
            elif isinstance(ev, AssignmentRejected):
                log.warning("unverifiable assignment %s: %s", ev.job_id.hex()[:16], ev.code)
            elif isinstance(ev, CancelReceived):
                if self.on_cancel is not None:
                    self.on_cancel(ev.job_id)
            elif isinstance(ev, PongReceived):
                self.last_rtt = ev.rtt
                self.last_pong_at = time.time()
                self._answered_at = time.monotonic()
            elif isinstance(ev, Closed):
                self.last_close = " ".join(x for x in (ev.reason.name if ev.reason else "connection lost",
                                                        ev.detail or "") if x)
                log.info("session closed: %s %s", ev.reason.name if ev.reason else "connection lost", ev.detail or "")
        self._flush()
        return authenticated

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

