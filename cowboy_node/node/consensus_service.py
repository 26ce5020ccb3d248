"""The consensus service: the threshold-Simplex engine driven by the clock, the peer network and the chain.

One engine serves every topology. With one validator it finalizes each block as soon as it is proposed;
with several, blocks and votes travel over the validator peer layer (:mod:`cowboy_node.p2p.peers`).
The service:

- answers ``ProposalWanted`` by building a block on the engine's parent (no earlier than ``block_time_ms``
  after the parent's timestamp: the chain's cadence), broadcasting its body, then proposing its hash;
- answers ``VerifyBlock`` by fetching the body if needed and checking and executing it on its parent
  (:class:`cowboy_node.consensus.forks.Forks`); a body the view's leader sends is executed as soon as it
  arrives (before its proposal vote is processed), so the verification usually finds it done;
- journals every own vote with fsync before anything after it is sent (restart safety), the writes on a
  writer thread while the event loop serves on and the engine's outputs wait their turn in order
  (:mod:`cowboy_node.node.vote_outbox`); a journal error stops the node before the vote leaves it
  (:attr:`ConsensusService.fatal`), and a validator that starts without its journal abstains until it has
  watched the network (:class:`~cowboy_node.consensus.journal.DoubleSignGuard`);
- commits ``Finalized`` blocks in order with their seed and certificate, then lets the node update the
  mempool, push assignments (CIP-11 §10.1: only finalized, applied blocks) and record metrics;
- syncs: peers announce their finalized height every second; a validator behind asks one of them for runs
  of finalized blocks ending in a finalization certificate, verifies and executes them, and moves the
  engine's floor.

Everything touching the chain runs in one builder thread under the node's state lock; the engine runs on the
event loop. Nothing here may stop the chain: a failed build, verification or commit is logged and counted,
and the engine's timers move the view on.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.evidence import Evidence, EvidenceStore
from cowboy_node.consensus.forks import Candidate, Forks
from cowboy_node.consensus.journal import (
    DoubleSignGuard,
    JournalError,
    JournalWriteError,
    VoteJournal,
    marker_path,
    remove_marker,
    write_marker,
)
from cowboy_node.consensus.records import ConsensusRecords, drop_proposal_op
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import (
    Broadcast,
    Config,
    ConsensusFault,
    Engine,
    Faulty,
    Finalized,
    JournalRejected,
    Notarized,
    Nullified,
    Output,
    ProposalWanted,
    SeedRevealed,
    Send,
    VerifyBlock,
)
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.consensus.simplex.types import (
    Fetch,
    Finalization,
    Finalize,
    Message,
    Notarize,
    Proposal,
    Vote,
    decode_message,
    encode_message,
)
from cowboy_node.consensus.stop import StopSignal
from cowboy_node.consensus.sync_messages import (
    CH_BLOCKS,
    CH_CONSENSUS,
    CH_SYNC,
    CH_TXS,
    BlockRequest,
    encode_sync,
)
from cowboy_node.consensus.timeline import ViewTimeline
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.statesync_fallback import FallbackTrigger
from cowboy_node.node.sync_resolver import Resolver
from cowboy_node.node.vote_outbox import OrderedOutbox
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics, StepTimer
from cowboy_node.p2p.peer_router import route_peer_message
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, KnownTransaction
from cowboy_protocol.types.transaction import Transaction

log = get_logger("cowboy.consensus")

MAX_FUTURE_DRIFT_MS = 5_000
"""A proposal whose timestamp is further ahead of this validator's clock is not voted for."""
STATUS_INTERVAL_S = 1.0
"""How often each validator announces its finalized height."""
TIMELINE_FILE = "consensus-timeline.json"
"""Written next to the vote journal at shutdown: the newest view timeline records (``consensus/timeline.py``)."""
BODY_CACHE = 512
BODY_CACHE_BYTES = 256 * 1024 * 1024
"""Encoded bytes of peer-sent bodies kept at most (a peer may send blocks up to the message cap: the count alone
would let one faulty validator fill gigabytes)."""
"""Block bodies kept by hash (proposals seen, answers to requests)."""
"""Faulty-behaviour records kept for ``/status`` and the logs."""
COMPACT_AFTER = 256
"""The vote journal is compacted after a commit once it holds more records than this."""
ABSTAIN = 2**62
"""``Config.vote_above_view`` while the double-sign guard watches: above any view the engine will reach."""


class Network(Protocol):
    """What the service needs from the validator peer layer."""

    def send(self, to: int, channel: int, payload: bytes) -> bool: ...

    def broadcast(self, channel: int, payload: bytes) -> int: ...

    def connected(self) -> frozenset[int]: ...

    def penalize(self, peer: int, reason: str) -> None:
        """``peer`` crossed a budget or sent what it cannot back: disconnect it for a back-off (counted by
        ``reason``)."""


