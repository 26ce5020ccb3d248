"""The consensus service's durable writes leave the event loop (issue 36 §2, ``node/vote_outbox.py``): while a vote's
journal write (or the proposal's store write) is held, the loop serves on; a vote's Broadcast never leaves before its
journal write returned; the engine's outputs are sent in the order it produced them, across calls; a failed write
sends nothing more and stops the validator; a proposal's block is durable before its vote is journaled; at shutdown
what is queued is dropped and the journal closes only after the write in flight.

Every transient state is held by a ``threading.Event`` the test owns; waits are bounded (30 s), never timed."""

from __future__ import annotations

import asyncio
import errno
import threading
from pathlib import Path

import pytest

from cowboy_node.consensus.journal import JournalWriteError, VoteJournal, create_empty_journal
from cowboy_node.consensus.service import voter as voter_mod
from cowboy_node.consensus.simplex.engine import Broadcast, Journal, Output, ProposalWanted, Send
from cowboy_node.consensus.simplex.types import (
    Finalize,
    Notarize,
    Nullify,
    Proposal,
    Vote,
    decode_message,
    encode_message,
)
from cowboy_node.consensus.sync_messages import CH_CONSENSUS
from cowboy_node.node.consensus_service import ConsensusService
from cowboy_node.types.block import Block, Round
from tests.unit.node.journal_harness import (
    act,
    consensus_sent,
    notarization,
    notarize,
    nullify,
    own_votes_sent,
    proposal,
)
from tests.unit.node.test_consensus_preverify import _Net, _service
from tests.unit.node_harness import make_node

LEADER = 1  # of view 1 (round robin); view 2's is 2
BOUND_S = 30.0
"""Generous bound of every wait for an event (a loaded machine is slow, never this slow)."""


