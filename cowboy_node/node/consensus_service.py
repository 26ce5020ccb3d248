"""The consensus service: the asyncio shell around consensus's three sans-I/O parts (issue 32).

One engine serves every topology. With one validator it finalizes each block as soon as it is proposed; with
several, blocks and votes travel over the validator peer layer (:mod:`cowboy_node.p2p.peers`). The work is done
by the parts in ``cowboy_node/consensus/service/``, built here with constructor arguments:

- :class:`~cowboy_node.consensus.service.voter.Voter` — the engine, the vote journal (every own vote fsynced
  before anything after it is sent, the writes on a writer thread: :mod:`cowboy_node.node.vote_outbox`), the
  double-sign guard, and acting on the engine's outputs;
- :class:`~cowboy_node.consensus.service.application.Application` — build, verify and commit blocks over
  :class:`~cowboy_node.consensus.forks.Forks`, the bodies it holds, early execution of the leader's block;
- :class:`~cowboy_node.consensus.service.resolver.Resolver` — status announcements and catching up through block
  sync (:mod:`cowboy_node.node.sync_resolver`).

This module adapts the runtime for them (:class:`LoopRuntime`: the event loop, the builder thread under the
node's state lock, tasks, wake-ups; :class:`SystemClock`), runs the engine's timer loop, the commit loop and the
status loop, serves the peer channels (:meth:`ConsensusService.peer_handlers`, registered on the peer router at
assembly) and answers ``/status``. Nothing here may stop the chain: a failed build, verification or commit is
logged and counted, and the engine's timers move the view on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.evidence import EvidenceStore
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.journal import JournalWriteError, VoteJournal
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.service.application import MAX_FUTURE_DRIFT_MS, Application, CommittedBlock, Producer
from cowboy_node.consensus.service.bodies import BODY_CACHE, BODY_CACHE_BYTES, BodyCache
from cowboy_node.consensus.service.ports import Network, Signal
from cowboy_node.consensus.service.resolver import Resolver
from cowboy_node.consensus.service.voter import ABSTAIN, COMPACT_AFTER, Voter, VoterConfig, VoterLinks
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import ConsensusFault, Engine
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.consensus.stop import StopSignal
from cowboy_node.consensus.sync_messages import CH_BLOCKS, CH_CONSENSUS, CH_SYNC, CH_TXS
from cowboy_node.consensus.timeline import ViewTimeline
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.node.statesync_fallback import FallbackTrigger
from cowboy_node.node.sync_resolver import Resolver as BlockSync
from cowboy_node.node.sync_server import ServeLimits
from cowboy_node.node.vote_outbox import OrderedOutbox
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.peer_router import route_peer_message
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import KnownTransaction
from cowboy_protocol.types.transaction import Transaction

log = get_logger("cowboy.consensus")

STATUS_INTERVAL_S = 1.0
"""How often each validator announces its finalized height."""
TIMELINE_FILE = "consensus-timeline.json"
"""Written next to the vote journal at shutdown: the newest view timeline records (``consensus/timeline.py``)."""
COMMIT_RETRY_S = 0.2
"""A commit that raised is retried after this long (a commit error must not end the commit loop)."""


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
    sync_serve: ServeLimits | None = None
    """Budgets and caps of answering peers' sync requests and Fetches (None: ``ServeLimits()``'s defaults)."""

    def voter(self) -> VoterConfig:
        """The voter's part of these settings."""
        return VoterConfig(me=self.me, delta_ms=self.delta_ms, election=self.election, skip_timeout=self.skip_timeout,
                           double_sign_check_views=self.double_sign_check_views, fresh_key=self.fresh_key)


