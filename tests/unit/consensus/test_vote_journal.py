"""VoteJournal (``u32_be length ‖ encoded vote`` records, fsynced) and Simplex restart safety through it: a
validator restarted from its journal never signs a vote that conflicts with one it journaled before the crash."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest

from cowboy_node.consensus.journal import JournalError, VoteJournal
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Broadcast, Config, Engine, Journal, Output
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.simplex.types import (
    Finalize,
    Notarization,
    Notarize,
    Nullify,
    Proposal,
    Vote,
    encode_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.crypto import threshold
from cowboy_node.types.block import Round

GENESIS = hashlib.sha256(b"journal-genesis").digest()
D = 100
N = 4
DEALING = threshold.deal(0xC0FFEE, N, 3, b"\x11" * 32)


def _scheme(i: int | None) -> ThresholdScheme:
    return ThresholdScheme.from_dealing(DEALING, i)


def _p(view: int, tag: bytes = b"") -> Proposal:
    return Proposal(Round(0, view), 0, GENESIS, hashlib.sha256(b"%d" % view + tag).digest())


def _notarize(signer: int, p: Proposal) -> Notarize:
    s = _scheme(signer)
    return Notarize(p, signer, s.sign(notarize_message(p)), s.sign(seed_message(p.round)))


def _nullify(signer: int, r: Round) -> Nullify:
    s = _scheme(signer)
    return Nullify(r, signer, s.sign(nullify_message(r)), s.sign(seed_message(r)))


def _notarization(p: Proposal, signers: tuple[int, ...] = (1, 2, 3)) -> Notarization:
    v = _scheme(None)
    sig, _ = v.recover(notarize_message(p), [(i, _scheme(i).sign(notarize_message(p))) for i in signers])
    seed, _ = v.recover(seed_message(p.round), [(i, _scheme(i).sign(seed_message(p.round))) for i in signers])
    assert sig is not None and seed is not None
    return Notarization(p, sig, seed)


def _engine(journal: Sequence[Vote] = ()) -> Engine:
    # validator 0; view 1's leader is validator 1 under either elector (view 1 is round-robin)
    return Engine(Config(me=0, delta_ms=D, genesis=GENESIS, election=Election.RANDOM), _scheme(0), journal)


def _persist(outs: list[Output], journal: VoteJournal) -> list[Output]:
    """What the host does: append every Journal output before acting on what follows."""
    for o in outs:
        if isinstance(o, Journal):
            journal.append(o.vote)
    return outs


def _own_votes(outs: list[Output]) -> list[Vote]:
    return [o.vote for o in outs if isinstance(o, Journal)] + \
        [o.message for o in outs if isinstance(o, Broadcast) and isinstance(o.message, Notarize | Nullify | Finalize)
         and o.message.signer == 0]


# ------------------------------------------------------------------------------------------------ file format


def _votes() -> list[Vote]:
    return [_notarize(0, _p(1)), _nullify(0, Round(0, 2)),
            Finalize(_p(1), 0, b"\x01" * 48, b"\x02" * 48)]


def test_round_trip_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    assert j.load() == [] and j.records == 0
    votes = _votes()
    for v in votes:
        j.append(v)
    j.close()
    # the file is exactly the documented records: u32_be length ‖ encoded vote
    expected = b"".join(struct.pack(">I", len(encode_message(v))) + encode_message(v) for v in votes)
    assert path.read_bytes() == expected
    again = VoteJournal(path)
    assert again.load() == votes and again.records == 3 and again.dropped_bytes == 0
    again.close()


def test_torn_tail_is_truncated_and_appending_continues(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    first, second, third = _votes()
    rec1 = struct.pack(">I", len(encode_message(first))) + encode_message(first)
    rec2 = struct.pack(">I", len(encode_message(second))) + encode_message(second)
    torn = rec2[:len(rec2) // 2]
    path.write_bytes(rec1 + torn)
    j = VoteJournal(path)
    assert j.load() == [first]
    assert j.dropped_bytes == len(torn)
    assert path.stat().st_size == len(rec1)  # the file shrank to the last whole record
    j.append(third)
    j.close()
    again = VoteJournal(path)
    assert again.load() == [first, third] and again.dropped_bytes == 0
    again.close()


def test_torn_length_prefix_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    first = _votes()[0]
    rec1 = struct.pack(">I", len(encode_message(first))) + encode_message(first)
    path.write_bytes(rec1 + b"\x00\x00")
    j = VoteJournal(path)
    assert j.load() == [first] and j.dropped_bytes == 2 and path.stat().st_size == len(rec1)
    j.close()


def test_corrupt_record_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    votes = _votes()
    recs = [struct.pack(">I", len(encode_message(v))) + encode_message(v) for v in votes]
    bad = bytearray(recs[1])
    bad[4] ^= 0xFF  # the map head of the second record
    data = recs[0] + bytes(bad) + recs[2]
    path.write_bytes(data)
    with pytest.raises(JournalError):
        VoteJournal(path).load()
    assert path.read_bytes() == data  # nothing truncated


def test_zero_length_record_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    path.write_bytes(b"\x00\x00\x00\x00" + b"\x00" * 10)
    with pytest.raises(JournalError):
        VoteJournal(path).load()


def test_compact_keeps_exactly_the_votes_above_the_view_and_appending_continues(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    votes = _votes()  # views 1, 2, 1
    for v in votes:
        j.append(v)
    j.compact(above_view=1)
    assert j.records == 1
    assert not path.with_suffix(".tmp").exists()  # written aside, then renamed over the journal
    j.append(votes[2])
    j.close()
    again = VoteJournal(path)
    assert again.load() == [votes[1], votes[2]]
    again.close()


def test_compact_to_nothing_leaves_an_empty_journal(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    j.append(_votes()[0])
    j.compact(above_view=1)
    j.close()
    assert path.read_bytes() == b""
    assert VoteJournal(path).load() == []


# ------------------------------------------------------------------------------------------------ restart safety


def test_restart_from_journal_never_notarizes_a_different_proposal(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    journal = VoteJournal(path)
    journal.load()
    e = _engine()
    e.start(0)
    p1, p2 = _p(1, b"a"), _p(1, b"b")
    _persist(e.receive(1, _notarize(1, p1), 1), journal)
    outs = _persist(e.verified(p1, True, 2), journal)
    assert [v for v in _own_votes(outs) if isinstance(v, Notarize)] == [_notarize(0, p1)] * 2  # journal + send
    journal.close()  # crash

    restored = VoteJournal(path).load()
    assert restored == [_notarize(0, p1)]
    r = _engine(restored)
    outs = r.start(10)
    # the leader equivocates to the restarted validator; then the host (wrongly) says p2 verified
    outs += r.receive(1, _notarize(1, p2), 11)
    outs += r.verified(p2, True, 12)
    outs += r.tick(10 + 3 * D)  # and the view times out
    notarizes = [v for v in _own_votes(outs) if isinstance(v, Notarize)]
    assert all(v.proposal == p1 for v in notarizes)

    # control: the same validator without its journal signs p2
    fresh = _engine()
    fresh.start(10)
    fresh.receive(1, _notarize(1, p2), 11)
    signed = [v for v in _own_votes(fresh.verified(p2, True, 12)) if isinstance(v, Notarize)]
    assert signed and signed[0].proposal == p2


def test_restart_after_a_journaled_nullify_never_finalizes_that_view(tmp_path: Path) -> None:
    path = tmp_path / "votes.journal"
    journal = VoteJournal(path)
    journal.load()
    e = _engine()
    e.start(0)
    outs = _persist(e.tick(2 * D), journal)  # leader timeout
    assert [type(v) for v in _own_votes(outs)] == [Nullify, Nullify]
    journal.close()  # crash

    restored = VoteJournal(path).load()
    assert restored == [_nullify(0, Round(0, 1))]
    p = _p(1)
    r = _engine(restored)
    outs = r.start(1000)
    outs += r.receive(1, _notarize(1, p), 1001)
    outs += r.verified(p, True, 1002)
    outs += r.receive(2, _notarization(p), 1003)
    assert r.view == 2  # the notarization moved it on
    own = _own_votes(outs)
    assert not [v for v in own if isinstance(v, Finalize)]
    assert not [v for v in own if isinstance(v, Notarize)]  # no notarize after its own nullify either

    # control: without the journal the same certificate makes it finalize view 1
    fresh = _engine()
    fresh.start(1000)
    own = _own_votes(fresh.receive(2, _notarization(p), 1003))
    assert [v.round for v in own if isinstance(v, Finalize)] == [Round(0, 1)] * 2