class _HeldJournal(VoteJournal):
    """A vote journal whose writes wait, while ``gate`` is not set, for the test to open it; each write records
    the votes it made durable and the thread it ran on. ``fail`` makes the held write fail."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        """Set when a write has started (and is held while the gate is closed)."""
        self.gate = threading.Event()
        self.fail: JournalWriteError | None = None
        self.writes: list[list[Vote]] = []
        self.threads: list[threading.Thread] = []

    def append_many(self, votes: list[Vote]) -> None:
        self.threads.append(threading.current_thread())
        self.entered.set()
        self.gate.wait(BOUND_S)  # a safety valve only: the test opens the gate (a mutation that blocks the loop
        if self.fail is not None:  # on this wait fails on what was sent meanwhile, not by hanging)
            raise self.fail
        super().append_many(votes)
        self.writes.append(list(votes))


class _CheckingNet(_Net):
    """The fake peer layer that also records, for every own vote it is asked to send, whether the journal already
    held it durably at that moment (the safety rule)."""

    def __init__(self, journal: VoteJournal, me: int) -> None:
        super().__init__()
        self._journal = journal
        self._me = me
        self.undurable: list[Vote] = []

    def broadcast(self, channel: int, payload: bytes) -> int:
        if channel == CH_CONSENSUS:
            m = decode_message(payload)
            journal = self._journal
            if isinstance(m, Notarize | Nullify | Finalize) and m.signer == self._me and \
                    (journal is None or m not in journal.votes()):
                self.undurable.append(m)
        return super().broadcast(channel, payload)


def _held_service(tmp_path: Path, me: int = 0) -> tuple[ConsensusService, _CheckingNet, _HeldJournal]:
    path = tmp_path / "consensus-votes.journal"
    create_empty_journal(path)
    journal = _HeldJournal(path)
    net = _CheckingNet(journal, me)
    svc, _ = _service(me, journal=journal, net=net)
    return svc, net, journal


async def _entered(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, BOUND_S), "the durable write never started"


async def _flushed(svc: ConsensusService) -> None:
    await asyncio.wait_for(svc.outbox.flush(), BOUND_S)


def _sends(outs: list[Output]) -> list[bytes]:
    """What the engine asked to send, in its order (the payloads the peer layer must see, in that order)."""
    return [encode_message(o.message) for o in outs if isinstance(o, Broadcast | Send)]


def _sent(net: _Net) -> list[bytes]:
    return [payload for _, channel, payload in net.sent if channel == CH_CONSENSUS]


# ------------------------------------------------------------------------------------------------ the loop serves on


def test_the_loop_serves_while_a_vote_is_journaled_and_the_vote_leaves_only_after(tmp_path: Path) -> None:
    async def run() -> None:
        svc, net, journal = _held_service(tmp_path)
        svc.start_engine()
        engine = svc.engine
        assert engine is not None and engine.view == 1
        p = proposal(svc, 1)
        act(svc, engine.receive(LEADER, notarize(LEADER, p), 1_000))
        outs = act(svc, engine.verified(p, True, 1_001))  # returns at once: the write runs on the writer thread
        assert any(isinstance(o, Journal) for o in outs)
        await _entered(journal.entered)
        # the write is held: the loop still runs other coroutines and handles a peer's message
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        await asyncio.wait_for(ran.wait(), BOUND_S)
        received = svc.metrics.consensus_messages_received.labels(kind="nullify")._value.get()
        svc.on_peer_message(3, CH_CONSENSUS, encode_message(nullify(3, Round(0, 1))))
        assert svc.metrics.consensus_messages_received.labels(kind="nullify")._value.get() == received + 1
        assert own_votes_sent(net) == []  # and the vote has not left
        assert journal.threads and journal.threads[0] is not threading.current_thread()  # off the loop's thread
        journal.gate.set()
        await _flushed(svc)
        assert [type(v) for v in own_votes_sent(net)] == [Notarize]
        assert net.undurable == [] and journal.writes == [[o.vote for o in outs if isinstance(o, Journal)]]
        svc.close()

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ order


def test_sends_follow_the_engines_order_across_calls_each_vote_after_its_write(tmp_path: Path) -> None:
    """Three calls while the first write is held: their sends queue behind it, in the engine's order; the two votes
    queued meanwhile are written together (one group commit) before anything after the first is sent."""
    async def run() -> None:
        svc, net, journal = _held_service(tmp_path)
        svc.start_engine()
        engine = svc.engine
        assert engine is not None
        p1 = proposal(svc, 1)
        outs = act(svc, engine.receive(LEADER, notarize(LEADER, p1), 1_000))
        outs += act(svc, engine.verified(p1, True, 1_001))  # journal notarize(view 1): held
        await _entered(journal.entered)
        outs += act(svc, engine.receive(2, notarization(p1), 1_002))  # certificate: finalize(1), enter view 2
        assert engine.view == 2
        p2 = Proposal(Round(0, 2), 1, p1.payload, bytes([2]) * 32)
        outs += act(svc, engine.receive(2, notarize(2, p2), 1_003))
        outs += act(svc, engine.verified(p2, True, 1_004))  # notarize(view 2)
        journaled = [o.vote for o in outs if isinstance(o, Journal)]
        assert [type(v) for v in journaled] == [Notarize, Finalize, Notarize]
        assert _sent(net) == []  # everything waits for the first write
        journal.gate.set()
        await _flushed(svc)
        assert _sent(net) == _sends(outs)  # exactly the engine's order
        assert net.undurable == []  # no own vote left before its write returned
        assert journal.writes == [journaled[:1], journaled[1:]]  # the two queued meanwhile: one fsync
        svc.close()

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ a failed write


def test_a_failed_write_off_the_loop_sends_nothing_queued_and_stops_the_validator(tmp_path: Path) -> None:
    async def run() -> None:
        svc, net, journal = _held_service(tmp_path)
        svc.start_engine()
        engine = svc.engine
        assert engine is not None
        p = proposal(svc, 1)
        act(svc, engine.receive(LEADER, notarize(LEADER, p), 1_000))
        act(svc, engine.verified(p, True, 1_001))
        await _entered(journal.entered)
        act(svc, engine.receive(2, notarization(p), 1_002))  # more sends queue behind the failing write
        journal.fail = JournalWriteError(journal.path, "write failed: No space left on device", errno.ENOSPC)
        journal.gate.set()
        await _flushed(svc)
        assert svc.fatal is journal.fail and svc.stopping
        assert consensus_sent(net) == 0  # neither the vote nor anything queued after it
        act(svc, engine.tick(10**9))  # later outputs send nothing either
        assert consensus_sent(net) == 0 and svc.outbox.pending == 0
        svc.close()

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ the proposal


def test_the_proposals_block_is_durable_off_the_loop_before_its_vote_is_journaled(tmp_path: Path) -> None:
    async def run() -> None:
        svc, net, journal = _held_service(tmp_path, me=LEADER)
        journal.gate.set()  # only the store write is held here
        svc.start_engine()
        want = svc.application.wanted
        assert isinstance(want, ProposalWanted) and want.round.view == 1
        cand = await svc.application.build(want)
        assert cand is not None
        block = cand.prepared.block
        records = svc.records
        real_put = records.put_proposal
        put_entered, put_gate = threading.Event(), threading.Event()
        events: list[str] = []
        put_threads: list[threading.Thread] = []

        def held_put(digest: bytes, raw: bytes) -> None:
            put_threads.append(threading.current_thread())
            put_entered.set()
            put_gate.wait(BOUND_S)
            real_put(digest, raw)
            events.append("block kept")

        def kept() -> bool:
            return block.hash() in {Block.decode(raw).hash() for raw in records.proposals()}

        real_append = journal.append_many

        def recording_append(votes: list[Vote]) -> None:
            events.append(f"journal {[type(v).__name__ for v in votes]} block kept={kept()}")
            real_append(votes)

        records.put_proposal = held_put  # type: ignore[method-assign]
        journal.append_many = recording_append  # type: ignore[method-assign]
        task = asyncio.create_task(svc.application.propose_block(want, block))
        await _entered(put_entered)
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        await asyncio.wait_for(ran.wait(), BOUND_S)  # the loop serves while the block is written
        assert put_threads[0] is not threading.current_thread()
        assert events == [] and own_votes_sent(net, me=LEADER) == []  # no vote signed, journaled nor sent yet
        put_gate.set()
        await asyncio.wait_for(task, BOUND_S)
        await _flushed(svc)
        assert events == ["block kept", "journal ['Notarize'] block kept=True"]
        assert [v.proposal.payload for v in own_votes_sent(net, me=LEADER) if isinstance(v, Notarize)] == \
            [block.hash()]
        svc.close()

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ shutdown


def test_stopping_drops_what_is_queued_and_the_journal_closes_after_the_write_in_flight(tmp_path: Path) -> None:
    async def run() -> None:
        svc, net, journal = _held_service(tmp_path)
        svc.start_engine()
        engine = svc.engine
        assert engine is not None
        p = proposal(svc, 1)
        act(svc, engine.receive(LEADER, notarize(LEADER, p), 1_000))
        outs = act(svc, engine.verified(p, True, 1_001))
        await _entered(journal.entered)
        svc.outbox.stop()  # what ConsensusService.run does first when it stops
        closed_during_write: list[bool] = []
        real_close = journal.close

        def recording_close() -> None:
            closed_during_write.append(not journal.gate.is_set() or not journal.writes)
            real_close()

        journal.close = recording_close  # type: ignore[method-assign]
        # the write is released only once close() waits for the writer thread: a journal closed before that
        # would be closed under the held write
        writer = svc.outbox._writer
        waiting = threading.Event()
        real_shutdown = writer.shutdown

        def shutdown(wait: bool = True, *, cancel_futures: bool = False) -> None:
            waiting.set()
            real_shutdown(wait=wait, cancel_futures=cancel_futures)

        writer.shutdown = shutdown  # type: ignore[method-assign]
        closing = asyncio.ensure_future(asyncio.to_thread(svc.close))
        await _entered(waiting)
        journal.gate.set()
        await asyncio.wait_for(closing, BOUND_S)
        assert closed_during_write == [False]  # closed once, after the write in flight returned
        assert svc.fatal is None
        assert journal.writes == [[o.vote for o in outs if isinstance(o, Journal)]]  # journaled…
        assert consensus_sent(net) == 0  # …and not sent: safe (a restart knows it signed it)
        assert VoteJournal(journal.path).load() == journal.writes[0]

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ produce_once


def test_produce_once_with_a_journal_commits_after_the_votes_are_written_off_the_loop(tmp_path: Path) -> None:
    """A single validator driven by hand: ``produce_once`` returns with the block committed, its notarize and
    finalize journaled (one group commit, on the writer thread) before."""
    node = make_node()
    path = tmp_path / "consensus-votes.journal"
    create_empty_journal(path)
    journal = _HeldJournal(path)
    journal.gate.set()
    node.consensus.voter.journal = journal  # before the first block: the outbox reads the voter's

    async def run() -> None:
        await node.produce_block()
        assert node.chain.height == 1
        assert [[type(v) for v in w] for w in journal.writes] == [[Notarize, Finalize]]
        assert journal.threads[0] is not threading.current_thread()
        await node.produce_block()
        assert node.chain.height == 2

    asyncio.run(run())
    node.consensus.close()


# ------------------------------------------------------------------------------------------------ compaction


class _ThreadRecordingCompaction(VoteJournal):
    """Records the thread each compaction ran on; ``fail`` makes it fail as a full disk would."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.threads: list[threading.Thread] = []
        self.fail = False

    def compact(self, above_view: int) -> None:
        self.threads.append(threading.current_thread())
        if self.fail:
            raise JournalWriteError(self.path.with_suffix(".tmp"), "write failed: No space left on device",
                                    errno.ENOSPC)
        super().compact(above_view)


def test_compaction_runs_on_the_writer_thread_and_its_failure_stops_the_validator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction rewrites the file the appends write to: it runs on their thread, in turn with them (never on the
    loop while an append is in flight), and a failure stops the validator as a failed append does."""
    monkeypatch.setattr(voter_mod, "COMPACT_AFTER", 0)

    async def run() -> None:
        path = tmp_path / "consensus-votes.journal"
        create_empty_journal(path)
        journal = _ThreadRecordingCompaction(path)
        svc, _ = _service(0, journal=journal)
        svc.start_engine()
        journal.append(nullify(0, Round(0, 1)))  # one record, so that compaction has something to look at
        svc.voter.compact_journal()
        await svc.outbox.run(lambda: None)  # the writer thread has done what was submitted before
        assert journal.threads and journal.threads[0] is not threading.current_thread()
        assert svc.fatal is None
        journal.fail = True
        svc.voter.compact_journal()
        await svc.outbox.run(lambda: None)
        assert svc.fatal is not None and svc.fatal.errno == errno.ENOSPC and svc.stopping
        svc.close()

    asyncio.run(run())
