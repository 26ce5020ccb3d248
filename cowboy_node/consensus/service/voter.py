"""The voter driver: the Simplex engine with its vote journal, its timers' clock and the double-sign guard.

It starts the engine at the committed head with the journaled votes, hands it the peers' consensus messages, and
acts on its outputs in order through the outbox (``node/vote_outbox.py``: every own vote durable before anything
after it is sent): votes go to the peer layer, certificates and faults are counted and recorded, and what the
application must do (``ProposalWanted``, ``VerifyBlock``, ``Finalized``) is handed to it as those same typed
messages. A journal error stops the node before the vote leaves (:attr:`Voter.fatal`); a validator started
without its journal abstains until it has watched the network (:class:`~cowboy_node.consensus.journal.DoubleSignGuard`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.evidence import Evidence, EvidenceStore
from cowboy_node.consensus.forks import Forks
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
from cowboy_node.consensus.service.ports import Clock, ConsensusMetrics, EventLog, Network, Runtime, VoteOutbox
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import (
    Broadcast,
    Config,
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
from cowboy_node.consensus.simplex.types import Fetch, Finalize, Message, Notarize, Vote, decode_message, encode_message
from cowboy_node.consensus.sync_messages import CH_CONSENSUS
from cowboy_node.consensus.timeline import ViewTimeline
from cowboy_node.types.block import Block

COMPACT_AFTER = 256
"""The vote journal is compacted after a commit once it holds more records than this."""
ABSTAIN = 2**62
"""``Config.vote_above_view`` while the double-sign guard watches: above any view the engine will reach."""
EVIDENCE_SEEN_MAX = 4096
"""Fault keys remembered to write each (signer, view, fault) once; forgotten all at once beyond this."""

AppMessage = ProposalWanted | VerifyBlock | Finalized
"""What the engine asks of the application pipeline."""


@dataclass(frozen=True, slots=True)
class VoterConfig:
    """The voter's settings (the consensus part of the service's config)."""

    me: int
    """This validator's index in the genesis validator list."""
    delta_ms: int
    """Δ of the engine (leader timeout 2Δ, notarization timeout 3Δ)."""
    election: Election = Election.RANDOM
    """Leader election."""
    skip_timeout: int = 10
    """Views of silence after which a leader's view is nullified on entry (engine ``skip_timeout``; 0: off)."""
    double_sign_check_views: int = 10
    """Views a validator started without its vote journal watches before it votes (0: off)."""
    fresh_key: bool = False
    """The operator vouches that this key never signed in this network: vote at once even without a journal."""


@dataclass(frozen=True, slots=True)
class VoterLinks:
    """How the voter reaches the other parts (calls that the service shell binds to the application, the
    resolver and the runtime)."""

    to_application: Callable[[AppMessage], None]
    """Hands the application what the engine asks of it."""
    keep_body: Callable[[Block], None]
    """Keeps an own proposal's body found in the store at start-up (its view may still finalize)."""
    syncing: Callable[[], bool]
    """Whether this validator is catching up (the double-sign guard restarts its watch then)."""
    allow_fetch: Callable[[int, int], bool]
    """Whether a peer's Fetch of that many views is within its budget (the resolver's)."""
    request_stop: Callable[[], None]
    """Stops the node (after a journal error)."""


