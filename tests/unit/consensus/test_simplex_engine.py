"""The Simplex engine driven by hand: n = 1 with real BLS, timers, voting rules, jumps, journal restarts."""

from __future__ import annotations

import hashlib

from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import (
    Broadcast,
    Config,
    Engine,
    Faulty,
    Finalized,
    Journal,
    Notarized,
    Output,
    ProposalWanted,
    SeedRevealed,
    Send,
    VerifyBlock,
)
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.simplex.types import (
    Fetch,
    Finalize,
    Notarization,
    Notarize,
    Nullification,
    Nullify,
    Proposal,
    Vote,
    finalize_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.crypto import bls, threshold
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, FastScheme

D = 100  # Δ
N = 4


def _cfg(me: int, **kw: object) -> Config:
    return Config(me=me, delta_ms=D, genesis=GENESIS, **kw)  # type: ignore[arg-type]


def _vote(cls: type, signer: int, subject: Proposal | Round, n: int = N) -> Vote:
    s = FastScheme(n, signer)
    if cls is Nullify:
        assert isinstance(subject, Round)
        return Nullify(subject, signer, s.sign(nullify_message(subject)), s.sign(seed_message(subject)))
    assert isinstance(subject, Proposal)
    msg = notarize_message(subject) if cls is Notarize else finalize_message(subject)
    return cls(subject, signer, s.sign(msg), s.sign(seed_message(subject.round)))  # type: ignore[no-any-return]


def _cert(cls: type, subject: Proposal | Round, n: int = N) -> Notarization | Nullification:
    s = FastScheme(n, None)
    rnd = subject if isinstance(subject, Round) else subject.round
    seed, _ = s.recover(seed_message(rnd), [(i, FastScheme(n, i).sign(seed_message(rnd))) for i in range(n)])
    assert seed is not None
    if cls is Nullification:
        assert isinstance(subject, Round)
        sig, _ = s.recover(nullify_message(subject), [(i, FastScheme(n, i).sign(nullify_message(subject)))
                                                      for i in range(n)])
        assert sig is not None
        return Nullification(subject, sig, seed)
    assert isinstance(subject, Proposal)
    sig, _ = s.recover(notarize_message(subject), [(i, FastScheme(n, i).sign(notarize_message(subject)))
                                                   for i in range(n)])
    assert sig is not None
    return Notarization(subject, sig, seed)


def _of(outs: list[Output], kind: type) -> list[Output]:
    return [o for o in outs if isinstance(o, kind)]


def _sent(outs: list[Output], kind: type) -> list[object]:
    return [o.message for o in outs if isinstance(o, Broadcast) and isinstance(o.message, kind)]


def _journal_first(outs: list[Output]) -> None:
    """Every own vote is journaled before it is broadcast."""
    journaled: set[Vote] = set()
    for o in outs:
        if isinstance(o, Journal):
            journaled.add(o.vote)
        elif isinstance(o, Broadcast) and isinstance(o.message, Notarize | Nullify | Finalize):
            assert o.message in journaled, "vote broadcast before it was journaled"


def _engine(me: int = 0, n: int = N, **kw: object) -> Engine:
    return Engine(_cfg(me, **kw), FastScheme(n, me))


def _p(view: int, parent_view: int = 0, parent: bytes = GENESIS, tag: bytes = b"") -> Proposal:
    return Proposal(Round(0, view), parent_view, parent, hashlib.sha256(b"%d" % view + tag).digest())


# ------------------------------------------------------------------------------------------------ n = 1


def test_single_validator_finalizes_every_view_with_threshold_bls() -> None:
    secret = 0x5EED
    dealing = threshold.deal(secret, 1, 1, b"\x09" * 32)
    e = Engine(_cfg(0, election=Election.RANDOM), ThresholdScheme.from_dealing(dealing, 0))
    outs = e.start(0)
    parent_view, parent = 0, GENESIS
    for view in range(1, 6):
        (want,) = _of(outs, ProposalWanted)
        assert isinstance(want, ProposalWanted)
        assert (want.round, want.parent_view, want.parent) == (Round(0, view), parent_view, parent)
        payload = hashlib.sha256(b"block %d" % view).digest()
        outs = e.propose(want.round, payload, view * 1000)
        _journal_first(outs)
        kinds = [type(o).__name__ for o in outs]
        assert kinds.index("Journal") < kinds.index("Notarized") < kinds.index("Finalized")
        (fin,) = _of(outs, Finalized)
        assert isinstance(fin, Finalized)
        assert fin.proposal.payload == payload and fin.proposal.parent == parent
        # the seed is the group signature over the round: the block beacon of the single-validator node
        assert fin.seed == sign_beacon(secret, Round(0, view))
        assert bls.verify(dealing.group_public_key, seed_message(Round(0, view)), fin.seed)
        assert bls.verify(dealing.group_public_key, finalize_message(fin.proposal), fin.certificate.signature)
        assert [o.seed for o in _of(outs, SeedRevealed)] == [fin.seed]  # type: ignore[attr-defined]
        assert e.view == view + 1 and e.finalized_view == view
        parent_view, parent = view, payload


# ------------------------------------------------------------------------------------------------ timers


def test_leader_timeout_nullifies_at_two_delta_and_rebroadcasts() -> None:
    e = _engine(0)
    assert e.start(0) == []  # view 1's leader is validator 1 (round-robin for the first view)
    assert e.leader_of(1) == 1
    assert e.next_deadline() == 2 * D
    assert e.tick(2 * D - 1) == []
    outs = e.tick(2 * D)
    _journal_first(outs)
    (null,) = _sent(outs, Nullify)
    assert isinstance(null, Nullify) and null.round == Round(0, 1)
    assert e.next_deadline() == 3 * D  # retry period Δ
    again = e.tick(3 * D)
    assert _sent(again, Nullify) == [null] and not _of(again, Journal)  # same vote, journaled once


def test_advance_timeout_after_notarizing_and_no_finalize_after_nullify() -> None:
    e = _engine(0)
    e.start(0)
    p = _p(1)
    outs = e.receive(1, _vote(Notarize, 1, p), 10)
    assert [o.proposal for o in _of(outs, VerifyBlock)] == [p]  # type: ignore[attr-defined]
    outs = e.verified(p, True, 20)
    _journal_first(outs)
    assert [m.proposal for m in _sent(outs, Notarize)] == [p]  # type: ignore[attr-defined]
    assert e.next_deadline() == 3 * D  # the leader timeout is cancelled, the advance timeout stays
    outs = e.tick(3 * D)
    assert len(_sent(outs, Nullify)) == 1
    outs = e.receive(2, _cert(Notarization, p), 3 * D + 5)
    assert _of(outs, Notarized) and not _sent(outs, Finalize)  # nullified this view: never finalize it
    assert e.view == 2


def test_never_notarizes_two_proposals_in_a_view() -> None:
    e = _engine(0)
    e.start(0)
    p1, p2 = _p(1, tag=b"a"), _p(1, tag=b"b")
    assert _of(e.receive(1, _vote(Notarize, 1, p1), 1), VerifyBlock)
    outs = e.receive(1, _vote(Notarize, 1, p2), 2)
    assert not _of(outs, VerifyBlock) and [o.reason for o in _of(outs, Faulty)] == [  # type: ignore[attr-defined]
        "conflicting notarize votes"]
    (fault,) = _of(outs, Faulty)
    assert isinstance(fault, Faulty) and fault.votes == (_vote(Notarize, 1, p1), _vote(Notarize, 1, p2))
    assert len(_sent(e.verified(p1, True, 3), Notarize)) == 1
    assert e.verified(p2, True, 4) == []


def test_a_conflicting_vote_with_a_bad_signature_is_not_evidence_of_conflict() -> None:
    # Evidence must convince a third party: the second "vote" is not signed with validator 1's share, so it is
    # reported as a bad signature and carries no votes.
    e = _engine(0)
    e.start(0)
    p1, p2 = _p(1, tag=b"a"), _p(1, tag=b"b")
    e.receive(1, _vote(Notarize, 1, p1), 1)
    honest = _vote(Notarize, 1, p2)
    assert isinstance(honest, Notarize)
    forged = Notarize(p2, 1, FastScheme(N, 2).sign(notarize_message(p2)), honest.seed)
    (fault,) = _of(e.receive(1, forged, 2), Faulty)
    assert isinstance(fault, Faulty) and (fault.reason, fault.votes) == ("bad notarize signature", ())


def test_failed_verification_nullifies_at_once() -> None:
    e = _engine(0)
    e.start(0)
    p = _p(1)
    e.receive(1, _vote(Notarize, 1, p), 1)
    assert len(_sent(e.verified(p, False, 2), Nullify)) == 1


def test_quorum_of_votes_makes_certificates_and_finalization() -> None:
    e = _engine(0)
    e.start(0)
    p = _p(1)
    e.receive(1, _vote(Notarize, 1, p), 1)
    e.verified(p, True, 2)
    outs = e.receive(2, _vote(Notarize, 2, p), 3)
    (nz,) = _of(outs, Notarized)
    assert isinstance(nz, Notarized) and nz.certificate.proposal == p
    assert _sent(outs, Notarization) and len(_sent(outs, Finalize)) == 1 and e.view == 2
    outs = e.receive(1, _vote(Finalize, 1, p), 4) + e.receive(3, _vote(Finalize, 3, p), 5)
    (fin,) = _of(outs, Finalized)
    assert isinstance(fin, Finalized) and fin.proposal == p and e.finalized_view == 1


def test_bad_partials_are_reported_and_left_out() -> None:
    e = _engine(0)
    e.start(0)
    p = _p(1)
    e.receive(1, _vote(Notarize, 1, p), 1)
    e.verified(p, True, 2)
    forged = _vote(Notarize, 3, p)
    assert isinstance(forged, Notarize)
    bad = Notarize(p, 3, FastScheme(N, 2).sign(notarize_message(p)), forged.seed)  # signed with 2's key
    outs = e.receive(3, bad, 3)
    assert [(o.signer, o.reason) for o in _of(outs, Faulty)] == [(3, "bad notarize signature")]  # type: ignore
    assert not _of(outs, Notarized)
    assert _of(e.receive(2, _vote(Notarize, 2, p), 4), Notarized)


def test_vote_for_another_signer_is_impersonation() -> None:
    e = _engine(0)
    e.start(0)
    outs = e.receive(3, _vote(Nullify, 2, Round(0, 1)), 1)
    assert [o.signer for o in _of(outs, Faulty)] == [3]  # type: ignore[attr-defined]


def test_jumps_to_the_view_after_a_higher_certificate() -> None:
    e = _engine(0)
    e.start(0)
    outs = e.receive(2, _cert(Nullification, Round(0, 5)), 1)
    assert e.view == 6 and _of(outs, SeedRevealed)
    assert e.next_deadline() == 1 + 2 * D


def test_random_leader_is_the_same_whichever_certificate_entered_the_view() -> None:
    leaders = set()
    for cert in (_cert(Notarization, _p(1)), _cert(Nullification, Round(0, 1))):
        e = _engine(0, election=Election.RANDOM)
        e.start(0)
        e.receive(2, cert, 1)
        assert e.view == 2
        leaders.add(e.leader_of(2))
    assert len(leaders) == 1 and None not in leaders


def test_fetch_is_answered_with_held_certificates() -> None:
    e = _engine(0)
    e.start(0)
    n5 = _cert(Nullification, Round(0, 5))
    e.receive(2, n5, 1)
    assert e.receive(3, Fetch(0, (4, 5)), 2) == [Send(3, n5)]


def test_proposal_on_a_missing_parent_fetches_it_then_verifies() -> None:
    e2 = _engine(0, election=Election.ROUND_ROBIN)
    e2.start(0)
    e2.receive(2, _cert(Nullification, Round(0, 2)), 1)  # now in view 3: its leader is 3 under round-robin
    assert e2.view == 3 and e2.leader_of(3) == 3
    p = _p(3, parent_view=1, parent=_p(1).payload)
    outs = e2.receive(3, _vote(Notarize, 3, p), 2)
    assert not _of(outs, VerifyBlock) and _sent(outs, Fetch) == [Fetch(0, (1,))]
    outs = e2.receive(1, _cert(Notarization, _p(1)), 3)
    assert [o.proposal for o in _of(outs, VerifyBlock)] == [p]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------ restarts


def test_restart_with_journal_never_signs_a_conflicting_vote() -> None:
    e = _engine(0)
    e.start(0)
    p1, p2 = _p(1, tag=b"a"), _p(1, tag=b"b")
    e.receive(1, _vote(Notarize, 1, p1), 1)
    journal = [o.vote for o in e.verified(p1, True, 2) if isinstance(o, Journal)]
    assert [type(v) for v in journal] == [Notarize]
    # crash; the leader equivocates to the restarted validator
    r = Engine(_cfg(0), FastScheme(N, 0), journal)
    r.start(1000)
    assert r.view == 1
    outs = r.receive(1, _vote(Notarize, 1, p2), 1001)
    assert not _sent(outs, Notarize)
    for o in _of(outs, VerifyBlock):
        assert not _sent(r.verified(o.proposal, True, 1002), Notarize)  # type: ignore[attr-defined]
    # control: without its journal the same validator would sign the conflicting notarize
    amnesiac = Engine(_cfg(0), FastScheme(N, 0))
    amnesiac.start(1000)
    amnesiac.receive(1, _vote(Notarize, 1, p2), 1001)
    assert [m.proposal for m in _sent(amnesiac.verified(p2, True, 1002), Notarize)] == [p2]  # type: ignore
    # a journaled nullify forbids finalize after restart
    null = _vote(Nullify, 0, Round(0, 1))
    r2 = Engine(_cfg(0), FastScheme(N, 0), [*journal, null])
    r2.start(2000)
    outs = r2.receive(2, _cert(Notarization, p1), 2001)
    assert _of(outs, Notarized) and not _sent(outs, Finalize)
    # and the journaled nullify is rebroadcast, not signed again
    r3 = Engine(_cfg(0), FastScheme(N, 0), [null])
    outs = r3.start(3000) + r3.tick(3000)
    assert _sent(outs, Nullify) == [null] and not _of(outs, Journal)