class SystemClock:
    """The process's clocks (:class:`~cowboy_node.consensus.service.ports.Clock`)."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def wall_ms(self) -> int:
        """``time.time()`` in whole milliseconds."""
        return int(time.time() * 1000)

    def perf(self) -> float:
        """``time.perf_counter()``."""
        return time.perf_counter()


class LoopRuntime:
    """The event loop and the builder thread for the consensus parts
    (:class:`~cowboy_node.consensus.service.ports.Runtime`)."""

    def __init__(self, *, lock: threading.Lock, stop: StopSignal, timeline: ViewTimeline) -> None:
        self.lock = lock
        """The node's state lock, held by every builder-thread job."""
        self.stop = stop
        self.timeline = timeline
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="block-builder")
        """The builder thread: everything touching the chain runs there, one job at a time."""
        self.tasks: set[asyncio.Task[None]] = set()
        """The tasks spawned for the parts (cancelled when the service stops)."""
        self.running = False
        """True while :meth:`ConsensusService.run` runs (outside it, nothing is spawned)."""
        self.wake_event: asyncio.Event | None = None
        """Wakes the engine's timer loop (set up by :meth:`ConsensusService.run`)."""
        self.commit_event: asyncio.Event | None = None
        """Wakes the commit loop (set up by :meth:`ConsensusService.run`)."""
        stop.subscribe(self.wake)

    @property
    def stopping(self) -> bool:
        """True once the node was asked to stop (the shared :class:`~cowboy_node.consensus.stop.StopSignal`)."""
        return self.stop.requested

    def begin(self) -> tuple[asyncio.Event, asyncio.Event]:
        """The service's loop starts (on the running event loop): its wake-up flags, engine's and commit's."""
        self.wake_event, self.commit_event = asyncio.Event(), asyncio.Event()
        self.running = True
        return self.wake_event, self.commit_event

    def end(self) -> None:
        """The service's loop ended: nothing more is spawned."""
        self.running = False

    def spawn(self, work: Any) -> None:
        """Run ``work`` (a coroutine) as a task of the service (a failure is logged). Typed ``Any``: block sync's
        components hand it their coroutines as ``object``."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("consensus task failed", error=repr(task.exception()))

    async def in_builder(self, fn: Callable[[], Any], view: int | None = None, stage: str = "exec_start") -> Any:
        """Run ``fn`` in the builder thread under the state lock (marking ``stage`` of ``view`` when it starts)."""
        def locked() -> Any:
            with self.lock:
                if view is not None:
                    self.timeline.mark(view, stage, time.monotonic())
                return fn()
        return await asyncio.get_running_loop().run_in_executor(self.executor, locked)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)

    def signal(self) -> Signal:
        """A new ``asyncio.Event``."""
        return asyncio.Event()

    async def wait(self, signal: Signal, timeout_s: float) -> None:
        """Until ``signal`` (an ``asyncio.Event``) is set, or ``timeout_s``."""
        assert isinstance(signal, asyncio.Event)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(signal.wait(), timeout_s)

    def wake(self) -> None:
        """Wake the engine's timer loop."""
        if self.wake_event is not None:
            self.wake_event.set()

    def wake_commit(self) -> None:
        """Wake the commit loop."""
        if self.commit_event is not None:
            self.commit_event.set()