class Voter:
    """Drives the engine for one validator (see the module docstring)."""

    def __init__(self, chain: Chain, *, config: VoterConfig, scheme: Scheme, records: ConsensusRecords,
                 forks: Forks, journal: VoteJournal | None, outbox: VoteOutbox, net: Network | None, clock: Clock,
                 runtime: Runtime, metrics: ConsensusMetrics, log: EventLog, timeline: ViewTimeline,
                 evidence: EvidenceStore, links: VoterLinks) -> None:
        self.chain = chain
        self.cfg = config
        self.scheme = scheme
        self.records = records
        self.forks = forks
        self.journal = journal
        self.outbox = outbox
        """The engine's outputs, acted on in order (``node/vote_outbox.py``)."""
        self.net = net
        """The peer layer (None with one validator)."""
        self.clock = clock
        self.runtime = runtime
        self.metrics = metrics
        self.log = log
        self.timeline = timeline
        """Per-view stage times (shared with the application)."""
        self.evidence = evidence
        """Faulty behaviour seen (conflicting votes, bad signatures, impersonation), kept durably."""
        self.links = links
        self.engine: Engine | None = None
        """The Simplex engine (None until :meth:`start_engine`)."""
        self.fatal: JournalWriteError | None = None
        """The journal error that stopped this validator (None while healthy): once set, no output of the engine
        is acted on any more (the vote it failed to journal, or any later one, never leaves) and the node stops."""
        self.guard: DoubleSignGuard | None = None
        """While not None: the double-sign guard is watching and the engine abstains (see :meth:`start_engine`)."""
        self.guard_reason: str | None = None
        """Why the engine abstains (``no_vote_journal``), for ``/status``."""
        self.proposed_at: dict[int, float] = {}
        """Monotonic time each recent view's proposal was built here or first seen (latency metrics)."""
        self._evidence_seen: set[tuple[int, int, str]] = set()

    def proposal_built(self, view: int, at: float) -> None:
        """This validator built ``view``'s proposal at monotonic ``at`` (where its latency metrics start)."""
        self.proposed_at[view] = at

    def now(self) -> int:
        """The engine's clock: monotonic milliseconds."""
        return int(self.clock.monotonic() * 1000)

    # ------------------------------------------------------------------------------------------ starting

    def start_engine(self) -> None:
        """Create the engine at the committed head (the floor) with the journaled votes, and enter a view."""
        head = self.chain.head
        floor_seed = self.forks.parent_seed(head.header)
        self._start_guard()
        votes = self.journal.load() if self.journal is not None else []  # JournalError: the caller refuses to start
        if self.journal is not None and self.journal.dropped_bytes:
            self.log.warning("vote journal had a torn last record; dropped it (that vote was never sent)",
                             path=str(self.journal.path), dropped_bytes=self.journal.dropped_bytes)
        cfg = Config(me=self.cfg.me, delta_ms=self.cfg.delta_ms, election=self.cfg.election, genesis=head.hash(),
                     floor_view=head.header.round.view, floor_seed=floor_seed, skip_timeout=self.cfg.skip_timeout,
                     vote_above_view=ABSTAIN if self.guard is not None else 0)
        stale = []
        for raw in self.records.proposals():  # own proposals not committed before a restart
            block = Block.decode(raw)
            if block.header.height > head.header.height:
                self.links.keep_body(block)
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
        self.metrics.consensus_gauges(voting=self.guard is None)
        if votes:
            self.log.info("vote journal replayed", votes=len(votes), highest_view=max(v.round.view for v in votes))
        self.act(self.engine.start(self.now()))

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
            (self.log.info if self.scheme.n == 1 else self.log.warning)(
                f"{why}; voting at once ({exempt})", path=str(journal.path))
            return
        if not marker.exists():
            write_marker(marker, f"watching {views} views before voting: started without {journal.path.name}\n")
        self.guard = DoubleSignGuard(views)
        self.guard_reason = "no_vote_journal"
        self.log.warning(f"{why}: not voting until in sync and {views} views watched "
                         "(`cowboy-node run --fresh-key` votes at once for a key that never signed)",
                         path=str(journal.path), marker=str(marker), double_sign_check_views=views)

    def _watch(self) -> None:
        """One step of the double-sign guard: once the watch is over, vote above the current view and drop the
        marker (in that order: a crash in between watches again, which is safe)."""
        guard, engine, journal = self.guard, self.engine, self.journal
        if guard is None or engine is None or journal is None:
            return
        if not guard.observe(engine.view, self.links.syncing()):
            return
        engine.allow_votes_above(engine.view)
        self.guard, self.guard_reason = None, None
        self.metrics.consensus_gauges(voting=True)
        self.log.info("double-sign watch over; voting from the next view", view=engine.view + 1, watched=guard.views)
        remove_marker(marker_path(journal.path))

    # ------------------------------------------------------------------------------------------ the journal

    def journal_failed(self, e: JournalWriteError) -> None:
        """A journal write failed: nothing more leaves this validator, and the node stops."""
        if self.fatal is None:
            self.fatal = e
            self.log.critical("vote journal write failed; stopping before the vote is sent", path=str(e.path),
                              errno=e.errno, errno_name=e.errno_name, error=str(e))
        self.metrics.consensus_gauges(voting=False)
        self.links.request_stop()

    def compact_journal(self) -> None:
        """Drop the journaled votes of views the node can no longer re-enter: at or below the committed head's
        view (a restart resumes there; blocks finalized but not yet committed are re-finalized from it). Runs on
        the journal's writer thread, in turn with the appends (a failure stops the node like a failed append)."""
        journal = self.journal
        if journal is None or journal.records <= COMPACT_AFTER:
            return
        above = self.chain.head.header.round.view
        self.outbox.background(lambda: journal.compact(above_view=above))

    def mark_journaling(self, vote: Vote) -> None:
        """The outbox starts writing ``vote`` (a timeline stage)."""
        self.timeline.mark(vote.round.view, f"journal_{type(vote).__name__.lower()}", self.clock.monotonic())

    def voting_json(self) -> dict[str, Any]:
        """``consensus.voting``: whether this validator signs votes, and if not why and until when."""
        if self.fatal is not None:
            return {"enabled": False, "reason": "journal_error", "until_view": None,
                    "error": str(self.fatal), "errno": self.fatal.errno_name}
        guard = self.guard
        if guard is not None:
            return {"enabled": False, "reason": self.guard_reason, "until_view": guard.until_view,
                    "watch_views": guard.views, "watching_since_view": guard.watch_from}
        return {"enabled": True, "reason": None, "until_view": None}

    # ------------------------------------------------------------------------------------------ inputs

    def on_message(self, sender: int, payload: bytes) -> None:
        """A consensus-channel message from authenticated validator ``sender`` (raises DecodeError if malformed)."""
        msg = decode_message(payload)
        self.metrics.consensus_message("received", type(msg).__name__.lower())
        if self.engine is None:
            return
        if isinstance(msg, Fetch) and not self.links.allow_fetch(sender, len(msg.views)):
            return  # over its budget of views answered (refused and counted there)
        engine = self.engine
        if isinstance(msg, Notarize | Finalize) and msg.signer == sender and \
                engine.finalized_view < msg.round.view <= engine.view + engine.cfg.window:  # junk views make no record
            self.timeline.mark(msg.round.view, f"{type(msg).__name__.lower()}{sender}", self.clock.monotonic())
        if isinstance(msg, Notarize) and msg.signer == sender and self.engine.leader_of(msg.round.view) == sender:
            self.proposed_at.setdefault(msg.round.view, self.clock.monotonic())
            self.timeline.mark(msg.round.view, "seen", self.clock.monotonic(), leader=False)
        self.act(self.engine.receive(sender, msg, self.now()))

    def tick(self) -> None:
        """The engine's timers, at the current time."""
        assert self.engine is not None
        self.act(self.engine.tick(self.now()))

    # ------------------------------------------------------------------------------------------ outputs

    def act(self, outputs: list[Output]) -> None:
        """Act on the engine's ``outputs`` in order, behind any still queued (see ``node/vote_outbox.py``)."""
        if self.fatal is not None:  # stopped on a journal error: the engine may think it sent votes; none leaves
            return
        if self.guard is not None:
            try:
                self._watch()
            except JournalWriteError as e:
                self.journal_failed(e)
                return
        self.outbox.push(outputs)
        self.after_outputs()

    def after_outputs(self) -> None:
        """After outputs were acted on: the view gauge, and the loop woken for the engine's next deadline."""
        if self.engine is not None:
            self.metrics.consensus_gauges(view=self.engine.view)
        self.runtime.wake()

    def act_one(self, o: Output) -> None:
        """Act on one output that is not a ``Journal`` (the outbox makes each wait for the journal writes before
        it)."""
        if isinstance(o, Broadcast):
            self._count_sent(o.message)
            if isinstance(o.message, Notarize | Finalize) and o.message.signer == self.cfg.me:
                self.timeline.mark(o.message.round.view, f"sent_{type(o.message).__name__.lower()}",
                                   self.clock.monotonic())
            if self.net is not None:
                self.net.broadcast(CH_CONSENSUS, encode_message(o.message))
        elif isinstance(o, Send):
            if self.net is not None:
                self.net.send(o.to, CH_CONSENSUS, encode_message(o.message))
        elif isinstance(o, ProposalWanted):
            self.metrics.consensus_gauges(view=o.round.view)
            self.links.to_application(o)
        elif isinstance(o, VerifyBlock):
            self.links.to_application(o)
        elif isinstance(o, Finalized):
            self._finalized(o)
        elif isinstance(o, SeedRevealed):
            self.records.put_seed(o.round, o.seed)
        elif isinstance(o, Notarized):
            self.metrics.consensus_certificate("notarization")
            self.timeline.mark(o.certificate.round.view, "notarized", self.clock.monotonic())
            t0 = self.proposed_at.get(o.certificate.round.view)
            if t0 is not None:
                self.metrics.consensus_latency("notarization", self.clock.monotonic() - t0)
        elif isinstance(o, Nullified):
            self.metrics.consensus_certificate("nullification")
            self.log.info("view nullified", view=o.certificate.round.view)
        elif isinstance(o, Faulty):
            self._faulty(o)

    def _finalized(self, o: Finalized) -> None:
        """Hand the block to the application's commit queue; its latency and timeline stage."""
        self.links.to_application(o)
        view = o.proposal.round.view
        self.timeline.mark(view, "finalized", self.clock.monotonic())
        t0 = self.proposed_at.get(view)
        if t0 is not None:
            self.metrics.consensus_latency("finalization", self.clock.monotonic() - t0)
        for old in [w for w in self.proposed_at if w <= view]:  # nullified views' entries too
            del self.proposed_at[old]
        self.runtime.wake_commit()

    def _faulty(self, o: Faulty) -> None:
        """Count the fault, record it once per signer, view and fault, and back the sender off."""
        self.metrics.consensus_fault(fault_label(o.reason))
        key = (o.signer, o.round.view, o.reason)
        if key not in self._evidence_seen:  # one record per signer, view and fault: a peer cannot
            if len(self._evidence_seen) >= EVIDENCE_SEEN_MAX:  # make us write per message it sends
                self._evidence_seen.clear()
            self._evidence_seen.add(key)
            self.evidence.add(Evidence(o.signer, o.round, o.reason, self.clock.wall_ms(), o.votes))
        self.log.warning("validator misbehaved", signer=o.signer, view=o.round.view, reason=o.reason)
        if self.net is not None:  # every engine fault is the authenticated sender's own: back it off
            self.net.penalize(o.signer, fault_label(o.reason))

    def _count_sent(self, m: Message) -> None:
        self.metrics.consensus_message("sent", type(m).__name__.lower())


_FAULT_LABELS = (("conflicting", "equivocation"), ("another validator", "impersonation"),
                 ("certificate", "bad_certificate"), ("signature", "bad_signature"))
"""Engine fault reasons (by substring) → the bounded ``reason`` label of ``cowboy_consensus_faults_total``."""


def fault_label(reason: str) -> str:
    """A bounded metric label for an engine fault reason."""
    return next((label for key, label in _FAULT_LABELS if key in reason), "other")


__all__ = ["ABSTAIN", "COMPACT_AFTER", "AppMessage", "Voter", "VoterConfig", "VoterLinks", "fault_label"]
