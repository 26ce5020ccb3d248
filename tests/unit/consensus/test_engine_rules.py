"""One test per Simplex engine rule that no other engine, journal or simulation test guarded (issue 30 §4).

Each test drives a real :class:`Engine` (n = 4, round-robin leaders: view ``v`` is led by ``v mod 4``; the engine
under test is validator 0) with :class:`FastScheme` keys, whose ``verify_certificate`` rejects any certificate
not made from a quorum of partials, so forged certificates are expressible without pairings. Each test fails when
its rule is removed: ``scripts/consensus_mutations.py`` (``make mutation-consensus``) removes each rule in turn and
checks that the tests named for it fail.
"""

from __future__ import annotations

import hashlib

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
    VerifyBlock,
)
from cowboy_node.consensus.simplex.types import (
    Fetch,
    Finalization,
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
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, FastScheme

D = 100  # Δ
N = 4
ALL = range(N)


def _engine(journal: tuple[Vote, ...] = (), **kw: object) -> Engine:
    kw.setdefault("genesis", GENESIS)
    cfg = Config(me=0, delta_ms=D, election=Election.ROUND_ROBIN, **kw)  # type: ignore[arg-type]
    return Engine(cfg, FastScheme(N, 0), journal)


def _p(view: int, parent_view: int = 0, parent: bytes = GENESIS, tag: bytes = b"") -> Proposal:
    return Proposal(Round(0, view), parent_view, parent, hashlib.sha256(b"block %d" % view + tag).digest())


def _vote(cls: type, signer: int, subject: Proposal | Round) -> Vote:
    s = FastScheme(N, signer)
    if cls is Nullify:
        assert isinstance(subject, Round)
        return Nullify(subject, signer, s.sign(nullify_message(subject)), s.sign(seed_message(subject)))
    assert isinstance(subject, Proposal)
    msg = notarize_message(subject) if cls is Notarize else finalize_message(subject)
    return cls(subject, signer, s.sign(msg), s.sign(seed_message(subject.round)))  # type: ignore[no-any-return]


def _threshold(message: bytes) -> bytes:
    """The group signature over ``message``, recovered from all four partials."""
    sig, _ = FastScheme(N, None).recover(message, [(i, FastScheme(N, i).sign(message)) for i in ALL])
    assert sig is not None
    return sig


def _notarization(p: Proposal) -> Notarization:
    return Notarization(p, _threshold(notarize_message(p)), _threshold(seed_message(p.round)))


def _finalization(p: Proposal) -> Finalization:
    return Finalization(p, _threshold(finalize_message(p)), _threshold(seed_message(p.round)))


def _nullification(view: int) -> Nullification:
    r = Round(0, view)
    return Nullification(r, _threshold(nullify_message(r)), _threshold(seed_message(r)))


def _of(outs: list[Output], kind: type) -> list[Output]:
    return [o for o in outs if isinstance(o, kind)]


def _sent(outs: list[Output], kind: type) -> list[object]:
    return [o.message for o in outs if isinstance(o, Broadcast) and isinstance(o.message, kind)]


def _verifies(outs: list[Output]) -> list[Proposal]:
    return [o.proposal for o in outs if isinstance(o, VerifyBlock)]


def _reasons(outs: list[Output]) -> list[str]:
    return [o.reason for o in outs if isinstance(o, Faulty)]


def _nullified(outs: list[Output]) -> list[Round]:
    """Rounds of the nullify votes broadcast."""
    return [o.message.round for o in outs if isinstance(o, Broadcast) and isinstance(o.message, Nullify)]


# ------------------------------------------------------------------------------------------------ justification


def test_proposal_skipping_a_view_without_its_nullification_is_not_notarized() -> None:
    # View 2 is nullified (that enters view 3), view 1 holds nothing: a proposal of view 3 on genesis skips view 1
    # without its nullification, so it is not verified (the missing nullification is fetched) until it arrives.
    e = _engine()
    e.start(0)
    e.receive(2, _nullification(2), 1)
    assert e.view == 3
    p3 = _p(3)
    outs = e.receive(3, _vote(Notarize, 3, p3), 2)
    assert _verifies(outs) == [] and not _sent(outs, Notarize)
    assert any(isinstance(m, Fetch) and 1 in m.views for m in _sent(outs, Fetch))
    assert _verifies(e.receive(1, _nullification(1), 3)) == [p3]  # justified once view 1's nullification arrives


def test_proposal_whose_parent_digest_differs_from_the_certified_block_is_nullified() -> None:
    e = _engine()
    e.start(0)
    p1 = _p(1)
    e.receive(1, _notarization(p1), 1)
    assert e.view == 2
    wrong = _p(2, parent_view=1, parent=hashlib.sha256(b"not p1").digest())
    outs = e.receive(2, _vote(Notarize, 2, wrong), 2)
    assert _verifies(outs) == [] and not _sent(outs, Notarize)
    assert _nullified(outs) == [Round(0, 2)]


def test_proposal_on_a_parent_below_the_finalized_view_is_nullified() -> None:
    # Views 1 (notarized p1) and 2 (nullified, then finalized: the certificates contradict, so more than f are
    # faulty) are all held, so only the floor rule stands between the engine and a proposal of view 3 built on
    # p1, below the finalized tip p2.
    e = _engine()
    e.start(0)
    p1 = _p(1)
    p2 = _p(2, parent_view=1, parent=p1.payload)
    e.receive(1, _notarization(p1), 1)
    e.receive(2, _nullification(2), 2)
    outs = e.receive(2, _finalization(p2), 3)
    assert [o.proposal for o in outs if isinstance(o, Finalized)] == [p1, p2]
    assert (e.view, e.finalized_view) == (3, 2)
    below = _p(3, parent_view=1, parent=p1.payload)
    outs = e.receive(3, _vote(Notarize, 3, below), 4)
    assert _verifies(outs) == [] and not _sent(outs, Notarize)
    assert _nullified(outs) == [Round(0, 3)]


def test_proposal_on_the_floor_view_with_another_digest_is_nullified() -> None:
    e = _engine()
    e.start(0)
    wrong = _p(1, parent=hashlib.sha256(b"not genesis").digest())
    outs = e.receive(1, _vote(Notarize, 1, wrong), 1)
    assert _verifies(outs) == [] and not _sent(outs, Notarize)
    assert _nullified(outs) == [Round(0, 1)]
    floored = _engine(floor_view=4, genesis=_p(4).payload)
    floored.start(0)
    assert floored.view == 5
    wrong5 = _p(5, parent_view=4, parent=GENESIS)
    assert _verifies(floored.receive(1, _vote(Notarize, 1, wrong5), 1)) == []


def test_proposal_is_adopted_only_from_the_views_leader() -> None:
    # A notarize of view 2 from validator 3 (view 2 is led by validator 2) arrives while the engine is still in
    # view 1; entering view 2 must not take it for the proposal. The leader's own proposal then is.
    e = _engine()
    e.start(0)
    p1 = _p(1)
    p2_other = _p(2, parent_view=1, parent=p1.payload, tag=b"from 3")
    e.receive(3, _vote(Notarize, 3, p2_other), 1)
    outs = e.receive(1, _notarization(p1), 2)
    assert e.view == 2 and e.leader_of(2) == 2
    assert _verifies(outs) == []
    p2 = _p(2, parent_view=1, parent=p1.payload)
    assert _verifies(e.receive(2, _vote(Notarize, 2, p2), 3)) == [p2]


# ------------------------------------------------------------------------------------------------ certificates


def test_certificate_with_a_forged_signature_is_rejected() -> None:
    # Random bytes for the signature, the round's true seed: only the signature check can reject it.
    e = _engine()
    e.start(0)
    p1 = _p(1)
    forged = Notarization(p1, hashlib.sha384(b"junk").digest(), _threshold(seed_message(p1.round)))
    outs = e.receive(2, forged, 1)
    assert not _of(outs, Notarized) and e.view == 1
    assert _reasons(outs) == ["bad certificate signature"]
    assert _of(e.receive(3, _notarization(p1), 2), Notarized) and e.view == 2  # the real one is taken


def test_certificate_with_a_forged_seed_is_rejected() -> None:
    # A valid signature with a junk seed, for a round whose seed is not yet known: the seed is what elects the next
    # leader, so it must verify on its own.
    e = _engine()
    e.start(0)
    p1 = _p(1)
    forged = Notarization(p1, _threshold(notarize_message(p1)), hashlib.sha384(b"junk seed").digest())
    outs = e.receive(2, forged, 1)
    assert not _of(outs, Notarized) and e.view == 1
    assert _reasons(outs) == ["bad certificate seed signature"]


def test_certificate_whose_seed_differs_from_the_rounds_known_seed_is_rejected() -> None:
    # The round's seed is known (from its nullification); a notarization of it with a valid signature but another
    # seed is rejected without being recorded or relayed.
    e = _engine()
    e.start(0)
    e.receive(1, _nullification(1), 1)
    p1 = _p(1)
    other = Notarization(p1, _threshold(notarize_message(p1)), hashlib.sha384(b"other seed").digest())
    outs = e.receive(2, other, 2)
    assert not _of(outs, Notarized) and not _sent(outs, Notarization)
    assert _reasons(outs) == ["certificate seed differs from the round's seed"]


# ------------------------------------------------------------------------------------------------ own votes, journal


def test_no_nullify_after_finalize_even_when_the_view_times_out() -> None:
    # Restarted after finalizing view 1 but before seeing its notarization (a finalize follows a notarization the
    # validator saw; only a restart can leave it in that view): its timers fire, and it must not nullify.
    p1 = _p(1)
    e = _engine(journal=(_vote(Notarize, 0, p1), _vote(Finalize, 0, p1)))
    e.start(0)
    assert e.view == 1
    outs = e.tick(10 * D)
    outs += e.receive(1, _vote(Nullify, 1, Round(0, 1)), 10 * D + 1)  # nor when its leader gives up the view
    outs += e.tick(20 * D)
    assert not _sent(outs, Nullify) and not _of(outs, Journal)


def test_a_journaled_finalize_is_restored() -> None:
    p1 = _p(1)
    votes = (_vote(Notarize, 0, p1), _vote(Finalize, 0, p1))
    e = _engine(journal=votes)
    assert e.own_votes() == list(votes)  # kept by the next compaction
    e.start(0)
    outs = e.receive(1, _notarization(p1), 1)
    assert _of(outs, Notarized) and not _of(outs, Journal)  # the finalize is not signed (or journaled) again


def test_a_journaled_notarize_is_restored() -> None:
    # The leader of view 1 equivocates after this validator's crash: the restarted validator must hold its
    # journaled notarize of p1 and never verify (so never notarize) p1'.
    p1, p1b = _p(1), _p(1, tag=b"'")
    e = _engine(journal=(_vote(Notarize, 0, p1),))
    assert e.own_votes() == [_vote(Notarize, 0, p1)]
    e.start(0)
    outs = e.receive(1, _vote(Notarize, 1, p1b), 1)
    assert _verifies(outs) == [] and not _sent(outs, Notarize)


def test_never_a_second_notarize_in_a_view_even_if_the_host_verifies_another_proposal() -> None:
    # As above, but the host answers a verification nobody asked for: the last guard is in the vote itself.
    p1, p1b = _p(1), _p(1, tag=b"'")
    e = _engine(journal=(_vote(Notarize, 0, p1),))
    e.start(0)
    e.receive(1, _vote(Notarize, 1, p1b), 1)
    outs = e.verified(p1b, True, 2)
    assert not _sent(outs, Notarize) and not _of(outs, Journal)
