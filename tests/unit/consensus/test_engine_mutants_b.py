"""Simplex engine rules written against mutation survivors (issue 31), part B: ``engine.py`` from ``_notarize`` on.

cosmic-ray's consensus-engine session left mutants alive in the engine's own votes (abstention), their rebroadcast,
the admission of votes and certificates, certificate assembly (the optimistic path and the checked path that
names bad partials), seed consistency, the finalized chain, and fetches with their retries. Each test asserts one
rule as the engine's docstrings state it, driving a real :class:`Engine` through its public API (validator 0 of 4
unless said, round-robin leaders: view ``v`` is led by ``v mod 4``; :class:`FastScheme` keys; explicit ``now``
integers), and fails with the mutants of its rule applied.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cowboy_node.consensus.simplex.elector import Election, elect
from cowboy_node.consensus.simplex.engine import (
    Config,
    ConsensusFault,
    Engine,
    Faulty,
    Finalized,
    Journal,
    Notarized,
    Nullified,
    Output,
    Send,
)
from cowboy_node.consensus.simplex.types import (
    Fetch,
    Finalize,
    Notarization,
    Notarize,
    Nullification,
    Nullify,
    Proposal,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, CountingScheme, FastScheme
from tests.unit.consensus.test_engine_rules import (
    D,
    N,
    _engine,
    _finalization,
    _notarization,
    _nullification,
    _nullified,
    _of,
    _p,
    _reasons,
    _sent,
    _threshold,
    _verifies,
    _vote,
)

JUNK = bytes(48)
"""A 48-byte partial that is nobody's signature of anything."""


def _engine_as(me: int, scheme: FastScheme | None = None, **kw: object) -> Engine:
    """Validator ``me`` of 4, round-robin leaders, as :func:`_engine` (which is always validator 0)."""
    cfg = Config(me=me, delta_ms=D, election=Election.ROUND_ROBIN, genesis=GENESIS, **kw)  # type: ignore[arg-type]
    return Engine(cfg, scheme if scheme is not None else FastScheme(N, me))


def _fetched(outs: list[Output]) -> list[tuple[int, ...]]:
    return [m.views for m in _sent(outs, Fetch)]  # type: ignore[attr-defined]


def _own_votes_sent(outs: list[Output]) -> list[object]:
    return _sent(outs, Notarize) + _sent(outs, Nullify) + _sent(outs, Finalize)


def _nullify_badly(signer: int, r: Round, *, seed_only: bool = False) -> Nullify:
    """``signer``'s nullify of ``r`` with a junk vote partial (or, ``seed_only``, a junk seed partial)."""
    good = _vote(Nullify, signer, r)
    return Nullify(r, signer, good.signature, JUNK) if seed_only else Nullify(r, signer, JUNK, good.seed)


def _finalized_through_2(e: Engine) -> tuple[Proposal, Proposal]:
    """Finalize p1 ← p2 by certificates: the engine ends in view 3 with view 2 final."""
    e.start(0)
    p1 = _p(1)
    p2 = _p(2, parent_view=1, parent=p1.payload)
    e.receive(1, _notarization(p1), 1)
    e.receive(2, _finalization(p2), 2)
    assert (e.view, e.finalized_view, e.finalized_digest) == (3, 2, p2.payload)
    return p1, p2


# ------------------------------------------------------------------------------------------------ own votes


