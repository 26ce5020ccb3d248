"""What a byzantine peer's flood costs the engine: bounded state and one check per proven fault (issue 30 §2).

Certificates are verified before any per-view state is kept, and a sender whose certificate does not verify is
ignored for ``retry``; a validator shown to send two different votes of one kind in one view is recorded once and
its further conflicting votes of that kind in that view are dropped without a signature check.
"""

from __future__ import annotations

import hashlib

from cowboy_node.consensus.simplex.engine import Config, Engine, Faulty, Notarized, Output
from cowboy_node.consensus.simplex.types import (
    Finalization,
    Finalize,
    Notarization,
    Notarize,
    Nullification,
    Proposal,
    finalize_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, CountingScheme, FastScheme

D = 100
N = 4


def _engine() -> tuple[Engine, CountingScheme]:
    scheme = CountingScheme(N, 0)
    e = Engine(Config(me=0, delta_ms=D, genesis=GENESIS), scheme)
    e.start(0)
    return e, scheme


def _junk(view: int, i: int) -> Notarization:
    p = Proposal(Round(0, view), 0, GENESIS, hashlib.sha256(b"junk%d" % i).digest())
    return Notarization(p, hashlib.sha384(b"sig%d" % i).digest(), hashlib.sha384(b"seed%d" % i).digest())


def _valid_notarization(p: Proposal) -> Notarization:
    group = FastScheme(N, None)
    sig, _ = group.recover(notarize_message(p), [(i, FastScheme(N, i).sign(notarize_message(p))) for i in range(N)])
    seed, _ = group.recover(seed_message(p.round), [(i, FastScheme(N, i).sign(seed_message(p.round)))
                                                    for i in range(N)])
    assert sig is not None and seed is not None
    return Notarization(p, sig, seed)


def _faults(outs: list[Output]) -> list[Faulty]:
    return [o for o in outs if isinstance(o, Faulty)]


def test_junk_certificates_for_far_views_create_no_view_state() -> None:
    e, _ = _engine()
    views_before = len(e._views)
    for i in range(5_000):  # every one a different far-future view, from peers 1..3, time moving on
        e.receive(1 + i % 3, _junk(1_000 + 97 * i, i), now=10 * D * i)
    assert len(e._views) == views_before
    assert e.view == 1


def test_a_sender_of_a_bad_certificate_is_reported_and_its_certificates_ignored_for_retry() -> None:
    e, scheme = _engine()
    outs = e.receive(1, _junk(50, 0), now=0)
    faults = _faults(outs)
    assert [(f.signer, f.reason) for f in faults] == [(1, "bad certificate signature")]
    checks = scheme.checks
    for i in range(1, 1_000):  # the same peer floods at the same instant: no further check, no further report
        assert _faults(e.receive(1, _junk(50 + i, i), now=D - 1)) == []
    assert scheme.checks == checks
    # Another peer's valid certificate is still admitted meanwhile.
    p = Proposal(Round(0, 1), 0, GENESIS, hashlib.sha256(b"block-1").digest())
    assert any(isinstance(o, Notarized) for o in e.receive(2, _valid_notarization(p), now=D - 1))
    # After the retry period the flooder's certificates are checked again (and reported again).
    assert len(_faults(e.receive(1, _junk(60, 7), now=D))) == 1


def test_a_certificate_with_a_seed_other_than_the_rounds_is_refused_without_a_pairing_check() -> None:
    e, scheme = _engine()
    p = Proposal(Round(0, 1), 0, GENESIS, hashlib.sha256(b"block-1").digest())
    good = _valid_notarization(p)
    e.receive(2, good, now=0)  # the round's seed is now known
    checks = scheme.checks
    fake = Finalization(p, hashlib.sha384(b"x").digest(), hashlib.sha384(b"other seed").digest())
    faults = _faults(e.receive(1, fake, now=0))
    assert scheme.checks == checks
    assert [f.reason for f in faults] == ["certificate seed differs from the round's seed"]


def test_a_valid_nullification_far_above_the_view_is_still_admitted() -> None:
    """Bounding state must not cost liveness: a verified certificate (a quorum made it) moves a lagging validator
    on, however far ahead it is."""
    e, _ = _engine()
    r = Round(0, 500)
    group = FastScheme(N, None)
    sig, _ = group.recover(nullify_message(r), [(i, FastScheme(N, i).sign(nullify_message(r))) for i in range(N)])
    seed, _ = group.recover(seed_message(r), [(i, FastScheme(N, i).sign(seed_message(r))) for i in range(N)])
    assert sig is not None and seed is not None
    e.receive(1, Nullification(r, sig, seed), now=0)
    assert e.view == 501


def test_an_equivocator_is_recorded_once_per_view_and_kind_and_its_repeats_cost_no_check() -> None:
    e, scheme = _engine()
    signer = FastScheme(N, 3)
    r = Round(0, 1)

    def notarize(i: int) -> Notarize:
        p = Proposal(r, 0, GENESIS, hashlib.sha256(b"fork%d" % i).digest())
        return Notarize(p, 3, signer.sign(notarize_message(p)), signer.sign(seed_message(r)))

    e.receive(3, notarize(0), now=0)
    faults = _faults(e.receive(3, notarize(1), now=0))
    assert len(faults) == 1 and faults[0].reason == "conflicting notarize votes" and len(faults[0].votes) == 2
    checks = scheme.checks
    for i in range(2, 500):
        assert _faults(e.receive(3, notarize(i), now=0)) == []
    assert scheme.checks == checks
    # A conflicting finalize is a different fault: recorded once too.
    def finalize(i: int) -> Finalize:
        p = Proposal(r, 0, GENESIS, hashlib.sha256(b"fork%d" % i).digest())
        return Finalize(p, 3, signer.sign(finalize_message(p)), signer.sign(seed_message(r)))

    e.receive(3, finalize(0), now=0)
    assert len(_faults(e.receive(3, finalize(1), now=0))) == 1
    assert all(_faults(e.receive(3, finalize(i), now=0)) == [] for i in range(2, 50))