@dataclass(frozen=True, slots=True)
class CommittedBlock:
    """A finalized block this validator just committed, for the node's after-commit work."""

    prepared: PreparedBlock
    """The block and its execution result."""
    inspected: Any
    """What the node's inspect hook returned for it (job activity)."""
    own: bool
    """Whether this validator built it."""
    execution_s: float
    """Seconds the build or verification took (0 for a block executed at commit)."""
    commit_s: float
    """Seconds the commit (execution on the head when needed, plus the synced batch) took."""


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """Tunables of the service."""

    me: int
    """This validator's index in the genesis validator list."""
    block_time_ms: int
    """Target interval between blocks (the proposer waits this long after the parent's timestamp)."""
    delta_ms: int
    """Δ of the engine (leader timeout 2Δ, notarization timeout 3Δ)."""
    election: Election = Election.RANDOM
    """Leader election."""
    skip_timeout: int = 10
    """Views of silence after which a leader's view is nullified on entry (engine ``skip_timeout``; 0: off)."""
    double_sign_check_views: int = 10
    """``[consensus] double_sign_check_views``: a validator (of several) that starts without its vote journal
    votes only after it has been in sync and watched this many views (0: off)."""
    fresh_key: bool = False
    """``cowboy-node run --fresh-key``: the operator vouches that this key never signed in this network; vote at
    once even without a journal."""
    sync_verify_workers: int = 0
    """``[consensus] sync_verify_workers``: processes verifying fetched blocks while catching up (0: a thread)."""
    state_sync_fallback: FallbackTrigger | None = None
    """Issue 34: falls back to state sync when block sync cannot catch up (``node/statesync_fallback.py``)."""