def test_abstaining_validator_signs_no_vote_at_or_below_its_limit_and_votes_above_it() -> None:
    # vote_above_view = 2: view 1 (below the limit) and view 2 (at it) get no notarize, nullify or finalize of ours,
    # though the host verifies the proposals, the views time out and get notarized; view 3 (above) is voted in.
    e = _engine(vote_above_view=2)
    outs = e.start(0)
    p1 = _p(1)
    outs += e.receive(1, _vote(Notarize, 1, p1), 1)
    outs += e.verified(p1, True, 2)
    outs += e.tick(10 * D)  # both timeouts of view 1
    outs += e.receive(2, _notarization(p1), 10 * D + 1)
    assert e.view == 2
    p2 = _p(2, parent_view=1, parent=p1.payload)
    outs += e.receive(2, _vote(Notarize, 2, p2), 10 * D + 2)
    outs += e.verified(p2, True, 10 * D + 3)
    outs += e.tick(20 * D)
    outs += e.receive(1, _notarization(p2), 20 * D + 1)
    assert e.view == 3
    assert not _of(outs, Journal) and not _own_votes_sent(outs)
    e.allow_votes_above(2)
    p3 = _p(3, parent_view=2, parent=p2.payload)
    e.receive(3, _vote(Notarize, 3, p3), 20 * D + 2)
    assert _sent(e.verified(p3, True, 20 * D + 3), Notarize) == [_vote(Notarize, 0, p3)]


# ------------------------------------------------------------------------------------------------ rebroadcast


def _rebroadcast_of_view_2(e: Engine, entered: int) -> set[object]:
    """Let view 2 (entered at ``entered``) time out, then return what the first retry rebroadcasts."""
    assert e.view == 2
    assert _nullified(e.tick(entered + 2 * D)) == [Round(0, 2)]  # leader timeout: own nullify
    outs = e.tick(entered + 3 * D)  # one retry period (Δ) later
    msgs = [o.message for o in outs if hasattr(o, "message") and not isinstance(o.message, Fetch)]
    assert len(msgs) == len(set(msgs))
    return set(msgs)


def test_retry_rebroadcasts_the_notarization_that_entered_the_view_and_the_own_finalize_of_it() -> None:
    e = _engine()
    e.start(0)
    p1 = _p(1)
    e.receive(1, _notarization(p1), 1)
    assert _rebroadcast_of_view_2(e, 1) == {_notarization(p1), _vote(Finalize, 0, p1), _vote(Nullify, 0, Round(0, 2))}


def test_retry_rebroadcasts_the_nullification_that_entered_the_view() -> None:
    e = _engine()
    e.start(0)
    e.receive(1, _nullification(1), 1)
    assert _rebroadcast_of_view_2(e, 1) == {_nullification(1), _vote(Nullify, 0, Round(0, 2))}


def test_retry_rebroadcasts_the_finalization_not_the_finalize_once_the_previous_view_is_final() -> None:
    e = _engine()
    e.start(0)
    p1 = _p(1)
    e.receive(1, _notarization(p1), 1)  # our finalize of p1 goes out
    e.receive(2, _finalization(p1), 1)
    assert e.finalized_view == 1
    assert _rebroadcast_of_view_2(e, 1) == {_finalization(p1), _vote(Nullify, 0, Round(0, 2))}


# ------------------------------------------------------------------------------------------------ incoming votes


@pytest.mark.parametrize(("me", "bad"), [(0, 3), (3, 0)])
def test_a_signer_with_a_bad_partial_is_reported_once_and_its_votes_of_the_view_are_dropped(me: int, bad: int) -> None:
    # View 1 (led by 1): notarizes of p1 from `bad` (junk partial), 1 and 2 make three; the assembly names `bad`.
    # Its vote is dropped, so a later vote in the view (a nullify of 2) does not assemble (and report) it again.
    e = _engine_as(me)
    e.start(0)
    p1 = _p(1)
    good = _vote(Notarize, bad, p1)
    outs = e.receive(bad, Notarize(p1, bad, JUNK, good.seed), 1)
    outs += e.receive(1, _vote(Notarize, 1, p1), 2)
    outs += e.receive(2, _vote(Notarize, 2, p1), 3)
    outs += e.receive(2, _vote(Nullify, 2, Round(0, 1)), 4)
    assert [(o.signer, o.reason) for o in _of(outs, Faulty)] == [(bad, "bad notarize signature")]  # type: ignore[attr-defined]
    assert not _of(outs, Notarized)


