"""The consensus service and its vote journal (issue 30 §1): a journal write failure stops the node before the
vote leaves it, and nothing the engine outputs afterwards is sent; compaction keeps every vote of a view the node
can re-enter after a restart (above the committed head, not the engine's finalized view); a journal holding
conflicting own votes refuses to start, naming the file."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest
import structlog

from cowboy_node.consensus import journal as journal_mod
from cowboy_node.consensus.journal import JournalError, JournalWriteError, VoteJournal
from cowboy_node.consensus.service import voter as voter_mod
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Config, Engine, Journal, JournalRejected
from cowboy_node.consensus.simplex.types import Finalize, Notarize, Nullify, Round, Vote, encode_message
from cowboy_node.node import consensus_service as service_mod
from tests.unit.node.journal_harness import (
    act,
    consensus_sent,
    finalization,
    notarization,
    notarize,
    nullify,
    own_votes_sent,
    proposal,
    service,
)
from tests.unit.node.test_consensus_preverify import _Net, _scheme

LEADER = 1  # of view 1 (round robin)


def _fail_writes(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def fail(fd: int, data: bytes | memoryview) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(journal_mod.os, "write", fail)


# ------------------------------------------------------------------------------------------------ journal failure


def test_a_journal_write_failure_stops_the_node_before_the_vote_is_sent(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    svc, net = service(tmp_path, journal=True)
    svc.start_engine()
    engine = svc.engine
    assert engine is not None and engine.view == 1 and engine.leader_of(1) == LEADER
    t = 1_000
    p = proposal(svc, 1)
    act(svc, engine.receive(LEADER, notarize(LEADER, p), t))
    _fail_writes(monkeypatch, errno.ENOSPC)
    with structlog.testing.capture_logs() as logs:
        outs = act(svc, engine.verified(p, True, t + 1))
    assert any(isinstance(o, Journal) for o in outs)  # the engine did sign (and thinks it sent) its notarize
    assert own_votes_sent(net) == []  # but it never left
    assert svc.fatal is not None and svc.fatal.errno == errno.ENOSPC
    assert svc.stopping  # the node was asked to stop
    critical = [e for e in logs if e["log_level"] == "critical"]
    assert critical and critical[0]["path"] == str(tmp_path / "consensus-votes.journal")
    assert critical[0]["errno"] == errno.ENOSPC and critical[0]["errno_name"] == "ENOSPC"
    assert svc.status_json()["voting"]["enabled"] is False
    assert svc.status_json()["voting"]["reason"] == "journal_error"
    assert svc.metrics.consensus_voting._value.get() == 0

    # later engine outputs (its rebroadcast of the vote it thinks it sent, certificates, timeouts) send nothing
    monkeypatch.undo()
    before = len(net.sent)
    act(svc, engine.receive(2, notarization(p), t + 2))  # would broadcast the certificate and a finalize
    act(svc, engine.tick(t + 10**8))  # would rebroadcast
    assert len(net.sent) == before and consensus_sent(net) == 0


def test_the_healthy_control_sends_the_vote(tmp_path: Path) -> None:
    """Control for the test above: without the failure the same steps send the notarize."""
    svc, net = service(tmp_path, journal=True)
    svc.start_engine()
    engine = svc.engine
    assert engine is not None
    p = proposal(svc, 1)
    act(svc, engine.receive(LEADER, notarize(LEADER, p), 1_000))
    act(svc, engine.verified(p, True, 1_001))
    assert [type(v) for v in own_votes_sent(net)] == [Notarize]
    assert svc.fatal is None and not svc.stopping
    assert svc.status_json()["voting"] == {"enabled": True, "reason": None, "until_view": None}


class _FailingCompaction(VoteJournal):
    def compact(self, above_view: int) -> None:
        raise JournalWriteError(self.path.with_suffix(".tmp"), "write failed: No space left on device", errno.ENOSPC)


def test_a_compaction_failure_stops_the_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(voter_mod, "COMPACT_AFTER", 0)
    svc, net = _finalized_beyond_the_head(tmp_path)
    assert isinstance(svc, service_mod.ConsensusService) and svc.journal is not None and svc.engine is not None
    failing = _FailingCompaction(svc.journal.path)
    failing.load()
    svc.voter.journal = failing  # the disk fails from here on
    svc.voter.compact_journal()
    assert svc.fatal is not None and svc.fatal.errno == errno.ENOSPC and svc.stopping
    before = len(net.sent)
    act(svc, svc.engine.tick(10**9))
    assert len(net.sent) == before


# ------------------------------------------------------------------------------------------------ compaction


def _finalized_beyond_the_head(tmp_path: Path) -> tuple[object, _Net]:
    """Validator 0 notarizes and finalizes view 1, and the engine finalizes it; the block is not committed (the
    committed head is still genesis, view 0)."""
    svc, net = service(tmp_path, journal=True)
    svc.start_engine()
    engine = svc.engine
    assert engine is not None
    p = proposal(svc, 1)
    act(svc, engine.receive(LEADER, notarize(LEADER, p), 1_000))
    act(svc, engine.verified(p, True, 1_001))
    act(svc, engine.receive(2, notarization(p), 1_002))
    act(svc, engine.receive(3, finalization(p), 1_003))
    assert engine.finalized_view == 1 and svc.chain.head.header.round.view == 0
    assert svc.journal is not None
    assert [type(v) for v in svc.journal.votes()] == [Notarize, Finalize]
    return svc, net


def test_compaction_keeps_the_votes_of_views_finalized_but_not_committed(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(voter_mod, "COMPACT_AFTER", 0)  # compact after every commit
    svc, _ = _finalized_beyond_the_head(tmp_path)
    assert isinstance(svc, service_mod.ConsensusService) and svc.journal is not None
    journaled = svc.journal.votes()
    svc.voter.compact_journal()  # what _commit_one does after a commit
    svc.journal.close()  # crash before the finalized block is committed

    restored = VoteJournal(tmp_path / "consensus-votes.journal").load()
    assert restored == journaled
    head = svc.chain.head
    r = Engine(Config(me=0, delta_ms=60_000, election=Election.ROUND_ROBIN, genesis=head.hash(),
                      floor_view=head.header.round.view), _scheme(0), restored)  # a restart from the committed head
    outs = r.start(0)
    other = proposal(svc, 1, b"other")
    outs += r.receive(LEADER, notarize(LEADER, other), 1)  # the leader equivocates to the restarted validator
    outs += r.verified(other, True, 2)  # and the host (wrongly) says it verified
    outs += r.tick(10**9)  # then view 1 times out
    signed = [o.vote for o in outs if isinstance(o, Journal)]
    assert not [v for v in signed if isinstance(v, Notarize)]  # no second notarize in a journaled view
    assert not [v for v in signed if isinstance(v, Nullify)]  # and no nullify of a view it finalized


def test_compaction_drops_the_votes_at_or_below_the_committed_head(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    votes = [nullify(0, Round(0, v)) for v in range(1, 6)]
    for v in votes:
        j.append(v)
    j.compact(above_view=3)
    j.close()
    assert VoteJournal(path).load() == votes[3:]


# ------------------------------------------------------------------------------------------------ conflicts


def _conflicting(svc: object, kind: str) -> list[Vote]:
    assert isinstance(svc, service_mod.ConsensusService)
    p1, p2 = proposal(svc, 1), proposal(svc, 1, b"b")
    s = _scheme(0)
    if kind == "notarize":
        return [notarize(0, p1), notarize(0, p2)]
    if kind == "finalize":
        return [Finalize(p1, 0, s.sign(b"f1"), s.sign(b"s")), Finalize(p2, 0, s.sign(b"f2"), s.sign(b"s"))]
    if kind == "nullify":
        good = nullify(0, Round(0, 1))
        return [good, Nullify(good.round, 0, s.sign(b"other"), good.seed)]
    return [nullify(0, Round(0, 1)), Finalize(p1, 0, s.sign(b"f1"), s.sign(b"s"))]


@pytest.mark.parametrize("kind", ["notarize", "finalize", "nullify", "nullify+finalize"])
def test_restore_refuses_conflicting_own_votes_for_one_view(tmp_path: Path, kind: str) -> None:
    svc, _ = service(tmp_path, journal=False)
    votes = _conflicting(svc, kind)
    with pytest.raises(JournalRejected) as info:
        Engine(Config(me=0, genesis=svc.chain.head.hash()), _scheme(0), votes)
    assert info.value.view == 1
    Engine(Config(me=0, genesis=svc.chain.head.hash()), _scheme(0), votes[:1] * 2)  # a repeat is no conflict


@pytest.mark.parametrize("kind", ["notarize", "finalize", "nullify", "nullify+finalize"])
def test_start_refuses_a_journal_with_conflicting_votes_naming_the_file(tmp_path: Path, kind: str) -> None:
    svc, _ = service(tmp_path, journal=False)
    path = tmp_path / "consensus-votes.journal"
    path.write_bytes(b"".join(struct.pack(">I", len(encode_message(v))) + encode_message(v)
                              for v in _conflicting(svc, kind)))
    with pytest.raises(JournalError) as info:
        svc.start_engine()
    assert str(path) in str(info.value) and "view 1" in str(info.value)
    assert svc.engine is None