class ConsensusService:
    """Runs consensus for one validator: builds the voter, the application and the resolver, and drives them
    (see the module docstring)."""

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
        self.metrics = metrics
        self.net = net
        """The peer layer (None with one validator)."""
        self.records = ConsensusRecords(chain.store)
        self.forks = Forks(chain, self.records, signature_checked=signature_checked)
        self.evidence = EvidenceStore(chain.store)
        """Faulty behaviour seen (conflicting votes, bad signatures, impersonation), kept durably."""
        self.timeline = ViewTimeline()
        """Per-view stage times (where proposal→finalization time goes; ``/status`` ``consensus.timeline``)."""
        self.bodies = BodyCache()
        """Block bodies held by hash (the application's; block sync serves the uncommitted ones from it)."""
        self._stop = stop or StopSignal()
        self.runtime = LoopRuntime(lock=tree_lock, stop=self._stop, timeline=self.timeline)
        self._admit_gossip = admit_gossip
        self._timeline_cache: tuple[float, dict[str, object]] | None = None
        clock = SystemClock()
        # The parts call each other; the few calls that cross back (the outbox into the voter, the voter into the
        # application and the resolver) are bound here and run only once all three exist.
        self.outbox = OrderedOutbox(journal=lambda: self.voter.journal, act=lambda o: self.voter.act_one(o),
                                    halted=lambda: self.voter.fatal is not None,
                                    failed=lambda e: self.voter.journal_failed(e),
                                    journaling=lambda v: self.voter.mark_journaling(v),
                                    resumed=lambda: self.voter.after_outputs())
        """The engine's outputs, acted on in order; the journal writes (and the proposal's store write) on its
        writer thread, off the event loop (``node/vote_outbox.py``)."""
        fallback = config.state_sync_fallback
        self.block_sync = BlockSync(chain, self.records, scheme, net=lambda: net, metrics=metrics,
                                    in_builder=self.runtime.in_builder, spawn=self.runtime.spawn,
                                    memory_body=lambda d: self.bodies.get(d) or self.forks.memory_block(d),
                                    on_applied=lambda last, seed, done: self.resolver.on_synced(last, seed, done),
                                    signature_checked=signature_checked, verify_workers=config.sync_verify_workers,
                                    fallback=fallback.check if fallback else None, serve=config.sync_serve)
        """Serves and fetches finalized blocks (``node/sync_resolver.py``)."""
        self.voter = Voter(chain, config=config.voter(), scheme=scheme, records=self.records, forks=self.forks,
                           journal=journal, outbox=self.outbox, net=net, clock=clock, runtime=self.runtime,
                           metrics=metrics, log=log, timeline=self.timeline, evidence=self.evidence,
                           links=VoterLinks(to_application=lambda o: self.application.on_output(o),
                                            keep_body=self.bodies.remember, syncing=lambda: self.resolver.syncing,
                                            allow_fetch=self.block_sync.allow_fetch, request_stop=self.request_stop))
        self.application = Application(
            chain, forks=self.forks, records=self.records, voter=self.voter, bodies=self.bodies,
            producer=Producer(block_time_ms=config.block_time_ms, proposer_key=proposer_key, sign=sign,
                              fee_recipient=fee_recipient, take_transactions=take_transactions, presence=presence,
                              inspect=inspect, on_commit=on_commit, on_built=on_built,
                              known_transaction=known_transaction),
            outbox=self.outbox, net=net, clock=clock, runtime=self.runtime, metrics=metrics, log=log,
            timeline=self.timeline, behind=lambda: self.resolver.maybe_sync(force=True))
        self.resolver = Resolver(self.block_sync, voter=self.voter, application=self.application, net=net,
                                 runtime=self.runtime, metrics=metrics, log=log)

    # ------------------------------------------------------------------------------------------ the parts' state

    @property
    def engine(self) -> Engine | None:
        """The Simplex engine (None until started)."""
        return self.voter.engine

    @property
    def journal(self) -> VoteJournal | None:
        """The vote journal (None: votes are not journaled)."""
        return self.voter.journal

    @property
    def fatal(self) -> JournalWriteError | None:
        """The journal error that stopped this validator (None while healthy)."""
        return self.voter.fatal

    @property
    def syncing(self) -> bool:
        """True while this validator is catching up with peers that are ahead."""
        return self.resolver.syncing

    @property
    def known_transaction(self) -> KnownTransaction | None:
        """Transactions already decoded here, by full signed body (the node's ``Mempool.by_body``)."""
        return self.application.producer.known_transaction

    @property
    def on_built(self) -> Callable[[int, float], None] | None:
        """Called after each own build (transactions in the block, seconds the build took)."""
        return self.application.producer.on_built

    # ------------------------------------------------------------------------------------------ lifecycle

    def start_engine(self) -> None:
        """Create the engine at the committed head (the floor) with the journaled votes, and enter a view."""
        self.voter.start_engine()

    async def produce_once(self) -> PreparedBlock:
        """Single validator, driven by hand (tests, benchmarks): build the wanted block now, propose it and
        commit what finalizes. Raises RuntimeError when this validator is not the one to propose."""
        return await self.application.produce_once()

    def close(self) -> None:
        """Release the builder thread and the journal (idempotent); leave the newest view timeline records next
        to the journal (``consensus-timeline.json``: not in ``/status``, which is polled often and would carry
        them every time)."""
        self.block_sync.close()
        self.runtime.executor.shutdown(wait=True)
        self.outbox.close()  # nothing queued is sent any more; the write in flight ends before the journal closes
        journal = self.voter.journal
        if journal is not None:
            with contextlib.suppress(OSError):
                path = journal.path.parent / TIMELINE_FILE
                path.write_text(json.dumps(self.timeline.summary(recent=256).get("recent", [])))
            try:
                journal.close()
            except OSError as e:
                log.error("closing the vote journal failed", path=str(journal.path), errno=e.errno, error=str(e))

    @property
    def stopping(self) -> bool:
        """True once the node was asked to stop (the shared :class:`~cowboy_node.consensus.stop.StopSignal`)."""
        return self._stop.requested

    def request_stop(self) -> None:
        """Stop after the block in progress."""
        self._stop.request()

    async def run(self) -> None:
        """Drive the engine until stopped."""
        rt = self.runtime
        wake, commit = rt.begin()
        wanted = self.application.wanted
        if self.voter.engine is None:
            self.voter.start_engine()
        elif wanted is not None:
            rt.spawn(self.application.propose(wanted))
        committer = asyncio.create_task(self._commit_loop(commit))
        status = asyncio.create_task(self._status_loop()) if self.net is not None else None
        try:
            while not self.stopping:
                engine = self.voter.engine
                assert engine is not None
                deadline = engine.next_deadline()
                delay = 0.5 if deadline is None else max(0.0, (deadline - self.voter.now()) / 1000)
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(delay, 0.5))
                if self.stopping:
                    break
                self.voter.tick()
        finally:
            rt.end()
            self.outbox.stop()  # outputs still queued behind a journal write are dropped, never sent after stop
            for t in [committer, status, *rt.tasks]:
                if t is not None:
                    t.cancel()
            for t in [committer, status, *rt.tasks]:
                if t is not None:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await t
            # The block in progress (a commit in the builder thread) finishes before the store closes.
            await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def _commit_loop(self, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            wake.clear()
            try:
                await self.application.commit_ready()
            except ConsensusFault as e:
                log.critical("finalized chain conflicts with the committed one; not committing", error=str(e))
                self.metrics.consensus_fault("safety")
            except Exception as e:  # retried at the next wake (a commit error must not end the loop)
                self.metrics.block_production_failed()
                log.exception("committing a finalized block failed; will retry", error=repr(e))
                await asyncio.sleep(COMMIT_RETRY_S)
                wake.set()

    async def _status_loop(self) -> None:
        while True:
            self.resolver.status_tick()
            await asyncio.sleep(STATUS_INTERVAL_S)

    # ------------------------------------------------------------------------------------------ peers

    def peer_handlers(self) -> dict[int, Callable[[int, bytes], None]]:
        """The peer-layer channels consensus serves (channel → handler(sender, payload), on the event loop),
        registered on the peer layer's :class:`~cowboy_node.p2p.peer_router.PeerRouter` at assembly."""
        return {CH_CONSENSUS: self.voter.on_message, CH_BLOCKS: self.application.on_block,
                CH_TXS: self._admit_gossip_from, CH_SYNC: self.resolver.on_sync}

    def _admit_gossip_from(self, sender: int, payload: bytes) -> None:
        self._admit_gossip(payload)

    def on_peer_message(self, sender: int, channel: int, payload: bytes) -> None:
        """A message from authenticated validator ``sender`` on one of :meth:`peer_handlers`' channels, with the
        peer router's error handling (tests and benchmarks drive the service without a router)."""
        route_peer_message(self.peer_handlers(), self.metrics, sender, channel, payload)

    # ------------------------------------------------------------------------------------------ status

    def status_json(self) -> dict[str, Any]:
        """``/status`` ``consensus`` section."""
        engine = self.voter.engine
        view = 0 if engine is None else engine.view
        leader = None if engine is None else engine.leader_of(view)
        return {
            "validators": self.scheme.n, "quorum": self.scheme.quorum, "me": self.cfg.me,
            "view": view, "leader": leader, "finalized_view": 0 if engine is None else engine.finalized_view,
            "finalized_height": self.chain.height, "syncing": self.syncing,
            "peers": sorted(self.net.connected()) if self.net is not None else [],
            "delta_ms": self.cfg.delta_ms, "evidence": self.evidence.count,
            "executions": dict(sorted(self.forks.executions.items())), "timeline": self._timeline_summary(),
            "voting": self.voter.voting_json(),
        }

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


__all__ = ["ABSTAIN", "BODY_CACHE", "BODY_CACHE_BYTES", "COMPACT_AFTER", "MAX_FUTURE_DRIFT_MS", "STATUS_INTERVAL_S",
           "TIMELINE_FILE", "CommittedBlock", "ConsensusService", "LoopRuntime", "Network", "ServiceConfig",
           "SystemClock"]