@pytest.mark.parametrize(("sender", "signer"), [(1, 2), (2, 1)])
def test_a_vote_relayed_for_another_signer_is_refused(sender: int, signer: int) -> None:
    e = _engine()
    e.start(0)
    outs = e.receive(sender, _vote(Nullify, signer, Round(0, 1)), 1)
    assert _reasons(outs) == ["vote signed for another validator"]


@pytest.mark.parametrize("epoch", [0, 2])
def test_votes_of_another_epoch_are_ignored(epoch: int) -> None:
    e = _engine(epoch=1)
    e.start(0)
    r = Round(epoch, 1)
    for signer in (1, 2, 3):
        assert e.receive(signer, _vote(Nullify, signer, r), signer) == []
    assert e.view == 1


def test_votes_are_admitted_up_to_the_window_above_the_current_view_and_not_beyond() -> None:
    e = _engine(window=4)
    e.start(0)
    for signer in (1, 2, 3):
        assert e.receive(signer, _vote(Nullify, signer, Round(0, 6)), signer) == []  # 6 > 1 + 4: dropped
    assert e.view == 1
    outs: list[Output] = []
    for signer in (1, 2, 3):
        outs += e.receive(signer, _vote(Nullify, signer, Round(0, 5)), 10 + signer)  # 5 = 1 + 4: admitted
    assert [o.certificate.round for o in _of(outs, Nullified)] == [Round(0, 5)]  # type: ignore[attr-defined]
    assert e.view == 6


def test_votes_for_a_view_below_the_finalized_one_are_not_processed() -> None:
    e = _engine()
    _finalized_through_2(e)
    for signer in (1, 2, 3):  # a quorum of nullifies of view 1, already final here
        assert e.receive(signer, _vote(Nullify, signer, Round(0, 1)), 10 + signer) == []


def test_an_older_vote_does_not_lower_the_last_activity_of_its_signer() -> None:
    # skip_timeout 3. Validator 2 votes in view 8, then a vote of it for view 1 arrives. Views 1..9 are nullified one
    # by one; entering view 10 (led by 2): its last vote (view 8) is 2 views old, so it gets the leader timeout 2Δ.
    e = _engine(skip_timeout=3)
    e.start(0)
    e.receive(2, _vote(Nullify, 2, Round(0, 8)), 1)
    e.receive(2, _vote(Nullify, 2, Round(0, 1)), 2)
    for w in range(1, 10):
        e.receive(1, _nullification(w), 10 + w)
    assert e.view == 10 and e.leader_of(10) == 2
    assert e.next_deadline() == 19 + 2 * D


# ------------------------------------------------------------------------------------------------ leader's nullify


def test_the_leaders_nullify_of_the_current_view_makes_us_nullify_at_once() -> None:
    e = _engine()
    e.start(0)
    outs = e.receive(1, _vote(Nullify, 1, Round(0, 1)), 1)
    assert _nullified(outs) == [Round(0, 1)]


def test_a_nullify_from_anyone_but_the_leader_does_not_end_our_wait() -> None:
    e = _engine()
    e.start(0)
    e.receive(1, _nullification(1), 1)
    assert e.view == 2 and e.leader_of(2) == 2
    outs = e.receive(1, _vote(Nullify, 1, Round(0, 2)), 2)
    outs += e.receive(3, _vote(Nullify, 3, Round(0, 2)), 3)
    assert _nullified(outs) == []
    assert _nullified(e.receive(2, _vote(Nullify, 2, Round(0, 2)), 4))[:1] == [Round(0, 2)]


def test_a_leaders_nullify_of_another_view_than_the_current_one_is_not_followed() -> None:
    e = _engine()
    e.start(0)
    assert _nullified(e.receive(1, _vote(Nullify, 1, Round(0, 5)), 1)) == []  # a later view it leads
    e.receive(2, _nullification(2), 2)  # jump to view 3: view 1 is left without a certificate
    assert e.view == 3
    assert _nullified(e.receive(1, _vote(Nullify, 1, Round(0, 1)), 3)) == []  # an earlier view it led