class ConsensusService:
    """Runs the engine for one validator (see the module docstring)."""

    def __init__(self, chain: Chain, *, config: ServiceConfig, scheme: Scheme, tree_lock: threading.Lock,
                 proposer_key: bytes, sign: Callable[[bytes], bytes], fee_recipient: bytes,
                 take_transactions: Callable[[], list[Transaction]],
                 presence: Callable[[WorldState], bytes | None],
                 inspect: Callable[[PreparedBlock, BlockEnv, Observe | None], Any],
                 on_commit: Callable[[CommittedBlock], None], admit_gossip: Callable[[bytes], None],
                 metrics: NodeMetrics, journal: VoteJournal | None = None,
                 signature_checked: Callable[[bytes], bool] | None = None, net: Network | None = None,
                 on_built: Callable[[int, float], None] | None = None,
                 known_transaction: KnownTransaction | None = None, stop: StopSignal | None = None) -> None:
        self.chain = chain
        self.cfg = config
        self.scheme = scheme
        self.records = ConsensusRecords(chain.store)
        self.forks = Forks(chain, self.records, signature_checked=signature_checked)
        self.journal = journal
        self.metrics = metrics
        self.net = net
        """The peer layer (None with one validator)."""
        self.engine: Engine | None = None
        self._stop = stop or StopSignal()
        self._stop.subscribe(self._wake_loop)
        self._lock = tree_lock
        self._proposer_key = proposer_key
        self._sign = sign
        self._fee_recipient = fee_recipient
        self._take = take_transactions
        self._presence = presence
        self._inspect = inspect
        self._on_commit = on_commit
        self._admit_gossip = admit_gossip
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="block-builder")
        self._bodies: collections.OrderedDict[bytes, Block] = collections.OrderedDict()
        self._body_sizes: dict[bytes, int] = {}
        """Encoded size of each cached body received from a peer (``BODY_CACHE_BYTES`` bounds their sum)."""
        self._body_bytes = 0
        self._body_waiters: dict[bytes, asyncio.Event] = {}
        self._finals: collections.deque[Finalized] = collections.deque()
        self._wanted: ProposalWanted | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None
        self._commit_wake: asyncio.Event | None = None
        self._applied = asyncio.Event()
        """Set each time a finalized block was committed and handed to the node (see :meth:`_parent_applied`)."""
        self._running = False
        self._event_loop: asyncio.AbstractEventLoop | None = None
        """The loop :meth:`run` runs on (after-commit work of synced blocks is scheduled there)."""
        self._own_blocks: set[bytes] = set()
        self._preverified: set[int] = set()
        """Views whose leader's block started executing when its body arrived (:meth:`_maybe_preverify`)."""
        self.known_transaction = known_transaction
        """Transactions already decoded here, by full signed body (the node's ``Mempool.by_body``): a block body
        received from a peer reuses them instead of decoding them again (``Block.decode``)."""
        self._build_s: dict[bytes, float] = {}
        self._observed: dict[bytes, StepTimer] = {}
        self._proposed_at: dict[int, float] = {}
        """Monotonic time each recent view's proposal was built here or first seen (latency metrics)."""
        self.evidence = EvidenceStore(chain.store)
        """Faulty behaviour seen (conflicting votes, bad signatures, impersonation), kept durably."""
        self._evidence_seen: set[tuple[int, int, str]] = set()
        self.on_built = on_built
        """Called after each own build (transactions in the block, seconds the build took), nullified or not."""
        self.syncing = False
        """True while this validator is catching up with peers that are ahead."""
        self.timeline = ViewTimeline()
        """Per-view stage times (where proposal→finalization time goes; ``/status`` ``consensus.timeline``)."""
        self._timeline_cache: tuple[float, dict[str, object]] | None = None
        self.fatal: JournalWriteError | None = None
        """The journal error that stopped this validator (None while healthy): once set, no output of the engine
        is acted on any more (the vote it failed to journal, or any later one, never leaves) and the node stops."""
        self._outbox = OrderedOutbox(journal=lambda: self.journal, act=self._act_one,
                                     halted=lambda: self.fatal is not None, failed=self._journal_failed,
                                     journaling=self._mark_journaling, resumed=self._after_outputs)
        """The engine's outputs, acted on in order; the journal writes (and the proposal's store write) on its
        writer thread, off the event loop (``node/vote_outbox.py``)."""
        self._guard: DoubleSignGuard | None = None
        """While not None: the double-sign guard is watching and the engine abstains (see :meth:`start_engine`)."""
        self._guard_reason: str | None = None
        """Why the engine abstains (``no_vote_journal``), for ``/status``."""
        self.resolver = Resolver(chain, self.records, scheme, net=lambda: self.net, metrics=metrics,
                                 in_builder=lambda fn: self._in_builder(fn), spawn=self._spawn,
                                 memory_body=lambda d: self._bodies.get(d) or self.forks.memory_block(d),
                                 on_applied=self._on_synced, signature_checked=signature_checked,
                                 verify_workers=config.sync_verify_workers,
                                 fallback=config.state_sync_fallback.check if config.state_sync_fallback else None)
        """Serves and fetches finalized blocks (``node/sync_resolver.py``)."""

    # ------------------------------------------------------------------------------------------ lifecycle

    def _validator_key(self, index: int) -> bytes:
        return self.chain.genesis.validators[index].ed25519_public_key

    def _now(self) -> int:
        return int(time.monotonic() * 1000)

    def start_engine(self) -> None:
        """Create the engine at the committed head (the floor) with the journaled votes, and enter a view."""
        head = self.chain.head
        floor_seed = self.forks.parent_seed(head.header)
        self._start_guard()
        votes = self.journal.load() if self.journal is not None else []  # JournalError: the caller refuses to start
        if self.journal is not None and self.journal.dropped_bytes:
            log.warning("vote journal had a torn last record; dropped it (that vote was never sent)",
                        path=str(self.journal.path), dropped_bytes=self.journal.dropped_bytes)
        cfg = Config(me=self.cfg.me, delta_ms=self.cfg.delta_ms, election=self.cfg.election, genesis=head.hash(),
                     floor_view=head.header.round.view, floor_seed=floor_seed, skip_timeout=self.cfg.skip_timeout,
                     vote_above_view=ABSTAIN if self._guard is not None else 0)
        stale = []
        for raw in self.records.proposals():  # own proposals not committed before a restart
            block = Block.decode(raw)
            if block.header.height > head.header.height:
                self._remember_body(block)
            else:  # superseded (its view was nullified and another block took its height)
                stale.append(drop_proposal_op(block.hash()))
        if stale:
            self.chain.store.write_batch(stale, sync=False)
        try:
            self.engine = Engine(cfg, self.scheme, votes)
        except JournalRejected as e:
            assert self.journal is not None
            raise JournalError(self.journal.path, f"{e}: refusing to start (this validator may already have "
                                                  "equivocated; inspect the journal before removing it)") from None
        self.metrics.consensus_voting.set(0 if self._guard is not None else 1)
        if votes:
            log.info("vote journal replayed", votes=len(votes), highest_view=max(v.round.view for v in votes))
        self._act(self.engine.start(self._now()))

    def _start_guard(self) -> None:
        """Decide, before the journal is opened (which creates it), whether the double-sign guard watches.

        It does when a journal is configured but absent (a wiped or lost data directory: this key may have voted
        in views the node is about to re-enter with no memory of it) or when the guard's marker is there (a crash
        while watching), unless this is the only validator (nobody else's votes can form a certificate with a
        vote it may have sent, and there is no network to watch), ``--fresh-key`` was given or
        ``double_sign_check_views`` is 0. The marker is written durably *before* the journal is created, so a
        crash while watching restarts the watch instead of finding a journal and voting."""
        journal = self.journal
        if journal is None:
            return
        marker = marker_path(journal.path)
        absent = not journal.path.exists()
        watching = absent or marker.exists()
        if not watching:
            return
        views = self.cfg.double_sign_check_views
        why = "no vote journal" if absent else "a double-sign watch was interrupted"
        if self.scheme.n == 1 or self.cfg.fresh_key or views == 0:
            remove_marker(marker)
            exempt = "single validator" if self.scheme.n == 1 else \
                "--fresh-key" if self.cfg.fresh_key else "double_sign_check_views = 0"
            (log.info if self.scheme.n == 1 else log.warning)(
                f"{why}; voting at once ({exempt})", path=str(journal.path))
            return
        if not marker.exists():
            write_marker(marker, f"watching {views} views before voting: started without {journal.path.name}\n")
        self._guard = DoubleSignGuard(views)
        self._guard_reason = "no_vote_journal"
        log.warning(f"{why}: not voting until in sync and {views} views watched "
                    "(`cowboy-node run --fresh-key` votes at once for a key that never signed)",
                    path=str(journal.path), marker=str(marker), double_sign_check_views=views)

    def _watch(self) -> None:
        """One step of the double-sign guard: once the watch is over, vote above the current view and drop the
        marker (in that order: a crash in between watches again, which is safe)."""
        guard, engine, journal = self._guard, self.engine, self.journal
        if guard is None or engine is None or journal is None:
            return
        if not guard.observe(engine.view, self.syncing):
            return
        engine.allow_votes_above(engine.view)
        self._guard, self._guard_reason = None, None
        self.metrics.consensus_voting.set(1)
        log.info("double-sign watch over; voting from the next view", view=engine.view + 1, watched=guard.views)
        remove_marker(marker_path(journal.path))

    def _journal_failed(self, e: JournalWriteError) -> None:
        """A journal write failed: nothing more leaves this validator, and the node stops."""
        if self.fatal is None:
            self.fatal = e
            log.critical("vote journal write failed; stopping before the vote is sent", path=str(e.path),
                         errno=e.errno, errno_name=e.errno_name, error=str(e))
        self.metrics.consensus_voting.set(0)
        self.request_stop()

    def _compact_journal(self) -> None:
        """Drop the journaled votes of views the node can no longer re-enter: at or below the committed head's
        view (a restart resumes there; blocks finalized but not yet committed are re-finalized from it). Runs on
        the journal's writer thread, in turn with the appends (a failure stops the node like a failed append)."""
        journal = self.journal
        if journal is None or journal.records <= COMPACT_AFTER:
            return
        above = self.chain.head.header.round.view
        self._outbox.background(lambda: journal.compact(above_view=above))

    def close(self) -> None:
        """Release the builder thread and the journal (idempotent); leave the newest view timeline records next
        to the journal (``consensus-timeline.json``: not in ``/status``, which is polled often and would carry
        them every time)."""
        self.resolver.close()
        self._executor.shutdown(wait=True)
        self._outbox.close()  # nothing queued is sent any more; the write in flight ends before the journal closes
        if self.journal is not None:
            with contextlib.suppress(OSError):
                path = self.journal.path.parent / TIMELINE_FILE
                path.write_text(json.dumps(self.timeline.summary(recent=256).get("recent", [])))
            try:
                self.journal.close()
            except OSError as e:
                log.error("closing the vote journal failed", path=str(self.journal.path), errno=e.errno,
                          error=str(e))

    @property
    def stopping(self) -> bool:
        """True once the node was asked to stop (the shared :class:`~cowboy_node.consensus.stop.StopSignal`)."""
        return self._stop.requested

    def request_stop(self) -> None:
        """Stop after the block in progress."""
        self._stop.request()

    def _wake_loop(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Drive the engine until stopped."""
        self._wake = asyncio.Event()
        self._commit_wake = asyncio.Event()
        self._event_loop = asyncio.get_running_loop()
        self._running = True
        if self.engine is None:
            self.start_engine()
        elif self._wanted is not None:
            self._spawn(self._propose(self._wanted))
        committer = asyncio.create_task(self._commit_loop())
        status = asyncio.create_task(self._status_loop()) if self.net is not None else None
        try:
            while not self.stopping:
                assert self.engine is not None
                deadline = self.engine.next_deadline()
                delay = 0.5 if deadline is None else max(0.0, (deadline - self._now()) / 1000)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(delay, 0.5))
                if self.stopping:
                    break
                self._act(self.engine.tick(self._now()))
        finally:
            self._running = False
            self._outbox.stop()  # outputs still queued behind a journal write are dropped, never sent after stop
            for t in [committer, status, *self._tasks]:
                if t is not None:
                    t.cancel()
            for t in [committer, status, *self._tasks]:
                if t is not None:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await t
            # The block in progress (a commit in the builder thread) finishes before the store closes.
            await asyncio.get_running_loop().run_in_executor(None, self.close)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("consensus task failed", error=repr(task.exception()))

    async def _in_builder(self, fn: Callable[[], Any], view: int | None = None, stage: str = "exec_start") -> Any:
        """Run ``fn`` in the builder thread under the state lock (marking ``stage`` of ``view`` when it starts)."""
        def locked() -> Any:
            with self._lock:
                if view is not None:
                    self.timeline.mark(view, stage, time.monotonic())
                return fn()
        return await asyncio.get_running_loop().run_in_executor(self._executor, locked)

    # ------------------------------------------------------------------------------------------ outputs

    def _act(self, outputs: list[Output]) -> None:
        """Act on the engine's ``outputs`` in order, behind any still queued (see ``node/vote_outbox.py``)."""
        if self.fatal is not None:  # stopped on a journal error: the engine may think it sent votes; none leaves
            return
        if self._guard is not None:
            try:
                self._watch()
            except JournalWriteError as e:
                self._journal_failed(e)
                return
        self._outbox.push(outputs)
        self._after_outputs()

    def _after_outputs(self) -> None:
        if self.engine is not None:
            self.metrics.consensus_view.set(self.engine.view)
        if self._wake is not None:
            self._wake.set()

    def _mark_journaling(self, vote: Vote) -> None:
        self.timeline.mark(vote.round.view, f"journal_{type(vote).__name__.lower()}", time.monotonic())

    def _act_one(self, o: Output) -> None:
        """Act on one output that is not a ``Journal`` (the outbox makes each wait for the journal writes before
        it)."""
        if isinstance(o, Broadcast):
            self._count_sent(o.message)
            if isinstance(o.message, Notarize | Finalize) and o.message.signer == self.cfg.me:
                self.timeline.mark(o.message.round.view, f"sent_{type(o.message).__name__.lower()}",
                                   time.monotonic())
            if self.net is not None:
                self.net.broadcast(CH_CONSENSUS, encode_message(o.message))
        elif isinstance(o, Send):
            if self.net is not None:
                self.net.send(o.to, CH_CONSENSUS, encode_message(o.message))
        elif isinstance(o, ProposalWanted):
            self._wanted = o
            self.metrics.consensus_view.set(o.round.view)
            if self._running:
                self._spawn(self._propose(o))
        elif isinstance(o, VerifyBlock):
            if self._running:
                self._spawn(self._verify(o.proposal))
        elif isinstance(o, Finalized):
            self._finals.append(o)
            view = o.proposal.round.view
            self.timeline.mark(view, "finalized", time.monotonic())
            t0 = self._proposed_at.get(view)
            if t0 is not None:
                self.metrics.consensus_finalization_seconds.observe(time.monotonic() - t0)
            for old in [w for w in self._proposed_at if w <= view]:  # nullified views' entries too
                del self._proposed_at[old]
            if self._commit_wake is not None:
                self._commit_wake.set()
        elif isinstance(o, SeedRevealed):
            self.records.put_seed(o.round, o.seed)
        elif isinstance(o, Notarized):
            self.metrics.consensus_certificates.labels(kind="notarization").inc()
            self.timeline.mark(o.certificate.round.view, "notarized", time.monotonic())
            t0 = self._proposed_at.get(o.certificate.round.view)
            if t0 is not None:
                self.metrics.consensus_notarization_seconds.observe(time.monotonic() - t0)
        elif isinstance(o, Nullified):
            self.metrics.consensus_certificates.labels(kind="nullification").inc()
            self.metrics.consensus_nullifications.inc()
            log.info("view nullified", view=o.certificate.round.view)
        elif isinstance(o, Faulty):
            self.metrics.consensus_faults.labels(reason=_fault_label(o.reason)).inc()
            key = (o.signer, o.round.view, o.reason)
            if key not in self._evidence_seen:  # one record per signer, view and fault: a peer cannot
                if len(self._evidence_seen) >= 4096:  # make us write per message it sends
                    self._evidence_seen.clear()
                self._evidence_seen.add(key)
                self.evidence.add(Evidence(o.signer, o.round, o.reason, int(time.time() * 1000), o.votes))
            log.warning("validator misbehaved", signer=o.signer, view=o.round.view, reason=o.reason)
            if self.net is not None:  # every engine fault is the authenticated sender's own: back it off
                self.net.penalize(o.signer, _fault_label(o.reason))

    def _count_sent(self, m: Message) -> None:
        self.metrics.consensus_messages_sent.labels(kind=type(m).__name__.lower()).inc()

    # ------------------------------------------------------------------------------------------ proposing

    async def _propose(self, want: ProposalWanted) -> None:
        engine = self.engine
        assert engine is not None
        parent = await self._known_header(want.parent)
        if parent is None or engine.view != want.round.view:
            return
        # The chain's cadence: no block before block_time after its parent (wall clock, like the timestamp).
        delay = (parent.timestamp_ms + self.cfg.block_time_ms - int(time.time() * 1000)) / 1000
        if delay > 0:
            await asyncio.sleep(delay)
        await self._parent_applied(want.parent, self.cfg.block_time_ms / 1000)
        self.timeline.mark(want.round.view, "seen", time.monotonic(), leader=True)
        cand = None
        while cand is None:  # a failed build is retried at the next slot while the view lasts
            if self.stopping or engine.view != want.round.view:
                return
            cand = await self._build(want)
            if cand is None:
                await asyncio.sleep(self.cfg.block_time_ms / 1000)
        block = cand.prepared.block
        self._remember_body(block)
        if self.net is not None:
            self.net.broadcast(CH_BLOCKS, block.encode())
        self._proposed_at[want.round.view] = time.monotonic()
        await self._propose_block(want, block)
        self.timeline.mark(want.round.view, "voted", time.monotonic())

    async def _parent_applied(self, parent: bytes, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) while ``parent`` is finalized but not yet committed and handed to the node.

        Building on it then uses the head's own world and a mempool that no longer holds the parent's
        transactions, and the builder thread is free for the parent's commit, whose after-commit work takes the
        state lock on the event loop (a build queued first would hold the lock for its whole execution)."""
        deadline = time.monotonic() + timeout_s
        while any(f.proposal.payload == parent for f in self._finals) and not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._applied.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._applied.wait(), left)

    async def _build(self, want: ProposalWanted) -> Candidate | None:
        txs = self._take()
        observe = StepTimer()
        t0 = time.perf_counter()
        try:
            cand: Candidate = await self._in_builder(lambda: self.forks.build(
                want.parent, want.round, txs, timestamp_ms=int(time.time() * 1000), proposer=self._proposer_key,
                sign=self._sign, fee_recipient=self._fee_recipient, presence=self._presence, observe=observe),
                view=want.round.view)
        except Exception as e:  # nothing may stop the chain: the view times out and the next leader proposes
            self.metrics.block_production_failures.inc()
            log.exception("block production failed; retrying at the next slot", view=want.round.view,
                          height=self.chain.height + 1, error=repr(e))
            return None
        digest = cand.prepared.block.hash()
        self.timeline.mark(want.round.view, "exec_end", time.monotonic())
        self._own_blocks.add(digest)
        self._build_s[digest] = build_s = time.perf_counter() - t0
        if self.on_built is not None:
            self.on_built(len(cand.prepared.block.transactions), build_s)
        self._observed[digest] = observe
        return cand

    async def _propose_block(self, want: ProposalWanted, block: Block) -> None:
        """Keep the block durably, then propose it: the engine journals the proposal vote, and after a crash
        that vote must name a body this validator still has. The synced store write runs on the journal's writer
        thread (off the loop) and is awaited before the engine even signs the vote (which it ignores if the view
        moved on meanwhile); a failed write raises here, as before: no vote, the view times out."""
        engine = self.engine
        assert engine is not None
        digest, raw = block.hash(), block.encode()
        await self._outbox.run(lambda: self.records.put_proposal(digest, raw))
        self._act(engine.propose(want.round, digest, self._now()))

    async def produce_once(self) -> PreparedBlock:
        """Single validator, driven by hand (tests, benchmarks): build the wanted block now, propose it and
        commit what finalizes. Raises RuntimeError when this validator is not the one to propose."""
        if self.engine is None:
            self.start_engine()
        want = self._wanted
        if want is None or self.engine is None or self.engine.view != want.round.view:
            raise RuntimeError("no proposal is wanted from this validator now")
        cand = await self._build(want)
        if cand is None:
            raise RuntimeError("block build failed (see the log)")
        self._wanted = None
        await self._propose_block(want, cand.prepared.block)
        await self._outbox.flush()  # the votes journaled (off the loop) and Finalized acted on before committing
        await self._commit_ready()
        return cand.prepared

    # ------------------------------------------------------------------------------------------ verifying

    async def _verify(self, proposal: Proposal) -> None:
        engine = self.engine
        assert engine is not None
        view = proposal.round.view
        block = await self._body(proposal.payload, until_view=view)
        if block is None:
            return  # the view timed out meanwhile; nothing to answer
        self.timeline.mark(view, "body", time.monotonic(), leader=False)
        h = block.header
        ok = h.round == proposal.round and h.parent_hash == proposal.parent
        parent = await self._known_header(proposal.parent) if ok else None
        reason = "round_or_parent_mismatch"
        if ok and (parent is None or parent.round.view != proposal.parent_view):
            ok, reason = False, "unknown_parent" if parent is None else "parent_view_mismatch"
        if ok:
            leader = engine.leader_of(view)
            leader_key = None if leader is None else self._validator_key(leader)
            if leader_key is None:
                ok, reason = False, "unknown_leader"
            else:
                try:
                    await self._in_builder(lambda: self.forks.verify(
                        block, leader_key=leader_key, max_timestamp_ms=int(time.time() * 1000) + MAX_FUTURE_DRIFT_MS),
                        view=view)
                    self.timeline.mark(view, "exec_end", time.monotonic())
                except InvalidBlock as e:
                    ok, reason = False, e.code
                except Exception as e:
                    ok, reason = False, "internal_error"
                    log.exception("block verification failed unexpectedly", view=view, error=repr(e))
        if not ok:
            self.metrics.consensus_invalid_blocks.labels(reason=reason).inc()
            log.warning("proposal refused", view=view, reason=reason, hash="0x" + proposal.payload.hex()[:16])
        self._act(engine.verified(proposal, ok, self._now()))
        if ok:
            self.timeline.mark(view, "voted", time.monotonic())

    def _header(self, digest: bytes) -> BlockHeader | None:
        """:meth:`Forks.header`, the committed head's taken from memory: a stored block is read back whole (every
        transaction decoded, tens of ms for a full block), and the head is the parent asked for most views."""
        head = self.chain.head
        if digest == head.hash():
            return head.header
        return self.forks.header(digest)

    async def _known_header(self, digest: bytes) -> Any:
        """The header of ``digest``, fetching and verifying its body (and, recursively, unknown ancestors'
        bodies) when it is notarized but was never seen here."""
        header = self._header(digest)
        if header is not None:
            return header
        block = await self._body(digest, until_view=None)
        if block is None:
            return None
        parent = self._header(block.header.parent_hash) or await self._known_header(block.header.parent_hash)
        if parent is None:
            return None
        try:  # notarized by a quorum: verified without the leader check (the certificate is the proof)
            await self._in_builder(lambda: self.forks.verify(block, leader_key=None, max_timestamp_ms=None))
        except InvalidBlock as e:
            log.warning("notarized block does not verify", hash="0x" + digest.hex()[:16], reason=e.code)
            return None
        return block.header

    def _remember_body(self, block: Block, size: int = 0) -> None:
        """Cache ``block`` (``size``: its encoded bytes when a peer sent it), evicting the oldest beyond
        ``BODY_CACHE`` bodies or ``BODY_CACHE_BYTES`` bytes (the newest one always stays)."""
        digest = block.hash()
        self._body_bytes += size - self._body_sizes.pop(digest, 0)
        if size:
            self._body_sizes[digest] = size
        self._bodies[digest] = block
        self._bodies.move_to_end(digest)
        while len(self._bodies) > 1 and (len(self._bodies) > BODY_CACHE or self._body_bytes > BODY_CACHE_BYTES):
            old, _ = self._bodies.popitem(last=False)
            self._body_bytes -= self._body_sizes.pop(old, 0)
        waiter = self._body_waiters.pop(digest, None)
        if waiter is not None:
            waiter.set()

    async def _body(self, digest: bytes, until_view: int | None) -> Block | None:
        """The body of block ``digest``: cached, known, or asked from peers (retried every 500 ms) while the
        engine is still at or below ``until_view`` (None: for up to 10 s)."""
        give_up = time.monotonic() + 10
        while not self.stopping:
            block = self._bodies.get(digest) or self.forks.block(digest)
            if block is not None:
                return block
            engine = self.engine
            if engine is None or (until_view is not None and engine.view > until_view) or \
                    (until_view is None and time.monotonic() > give_up):
                return None
            if self.net is not None:
                self.net.broadcast(CH_SYNC, encode_sync(BlockRequest(digest)))
            waiter = self._body_waiters.setdefault(digest, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), 0.5)
        return None

    # ------------------------------------------------------------------------------------------ committing

    async def _commit_loop(self) -> None:
        assert self._commit_wake is not None
        while True:
            await self._commit_wake.wait()
            self._commit_wake.clear()
            try:
                await self._commit_ready()
            except ConsensusFault as e:
                log.critical("finalized chain conflicts with the committed one; not committing", error=str(e))
                self.metrics.consensus_faults.labels(reason="safety").inc()
            except Exception as e:  # retried at the next wake (a commit error must not end the loop)
                self.metrics.block_production_failures.inc()
                log.exception("committing a finalized block failed; will retry", error=repr(e))
                await asyncio.sleep(0.2)
                self._commit_wake.set()

    async def _commit_ready(self) -> None:
        """Commit the queued finalized blocks that extend the head, in order."""
        while self._finals:
            f = self._finals[0]
            digest = f.proposal.payload
            committed_at = self.chain.blocks.height_of(digest)
            if committed_at is not None:  # already committed (by sync): skip
                self._finals.popleft()
                continue
            block = self._bodies.get(digest) or self.forks.block(digest)
            if block is not None and self.chain.beyond_halt(block.header.height):  # issue 34: --halt-height
                return
            if block is None:
                if self._running:
                    self._spawn(self._fetch_body_then_wake(digest))
                return
            if block.header.parent_hash != self.chain.head.hash():
                if self.chain.blocks.height_of(block.header.parent_hash) is not None:
                    raise ConsensusFault(f"finalized block 0x{digest.hex()[:16]} does not extend the head")
                self._maybe_sync(force=True)  # its parent is not here yet: behind
                return
            await self._commit_one(block, f.seed, f.certificate)
            self._finals.popleft()
            self._applied.set()

    async def _fetch_body_then_wake(self, digest: bytes) -> None:
        await self._body(digest, until_view=None)
        if self._commit_wake is not None:
            self._commit_wake.set()

    async def _commit_one(self, block: Block, seed: bytes, certificate: Finalization | None) -> None:
        digest = block.hash()
        own = digest in self._own_blocks
        observe = self._observed.pop(digest, None)
        t0 = time.perf_counter()
        view = block.header.round.view
        prepared, inspected = await self._in_builder(lambda: self.forks.commit(
            block, seed=seed, certificate=certificate, inspect=lambda p, env: self._inspect(p, env, observe)),
            view=view, stage="commit_start")
        commit_s = time.perf_counter() - t0
        self._own_blocks.discard(digest)
        build_s = self._build_s.pop(digest, 0.0)
        self._on_commit(CommittedBlock(prepared, inspected, own, build_s, commit_s))
        self.timeline.mark(view, "committed", time.monotonic())
        self.timeline.close(view)
        self.metrics.consensus_finalized_height.set(block.header.height)
        self._compact_journal()

    # ------------------------------------------------------------------------------------------ peers

    def peer_handlers(self) -> dict[int, Callable[[int, bytes], None]]:
        """The peer-layer channels consensus serves (channel → handler(sender, payload), on the event loop),
        registered on the peer layer's :class:`~cowboy_node.p2p.peer_router.PeerRouter` at assembly."""
        return {CH_CONSENSUS: self._on_consensus, CH_BLOCKS: self._on_block, CH_TXS: self._admit_gossip_from,
                CH_SYNC: self._on_sync}

    def _admit_gossip_from(self, sender: int, payload: bytes) -> None:
        self._admit_gossip(payload)

    def on_peer_message(self, sender: int, channel: int, payload: bytes) -> None:
        """A message from authenticated validator ``sender`` on one of :meth:`peer_handlers`' channels, with the
        peer router's error handling (tests and benchmarks drive the service without a router)."""
        route_peer_message(self.peer_handlers(), self.metrics, sender, channel, payload)

    def _on_consensus(self, sender: int, payload: bytes) -> None:
        msg = decode_message(payload)
        self.metrics.consensus_messages_received.labels(kind=type(msg).__name__.lower()).inc()
        if self.engine is None:
            return
        if isinstance(msg, Fetch) and not self.resolver.allow_fetch(sender, len(msg.views)):
            return  # over its budget of views answered (refused and counted there)
        engine = self.engine
        if isinstance(msg, Notarize | Finalize) and msg.signer == sender and \
                engine.finalized_view < msg.round.view <= engine.view + engine.cfg.window:  # junk views make no record
            self.timeline.mark(msg.round.view, f"{type(msg).__name__.lower()}{sender}", time.monotonic())
        if isinstance(msg, Notarize) and msg.signer == sender and self.engine.leader_of(msg.round.view) == sender:
            self._proposed_at.setdefault(msg.round.view, time.monotonic())
            self.timeline.mark(msg.round.view, "seen", time.monotonic(), leader=False)
        self._act(self.engine.receive(sender, msg, self._now()))

    def _on_block(self, sender: int, payload: bytes) -> None:
        """A block body from a peer: kept only when awaited here or of a view still to commit (above the committed
        head's, at most the engine's vote window ahead) — unsolicited bodies of other views are dropped, counted."""
        block = Block.decode(payload, known=self.known_transaction)
        engine = self.engine
        digest = block.hash()
        view = block.header.round.view
        if digest not in self._body_waiters and engine is not None and \
                not self.chain.head.header.round.view < view <= engine.view + engine.cfg.window:
            self.metrics.consensus_bad_messages.labels(reason="unsolicited_body").inc()
            return
        self._remember_body(block, len(payload))
        self._maybe_preverify(sender, block)

    def _maybe_preverify(self, sender: int, block: Block) -> None:
        """Start executing the leader's block as soon as its body arrives, before its proposal vote (sent after
        the body) is processed: :meth:`_verify` then finds the candidate ready. Only a body the elected leader of
        the current or next view sent itself, on a known parent, once per view. This is not a vote: voting still
        waits for the engine's ``VerifyBlock`` and :meth:`_verify`'s checks of the proposal against the block."""
        engine = self.engine
        if engine is None or not self._running:
            return
        view = block.header.round.view
        if not engine.view <= view <= engine.view + 1 or view in self._preverified:
            return
        leader = engine.leader_of(view)
        if leader is None or leader != sender or leader == self.cfg.me or \
                self._header(block.header.parent_hash) is None:
            return
        for old in [w for w in self._preverified if w < engine.view]:
            self._preverified.discard(old)
        self._preverified.add(view)
        self.timeline.mark(view, "body", time.monotonic(), leader=False)
        self._spawn(self._preverify(block, self._validator_key(leader)))

    async def _preverify(self, block: Block, leader_key: bytes) -> None:
        view = block.header.round.view
        try:
            await self._in_builder(lambda: self.forks.verify(
                block, leader_key=leader_key, max_timestamp_ms=int(time.time() * 1000) + MAX_FUTURE_DRIFT_MS),
                view=view)
            self.timeline.mark(view, "exec_end", time.monotonic())
        except InvalidBlock:
            pass  # refused again (and counted) when the engine asks for its verification
        except Exception as e:
            log.exception("early block verification failed unexpectedly", view=view, error=repr(e))

    def _on_sync(self, sender: int, payload: bytes) -> None:
        self.resolver.on_sync(sender, payload)
        self.syncing = self.resolver.syncing

    async def _status_loop(self) -> None:
        while True:
            if self.net is not None:
                self.net.broadcast(CH_SYNC, self.resolver.status())
                self.metrics.consensus_peers.set(len(self.net.connected()))
            self._maybe_sync()
            await asyncio.sleep(STATUS_INTERVAL_S)

    def _maybe_sync(self, force: bool = False) -> None:
        """Let the resolver ask peers that are ahead for blocks (``force``: one block behind is enough)."""
        self.resolver.tick(force)
        self.syncing = self.resolver.syncing

    def _on_synced(self, last: Block, seed: bytes, committed: list[PreparedBlock]) -> None:
        """Synced blocks were committed (on the event loop): the node's after-commit work, then the engine's floor
        moves to the last of them."""
        for prepared in committed:
            self.forks.candidates.pop(prepared.block.hash(), None)
            self._on_commit(CommittedBlock(prepared, None, False, 0.0, 0.0))
        log.info("synced finalized blocks", count=len(committed), height=last.header.height)
        if self.engine is not None:
            self._act(self.engine.advance_floor(last.header.round.view, last.hash(), seed, self._now()))
        if self._commit_wake is not None:
            self._commit_wake.set()

    # ------------------------------------------------------------------------------------------ status

    def status_json(self) -> dict[str, Any]:
        """``/status`` ``consensus`` section."""
        engine = self.engine
        view = 0 if engine is None else engine.view
        leader = None if engine is None else engine.leader_of(view)
        return {
            "validators": self.scheme.n, "quorum": self.scheme.quorum, "me": self.cfg.me,
            "view": view, "leader": leader, "finalized_view": 0 if engine is None else engine.finalized_view,
            "finalized_height": self.chain.height, "syncing": self.syncing,
            "peers": sorted(self.net.connected()) if self.net is not None else [],
            "delta_ms": self.cfg.delta_ms, "evidence": self.evidence.count,
            "executions": dict(sorted(self.forks.executions.items())), "timeline": self._timeline_summary(),
            "voting": self._voting_json(),
        }

    def _voting_json(self) -> dict[str, Any]:
        """``consensus.voting``: whether this validator signs votes, and if not why and until when."""
        if self.fatal is not None:
            return {"enabled": False, "reason": "journal_error", "until_view": None,
                    "error": str(self.fatal), "errno": self.fatal.errno_name}
        guard = self._guard
        if guard is not None:
            return {"enabled": False, "reason": self._guard_reason, "until_view": guard.until_view,
                    "watch_views": guard.views, "watching_since_view": guard.watch_from}
        return {"enabled": True, "reason": None, "until_view": None}

    def _timeline_summary(self) -> dict[str, object]:
        """The timeline summary, recomputed at most once a second (``/status`` is polled often)."""
        now = time.monotonic()
        cached = self._timeline_cache
        if cached is None or now - cached[0] >= 1.0:
            cached = self._timeline_cache = (now, self.timeline.summary())
        return cached[1]

    def evidence_json(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` newest evidence records, newest last (``GET /consensus/evidence``)."""
        return [e.to_json(seq) for seq, e in self.evidence.latest(limit)]


_FAULT_LABELS = (("conflicting", "equivocation"), ("another validator", "impersonation"),
                 ("certificate", "bad_certificate"), ("signature", "bad_signature"))
"""Engine fault reasons (by substring) → the bounded ``reason`` label of ``cowboy_consensus_faults_total``."""


def _fault_label(reason: str) -> str:
    """A bounded metric label for an engine fault reason."""
    return next((label for key, label in _FAULT_LABELS if key in reason), "other")


__all__ = ["CommittedBlock", "ConsensusService", "Network", "ServiceConfig"]