def test_a_leaders_badly_signed_nullify_is_not_followed() -> None:
    e = _engine()
    e.start(0)
    assert _nullified(e.receive(1, _nullify_badly(1, Round(0, 1)), 1)) == []


# ------------------------------------------------------------------------------------------------ late activity


def _late_vote_checked(k: int, seen: int, vote_view: int, view: int) -> bool:
    """skip_timeout ``k``; validator 2 last voted in view ``seen`` (0: never); views 1 .. ``view`` − 1 are final
    and the engine is in ``view``. A late nullify of 2 for ``vote_view`` with a junk signature arrives: True iff
    the engine checked it (a bad late vote is reported as Faulty)."""
    e = _engine(skip_timeout=k)
    e.start(0)
    if seen:
        e.receive(2, _vote(Nullify, 2, Round(0, seen)), 1)
    parent = GENESIS
    for w in range(1, view):
        p = _p(w, parent_view=w - 1, parent=parent)
        e.receive(1, _notarization(p), 1 + w)
        parent = p.payload
    e.receive(1, _finalization(p), 100)
    assert (e.view, e.finalized_view) == (view, view - 1)
    outs = e.receive(2, _nullify_badly(2, Round(0, vote_view)), 101)
    return _reasons(outs) == ["bad late nullify signature"]


@pytest.mark.parametrize(("seen", "vote_view", "view", "checked"), [
    (0, 1, 3, True),   # activity 3 views old = k // 2: checked
    (1, 2, 3, False),  # activity 2 views old < k // 2: not worth a check
    (3, 2, 6, False),  # the vote does not raise the signer's activity (2 <= 3)
    (0, 1, 7, True),   # 1 + k > 7: the vote keeps it active for the next view
    (0, 1, 8, False),  # 1 + k = 8: it would not
])
def test_a_late_vote_is_checked_only_when_it_can_keep_its_signer_active(seen: int, vote_view: int, view: int,
                                                                        checked: bool) -> None:
    # k = 7 (odd: half of it is 3): the rule of _late_activity — checked iff the vote raises the signer's activity,
    # keeps it active for the next view (vote_view + k > view) and that activity is at least k // 2 views old.
    assert _late_vote_checked(7, seen, vote_view, view) is checked


# ------------------------------------------------------------------------------------------------ assembly


def test_a_quorum_for_one_proposal_certifies_it_beside_a_vote_for_another() -> None:
    # View 1: 3 votes for a different proposal p1' than the leader's p1, so 1 and 2 alone are no quorum for p1 (three
    # votes in all); our own notarize and finalize make the fourth vote of each kind and the third for p1.
    e = _engine()
    e.start(0)
    p1, other = _p(1), _p(1, tag=b"'")
    e.receive(1, _vote(Notarize, 1, p1), 1)
    e.receive(2, _vote(Notarize, 2, p1), 2)
    e.receive(3, _vote(Notarize, 3, other), 3)
    for signer in (1, 2):
        e.receive(signer, _vote(Finalize, signer, p1), 4)
    outs = e.receive(3, _vote(Finalize, 3, other), 5)
    assert not _of(outs, Notarized) and not _of(outs, Finalized)
    outs = e.verified(p1, True, 6)
    assert [o.certificate for o in _of(outs, Notarized)] == [_notarization(p1)]  # type: ignore[attr-defined]
    assert [(o.proposal, o.certificate) for o in _of(outs, Finalized)] == [(p1, _finalization(p1))]  # type: ignore[attr-defined]


def test_votes_arriving_after_their_views_certificate_cost_no_signature_check() -> None:
    # Notarization: 1, 2 and we notarize p1; then 3's notarize of view 1 arrives.
    scheme = CountingScheme(N, 0)
    e = _engine_as(0, scheme)
    e.start(0)
    p1 = _p(1)
    e.receive(1, _vote(Notarize, 1, p1), 1)
    e.receive(2, _vote(Notarize, 2, p1), 2)
    assert _of(e.verified(p1, True, 3), Notarized)
    before = scheme.checks
    e.receive(3, _vote(Notarize, 3, p1), 4)
    assert scheme.checks == before
    # Nullification: 1, 3 and we (timeout) nullify view 2; then its leader's nullify arrives.
    e.receive(1, _vote(Nullify, 1, Round(0, 2)), 5)
    e.receive(3, _vote(Nullify, 3, Round(0, 2)), 6)
    assert _of(e.tick(10 * D), Nullified) and e.view == 3
    before = scheme.checks
    e.receive(2, _vote(Nullify, 2, Round(0, 2)), 10 * D + 1)
    assert scheme.checks == before
    # Finalization (of view 2 of another engine, its parent view 1 never certified, so not yet final): 1, 2 and we
    # finalize p2; then 3's finalize arrives.
    scheme = CountingScheme(N, 0)
    e = _engine_as(0, scheme)
    e.start(0)
    p2 = _p(2, parent_view=1, parent=_p(1).payload)
    e.receive(1, _notarization(p2), 1)
    e.receive(1, _vote(Finalize, 1, p2), 2)
    e.receive(2, _vote(Finalize, 2, p2), 3)
    assert e.certificates(2)[0] == _finalization(p2) and e.finalized_view == 0
    before = scheme.checks
    e.receive(3, _vote(Finalize, 3, p2), 4)
    assert scheme.checks == before


def test_nullify_votes_assemble_the_nullification_certificate() -> None:
    e = _engine()
    e.start(0)
    e.receive(2, _vote(Nullify, 2, Round(0, 1)), 1)
    e.receive(3, _vote(Nullify, 3, Round(0, 1)), 2)
    outs = e.tick(2 * D)  # our own nullify is the third
    assert [o.certificate for o in _of(outs, Nullified)] == [_nullification(1)]  # type: ignore[attr-defined]
    assert _sent(outs, Nullification) == [_nullification(1)] and e.view == 2


def test_a_quorum_beyond_a_bad_partial_still_certifies_and_names_the_bad_signer() -> None:
    # 2 (junk partial) and 3 nullify view 1, then its leader 1: we follow at once, so four nullifies meet at the
    # assembly; the optimistic recovery over the first quorum (0, 1, 2) fails, the checked one over all four
    # certifies from 0, 1, 3 and names 2.
    e = _engine()
    e.start(0)
    e.receive(2, _nullify_badly(2, Round(0, 1)), 1)
    e.receive(3, _vote(Nullify, 3, Round(0, 1)), 2)
    outs = e.receive(1, _vote(Nullify, 1, Round(0, 1)), 3)
    assert [o.certificate for o in _of(outs, Nullified)] == [_nullification(1)]  # type: ignore[attr-defined]
    assert [(o.signer, o.reason) for o in _of(outs, Faulty)] == [(2, "bad nullify signature")]  # type: ignore[attr-defined]
    assert e.view == 2


def test_the_optimistic_assembly_checks_no_partial_beyond_the_first_quorum() -> None:
    # As above with 3's partial the junk one: the first quorum (0, 1, 2) is good, the certificates verify under the
    # group key, and no partial is checked (3's bad one goes unnoticed: it did not matter).
    e = _engine()
    e.start(0)
    e.receive(3, _nullify_badly(3, Round(0, 1)), 1)
    e.receive(2, _vote(Nullify, 2, Round(0, 1)), 2)
    outs = e.receive(1, _vote(Nullify, 1, Round(0, 1)), 3)
    assert [o.certificate for o in _of(outs, Nullified)] == [_nullification(1)]  # type: ignore[attr-defined]
    assert not _of(outs, Faulty)


@pytest.mark.parametrize("seed_known", [False, True])
def test_a_bad_seed_partial_is_named_and_makes_no_certificate(seed_known: bool) -> None:
    # Three nullifies of view 1 (left: notarized, its seed known, or jumped over, its seed unknown), 3's seed partial
    # junk: no nullification (the seed cannot be recovered), 3 reported; a missing seed is no seed contradiction.
    e = _engine()
    e.start(0)
    e.receive(1, _notarization(_p(1)) if seed_known else _nullification(2), 1)
    assert e.view in (2, 3)
    outs = e.receive(1, _vote(Nullify, 1, Round(0, 1)), 2)
    outs += e.receive(2, _vote(Nullify, 2, Round(0, 1)), 3)
    outs += e.receive(3, _nullify_badly(3, Round(0, 1), seed_only=True), 4)
    assert not _of(outs, Nullified) and e.certificates(1) == ([_notarization(_p(1))] if seed_known else [])
    assert [(o.signer, o.reason) for o in _of(outs, Faulty)] == [(3, "bad nullify signature")]  # type: ignore[attr-defined]


class _SeedScheme(FastScheme):
    """FastScheme that may skip the optimistic recovery (``optimistic`` False: :meth:`recover_pair` returns None,
    so the engine checks the partials itself) and may recover another seed than the true one for a round (what only
    a broken scheme, or a forged quorum, could produce)."""

    def __init__(self, n: int, me: int | None, *, optimistic: bool, seed: bytes | None = None) -> None:
        super().__init__(n, me)
        self.optimistic, self.seed = optimistic, seed

    def recover_pair(self, message: bytes, partials: Sequence[tuple[int, bytes]], seed_message: bytes,
                     seed_partials: Sequence[tuple[int, bytes]]) -> tuple[bytes, bytes] | None:
        pair = super().recover_pair(message, partials, seed_message, seed_partials) if self.optimistic else None
        return pair if pair is None or self.seed is None else (pair[0], self.seed)

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        sig, bad = super().recover(message, partials)
        if sig is not None and self.seed is not None and message == seed_message(Round(0, 1)):
            return self.seed, bad
        return sig, bad


def _notarize_known_seed_view(scheme: _SeedScheme) -> list[Output]:
    """View 1's seed is known (nullified); then 1, 2 and 3 notarize p1."""
    e = _engine_as(0, scheme)
    e.start(0)
    e.receive(1, _nullification(1), 1)
    outs: list[Output] = []
    for signer in (1, 2, 3):
        outs += e.receive(signer, _vote(Notarize, signer, _p(1)), 1 + signer)
    return outs


@pytest.mark.parametrize("optimistic", [True, False])
def test_a_certificate_assembled_with_the_rounds_known_seed_is_taken(optimistic: bool) -> None:
    outs = _notarize_known_seed_view(_SeedScheme(N, 0, optimistic=optimistic))
    assert [o.certificate for o in _of(outs, Notarized)] == [_notarization(_p(1))]  # type: ignore[attr-defined]


@pytest.mark.parametrize("optimistic", [True, False])
@pytest.mark.parametrize("seed", [bytes(48), b"\xff" * 48], ids=["low", "high"])
def test_a_recovered_seed_other_than_the_rounds_known_one_is_a_consensus_fault(optimistic: bool, seed: bytes) -> None:
    with pytest.raises(ConsensusFault, match="two different seeds"):
        _notarize_known_seed_view(_SeedScheme(N, 0, optimistic=optimistic, seed=seed))


def test_the_checked_assembly_alone_certifies_and_reveals_the_seed() -> None:
    # Without the optimistic recovery (round seed unknown): 1, 2 and 3 notarize p1, the checked path recovers both.
    e = _engine_as(0, _SeedScheme(N, 0, optimistic=False))
    e.start(0)
    outs: list[Output] = []
    for signer in (1, 2, 3):
        outs += e.receive(signer, _vote(Notarize, signer, _p(1)), signer)
    assert [o.certificate for o in _of(outs, Notarized)] == [_notarization(_p(1))]  # type: ignore[attr-defined]
    assert not _of(outs, Faulty)


# ------------------------------------------------------------------------------------------------ certificates


@pytest.mark.parametrize("epoch", [0, 2])
def test_certificates_of_another_epoch_are_ignored(epoch: int) -> None:
    e = _engine(epoch=1)
    e.start(0)
    p = Proposal(Round(epoch, 1), 0, GENESIS, _p(1).payload)
    assert e.receive(1, _notarization(p), 1) == []
    assert e.view == 1


@pytest.mark.parametrize("view", [1, 2])
def test_certificates_at_or_below_the_finalized_view_are_ignored(view: int) -> None:
    e = _engine()
    _finalized_through_2(e)
    assert e.receive(1, _nullification(view), 10) == []


@pytest.mark.parametrize("seed", [bytes(48), b"\xff" * 48], ids=["low", "high"])
def test_a_certificate_with_any_other_seed_than_the_rounds_known_one_is_rejected(seed: bytes) -> None:
    e = _engine()
    e.start(0)
    e.receive(1, _nullification(1), 1)
    p1 = _p(1)
    outs = e.receive(2, Notarization(p1, _threshold(notarize_message(p1)), seed), 2)
    assert not _of(outs, Notarized)
    assert _reasons(outs) == ["certificate seed differs from the round's seed"]


def test_the_next_views_leader_is_known_as_soon_as_the_seed_electing_it_is() -> None:
    # Random election: view 3's leader is drawn from view 2's seed. The engine holds a vote of view 3 and jumps from
    # view 1 to view 5, so views 2 and 3 are never entered; the nullification of view 2 then reveals its seed.
    e = Engine(Config(me=0, delta_ms=D, genesis=GENESIS, election=Election.RANDOM), FastScheme(N, 0))
    e.start(0)
    e.receive(1, _vote(Nullify, 1, Round(0, 3)), 1)
    e.receive(1, _nullification(4), 2)
    assert e.view == 5 and e.leader_of(3) is None
    e.receive(1, _nullification(2), 3)
    assert e.leader_of(3) == elect(Election.RANDOM, Round(0, 3), N, _nullification(2).seed) is not None


# ------------------------------------------------------------------------------------------------ finalized chain


def _chain3() -> tuple[Proposal, Proposal, Proposal]:
    p1 = _p(1)
    p2 = _p(2, parent_view=1, parent=p1.payload)
    return p1, p2, _p(3, parent_view=2, parent=p2.payload)


@pytest.mark.parametrize("order", [(3, 2), (2, 3)])
def test_the_highest_finalization_waiting_for_its_ancestry_is_the_one_finalized(order: tuple[int, int]) -> None:
    # Finalizations of views 2 and 3 arrive (either order) before view 1's notarization: once it arrives, the chain
    # is final up to view 3, each block once and in order.
    e = _engine()
    e.start(0)
    chain = _chain3()
    outs: list[Output] = []
    for view in order:
        outs += e.receive(1, _finalization(chain[view - 1]), view)
    assert e.finalized_view == 0
    outs += e.receive(1, _notarization(chain[0]), 10)
    assert [o.proposal for o in _of(outs, Finalized)] == list(chain)  # type: ignore[attr-defined]
    assert e.finalized_view == 3


@pytest.mark.parametrize("parent", [bytes(32), b"\xff" * 32], ids=["low", "high"])
def test_a_finalized_block_whose_parent_is_not_the_certified_block_is_a_consensus_fault(parent: bytes) -> None:
    e = _engine()
    e.start(0)
    p1, p2, _ = _chain3()
    e.receive(1, _notarization(p1), 1)
    e.receive(1, _notarization(p2), 2)
    with pytest.raises(ConsensusFault, match="not the certified one"):
        e.receive(1, _finalization(_p(3, parent_view=2, parent=parent)), 3)


@pytest.mark.parametrize("parent", [bytes(32), b"\xff" * 32], ids=["low", "high"])
def test_a_finalized_block_on_the_finalized_view_with_another_digest_is_a_consensus_fault(parent: bytes) -> None:
    e = _engine()
    _finalized_through_2(e)
    with pytest.raises(ConsensusFault, match="does not extend the finalized tip"):
        e.receive(1, _finalization(_p(3, parent_view=2, parent=parent)), 10)


@pytest.mark.parametrize("parent", ["p1", "p2"])
def test_a_finalized_block_on_a_view_below_the_finalized_one_is_a_consensus_fault(parent: str) -> None:
    # Final up to p2 (view 2); a finalization of view 4 on view 1, naming p1 (a real ancestor, now superseded) or
    # the finalized tip's digest p2 at the wrong view: either contradicts the finalized chain.
    e = _engine()
    p1, p2 = _finalized_through_2(e)
    digest = p1.payload if parent == "p1" else p2.payload
    with pytest.raises(ConsensusFault, match="does not extend the finalized tip"):
        e.receive(1, _finalization(_p(4, parent_view=1, parent=digest)), 10)


# ------------------------------------------------------------------------------------------------ fetch


def _waiting_for_nullifications(e: Engine, now: int) -> list[Output]:
    """Jump to view 5 (led by 1) at ``now``; 1 proposes p5 on genesis: views 1, 2, 3 lack nullifications."""
    e.start(0)
    outs = e.receive(1, _nullification(4), now)
    assert e.view == 5
    return outs + e.receive(1, _vote(Notarize, 1, _p(5)), now)


def test_missing_certificates_are_fetched_at_most_once_per_retry_period() -> None:
    # Fetched at 50; every certificate received after that re-checks p5's justification, which still lacks the
    # nullifications: the fetch is repeated only once Δ (the retry period) has passed since the last one.
    e = _engine()
    assert _fetched(_waiting_for_nullifications(e, 50)) == [(1, 2, 3)]
    assert _fetched(e.receive(2, _notarization(_p(1)), 50 + D - 1)) == []
    assert _fetched(e.receive(2, _notarization(_p(2)), 50 + D)) == [(1, 2, 3)]
    assert _fetched(e.receive(2, _notarization(_p(3)), 50 + 2 * D + 1)) == [(1, 2, 3)]
    assert _verifies(e.receive(2, _nullification(1), 400)) == []


@pytest.mark.parametrize("me", [0, 3])
def test_a_stale_fetch_is_retried_on_tick_for_the_proposal_awaiting_verification(me: int) -> None:
    e = _engine_as(me)
    assert _fetched(_waiting_for_nullifications(e, 50)) == [(1, 2, 3)]
    assert _fetched(e.tick(50 + D - 1)) == []
    assert _fetched(e.tick(50 + D)) == [(1, 2, 3)]
    assert _fetched(e.tick(50 + 2 * D + 1)) == [(1, 2, 3)]


def test_a_stale_fetch_is_retried_on_tick_for_our_own_proposal() -> None:
    # We lead view 4, entered by the nullification of view 3 (a jump from view 1): the parent needs views 1 and 2.
    e = _engine()
    e.start(0)
    assert _fetched(e.receive(1, _nullification(3), 50)) == [(1, 2)]
    assert e.view == 4 and e.leader_of(4) == 0
    assert _fetched(e.tick(50 + D)) == [(1, 2)]


def test_a_fetch_answered_leaves_no_deadline_behind() -> None:
    # The nullifications fetched arrive; the next retry forgets the fetch: next_deadline is the view's advance timeout,
    # not the past fetch time.
    e = _engine()
    _waiting_for_nullifications(e, 50)
    outs: list[Output] = []
    for w in (1, 2, 3):
        outs += e.receive(2, _nullification(w), 60 + w)
    assert _verifies(outs) == [_p(5)]
    assert _fetched(e.tick(50 + D)) == []
    assert e.next_deadline() == 50 + 3 * D


@pytest.mark.parametrize("epoch", [0, 2])
def test_a_fetch_of_another_epoch_is_not_answered(epoch: int) -> None:
    e = _engine(epoch=1)
    e.start(0)
    r = Round(1, 1)
    cert = Nullification(r, _threshold(nullify_message(r)), _threshold(seed_message(r)))
    e.receive(1, cert, 1)
    assert e.receive(2, Fetch(epoch, (1,)), 2) == []
    assert e.receive(2, Fetch(1, (1,)), 3) == [Send(2, cert)]
