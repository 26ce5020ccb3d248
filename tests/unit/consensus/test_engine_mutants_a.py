"""Engine rules left unguarded by the consensus-engine mutation session (issue 31), part A: the engine's lines
before ``_notarize`` — output and config types, ``__init__``, ``start``, ``receive``, ``tick``, ``next_deadline``,
``propose``, ``verified``, ``advance_floor``, the journal restore, view entry and the silent-leader skip, pruning,
leader election, the proposal's parent and justification, ``_try_propose`` and ``_check_leader_vote``.

Written against the session's survivors (``build/mutate/consensus-engine/result.json``): each test asserts a rule
stated by the engine's docstrings or ``docs/consensus.md`` and fails with the survivors it is named for applied.
Same world as ``test_engine_rules.py`` (n = 4, :class:`FastScheme`, round-robin: view ``v`` of epoch ``e`` is led
by ``(e + v) mod 4``; the engine is validator 0 unless the test says otherwise), whose helpers are reused.
"""

from __future__ import annotations

import dataclasses

import pytest

from cowboy_node.consensus.simplex.elector import Election, elect
from cowboy_node.consensus.simplex.engine import (
    Broadcast,
    Config,
    Engine,
    Faulty,
    Finalized,
    Journal,
    JournalRejected,
    Notarized,
    Nullified,
    ProposalWanted,
    SeedRevealed,
    Send,
    VerifyBlock,
)
from cowboy_node.consensus.simplex.types import (
    Fetch,
    Finalize,
    Notarize,
    Nullify,
    Proposal,
    seed_message,
)
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, FastScheme
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
    _sent,
    _threshold,
    _verifies,
    _vote,
)

DIGEST = bytes(range(32))


def _engine_as(me: int, election: Election = Election.ROUND_ROBIN, **kw: object) -> Engine:
    """An engine for validator ``me`` (the shared helper is validator 0 only)."""
    cfg = Config(me=me, delta_ms=D, election=election, genesis=GENESIS, **kw)  # type: ignore[arg-type]
    return Engine(cfg, FastScheme(N, me))


def _wanted(outs: list[object]) -> list[ProposalWanted]:
    return [o for o in outs if isinstance(o, ProposalWanted)]


def _step(e: Engine, view: int, now: int) -> list[object]:
    """Leave ``view`` by its nullification (sent by validator 2, or 1 when the engine is 2)."""
    return e.receive(1 if e.cfg.me == 2 else 2, _nullification(view), now)  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------ types, defaults


def test_outputs_and_config_are_immutable() -> None:
    p, r = _p(1), Round(0, 1)
    nz, fz, nl = _notarization(p), _finalization(p), _nullification(1)
    vote = _vote(Notarize, 0, p)
    values = [Broadcast(nz), Send(1, nz), Journal(vote), ProposalWanted(r, 0, GENESIS), VerifyBlock(p),
              Notarized(nz), Nullified(nl), Finalized(p, fz, nz.seed), SeedRevealed(r, nz.seed),
              Faulty(1, r, "x"), Config(me=0)]
    for value in values:
        name = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, getattr(value, name))


def test_default_window_admits_votes_64_views_ahead_and_no_further() -> None:
    # docs/consensus.md: votes are admitted for views in (finalized, current + window], window 64
    def engine() -> Engine:
        e = Engine(Config(me=0, genesis=GENESIS, election=Election.ROUND_ROBIN), FastScheme(N, 0))
        e.start(0)
        return e

    inside, outside = engine(), engine()
    for signer in (1, 2, 3):
        inside.receive(signer, _vote(Nullify, signer, Round(0, 1 + 64)), 1)
        outside.receive(signer, _vote(Nullify, signer, Round(0, 1 + 65)), 1)
    assert inside.view == 66  # the three nullifies made a nullification of view 65
    assert outside.view == 1 and outside.certificates(66) == []


def test_default_retain_keeps_1024_views_below_the_finalized_tip() -> None:
    # docs/consensus.md: a validator prunes views 1024 below its finalized one
    e = Engine(Config(me=0, genesis=GENESIS, election=Election.ROUND_ROBIN), FastScheme(N, 0))
    e.start(0)
    e.receive(2, _nullification(5), 1)
    e.receive(2, _nullification(6), 2)
    e.advance_floor(1030, DIGEST, _threshold(seed_message(Round(0, 1030))), 3)
    assert e.certificates(5) == []
    assert e.certificates(6) == [_nullification(6)]


def test_default_skip_timeout_presumes_a_leader_down_after_ten_silent_views() -> None:
    # docs/consensus.md: skip_timeout default 10; a leader silent for more than that is nullified at once
    e = _engine()
    e.start(0)
    for view in range(1, 10):
        _step(e, view, view)
    assert e.view == 10 and e.next_deadline() == 9 + 2 * D  # leader 2, silent for 10 views: still waited for
    _step(e, 10, 10)
    assert e.view == 11 and e.next_deadline() == 10  # leader 3, silent for 11 views: its timeout is now
    assert _nullified(e.tick(10)) == [Round(0, 11)]


def test_votes_above_is_the_abstention_limit_and_defaults_to_zero() -> None:
    assert _engine().votes_above == 0  # 0: vote in every view
    e = _engine(vote_above_view=3)
    assert e.votes_above == 3
    e.allow_votes_above(1)
    assert e.votes_above == 1


# ------------------------------------------------------------------------------------------------ __init__, receive


def test_engine_refuses_an_index_outside_the_validator_set() -> None:
    for me in (-1, N, N + 1):
        with pytest.raises(ValueError):
            Engine(Config(me=me, genesis=GENESIS), FastScheme(N, 0))


def test_view_is_zero_until_start() -> None:
    e = _engine()
    assert e.view == 0
    e.start(0)
    assert e.view == 1


def test_messages_are_taken_from_every_other_validator_and_from_nobody_else() -> None:
    e = _engine_as(1)
    e.start(0)
    e.receive(2, _nullification(1), 1)
    ask = Fetch(0, (1,))
    assert e.receive(0, ask, 2) == [Send(0, _nullification(1))]  # validator 0 is a peer like any other
    for sender in (-1, N, N + 1, 1):  # not a validator index, or this validator itself
        assert e.receive(sender, ask, 3) == []


# ------------------------------------------------------------------------------------------------ timers


def test_before_start_nothing_is_armed() -> None:
    e = _engine()
    assert e.next_deadline() is None
    assert e.tick(5) == []


def test_leader_timeout_fires_on_a_late_tick() -> None:
    e = _engine()
    e.start(0)
    assert e.tick(2 * D - 50) == []  # before the leader timeout: nothing
    assert _nullified(e.tick(2 * D + 50)) == [Round(0, 1)]  # the tick came after the deadline: it still fires


def test_advance_timeout_fires_on_a_late_tick() -> None:
    e = _engine()
    e.start(0)
    assert _verifies(e.receive(1, _vote(Notarize, 1, _p(1)), 0)) == [_p(1)]  # leader timeout disarmed
    assert _nullified(e.tick(2 * D + 50)) == []
    assert _nullified(e.tick(3 * D + 50)) == [Round(0, 1)]  # 3Δ passed without a notarization


def test_after_a_timeout_the_own_votes_are_rebroadcast_every_retry() -> None:
    e = _engine()
    e.start(0)
    nullify = _sent(e.tick(2 * D), Nullify)
    assert len(nullify) == 1
    assert e.next_deadline() == 3 * D
    assert _sent(e.tick(3 * D - 50), Nullify) == []  # retry (Δ) not yet due
    assert _sent(e.tick(3 * D + 50), Nullify) == nullify  # due (late tick): rebroadcast
    assert e.next_deadline() == 4 * D + 50  # the next one a retry after this one
    assert _sent(e.tick(4 * D + 40), Nullify) == []
    assert _sent(e.tick(4 * D + 50), Nullify) == nullify


def test_a_fetch_is_retried_a_retry_after_it_was_sent() -> None:
    e = _engine()
    e.start(0)
    e.receive(2, _nullification(2), 10)  # enters view 3
    outs = e.receive(3, _vote(Notarize, 3, _p(3)), 20)  # on genesis: view 1's nullification is missing
    assert [m.views for m in _sent(outs, Fetch)] == [(1,)]  # type: ignore[attr-defined]
    assert e.next_deadline() == 20 + D  # before the advance timeout (10 + 3Δ)


# ------------------------------------------------------------------------------------------------ propose


def test_propose_ignores_a_round_of_another_epoch() -> None:
    e = _engine_as(2, epoch=1)  # leads view 1 of epoch 1
    assert _wanted(e.start(0)) == [ProposalWanted(Round(1, 1), 0, GENESIS)]
    assert e.propose(Round(0, 1), DIGEST, 1) == []
    assert e.propose(Round(2, 1), DIGEST, 1) == []
    assert _of(e.propose(Round(1, 1), DIGEST, 1), Journal)


def test_propose_ignores_a_view_the_engine_left() -> None:
    e = _engine_as(1)  # leads views 1 and 5
    assert _wanted(e.start(0))
    e.receive(2, _nullification(1), 1)
    assert e.view == 2
    assert e.propose(Round(0, 1), DIGEST, 2) == []


def test_propose_ignores_a_view_led_by_another_validator() -> None:
    e = _engine_as(1)
    e.start(0)
    e.receive(2, _nullification(1), 1)
    assert e.view == 2 and e.leader_of(2) == 2
    assert e.propose(Round(0, 2), DIGEST, 2) == []
    e.receive(2, _nullification(2), 3)
    e.receive(2, _nullification(3), 4)
    assert e.view == 4 and e.leader_of(4) == 0
    assert e.propose(Round(0, 4), DIGEST, 5) == []


def test_propose_refuses_a_payload_that_is_not_a_digest() -> None:
    e = _engine_as(1)
    e.start(0)
    for payload in (bytes(31), bytes(33)):
        with pytest.raises(ValueError):
            e.propose(Round(0, 1), payload, 1)


# ------------------------------------------------------------------------------------------------ verified


def test_a_verdict_on_another_proposal_than_the_leaders_is_ignored() -> None:
    e = _engine()
    e.start(0)
    p1 = _p(1)
    assert _verifies(e.receive(1, _vote(Notarize, 1, p1), 1)) == [p1]
    assert e.verified(_p(1, tag=b"other"), True, 2) == []  # never notarize a block the leader did not propose
    assert _sent(e.verified(p1, True, 3), Notarize) == [_vote(Notarize, 0, p1)]


def test_a_verdict_after_the_view_was_left_casts_no_vote() -> None:
    for ok in (True, False):
        e = _engine()
        e.start(0)
        p1 = _p(1)
        assert _verifies(e.receive(1, _vote(Notarize, 1, p1), 1)) == [p1]
        e.receive(2, _nullification(2), 2)  # jump to view 3: view 1 left without a certificate of it
        assert e.view == 3
        outs = e.verified(p1, ok, 3)
        assert _of(outs, Journal) == [] and _sent(outs, Notarize) == [] and _nullified(outs) == []


# ------------------------------------------------------------------------------------------------ advance_floor


def test_a_pending_finalization_survives_a_floor_advance_below_it() -> None:
    e = _engine()
    e.start(0)
    p1 = _p(1)
    p2 = _p(2, 1, p1.payload)
    p3 = _p(3, 2, p2.payload)
    e.receive(1, _finalization(p3), 1)  # view 2's notarization (p3's parent) is missing: fetched
    e.advance_floor(1, p1.payload, _threshold(seed_message(Round(0, 1))), 2)
    outs = e.receive(2, _notarization(p2), 3)
    assert [o.proposal for o in _of(outs, Finalized)] == [p2, p3]  # type: ignore[attr-defined]
    assert e.finalized_view == 3


def test_a_floor_advance_to_the_current_view_enters_the_next() -> None:
    e = _engine()
    e.start(0)
    e.advance_floor(1, DIGEST, _threshold(seed_message(Round(0, 1))), 1)
    assert e.view == 2


def test_a_floor_advance_elects_the_leader_of_the_view_after_it() -> None:
    # random election: view 2's leader needs view 1's seed; the floor advance to view 1 brings it
    e = _engine_as(0, election=Election.RANDOM)
    e.start(0)
    e.receive(2, _vote(Nullify, 2, Round(0, 2)), 1)  # view 2 known (a vote), never entered
    e.receive(2, _nullification(5), 2)  # jump to view 6 (view 3 unknown)
    assert e.view == 6 and e.leader_of(2) is None
    seed1 = _threshold(seed_message(Round(0, 1)))
    e.advance_floor(1, DIGEST, seed1, 3)
    expected = elect(Election.RANDOM, Round(0, 2), N, seed1)
    assert expected is not None and e.leader_of(2) == expected


# ------------------------------------------------------------------------------------------------ journal restore


def test_a_journal_of_another_validator_or_epoch_is_rejected() -> None:
    def restore(signer: int, epoch: int) -> Engine:
        cfg = Config(me=1, epoch=1, delta_ms=D, election=Election.ROUND_ROBIN, genesis=GENESIS)
        return Engine(cfg, FastScheme(N, 1), (_vote(Nullify, signer, Round(epoch, 3)),))

    assert restore(1, 1).own_votes() == [_vote(Nullify, 1, Round(1, 3))]
    for signer, epoch in ((0, 1), (2, 1), (1, 0), (1, 2)):
        with pytest.raises(JournalRejected):
            restore(signer, epoch)


def test_a_journal_repeat_is_kept_once_and_a_conflict_rejected() -> None:
    p3 = _p(3)
    nullify = _vote(Nullify, 0, Round(0, 3))
    pairs = [(_vote(Notarize, 0, p3), _vote(Notarize, 0, _p(3, tag=b"x"))),
             (_vote(Finalize, 0, p3), _vote(Finalize, 0, _p(3, tag=b"x"))),
             (nullify, Nullify(nullify.round, 0, _vote(Nullify, 1, nullify.round).signature, nullify.seed))]
    for vote, other in pairs:
        assert _engine((vote, vote)).own_votes() == [vote]  # the same vote twice (a torn, re-appended record)
        assert _engine((vote, dataclasses.replace(vote))).own_votes() == [vote]
        with pytest.raises(JournalRejected):
            _engine((vote, other))


def test_journaled_votes_at_or_below_the_floor_are_not_restored() -> None:
    # The engine never votes at or below its finalized view, so votes there (a journal compacted by the committed
    # head may still hold some) cannot lead to a double vote: they are dropped, neither checked nor resumed.
    old = [_vote(Notarize, 0, _p(view, tag=tag)) for view in (3, 5) for tag in (b"a", b"b")]
    e = _engine(tuple(old), floor_view=5)
    assert e.view == 0 and e.own_votes() == []
    e.start(0)
    assert e.view == 6


# ------------------------------------------------------------------------------------------------ views


def test_the_view_never_goes_back() -> None:
    e = _engine()
    e.receive(2, _nullification(2), 0)  # a certificate before start: the engine is in view 3
    assert e.view == 3
    e.start(1)
    assert e.view == 3


def test_the_grace_restarts_after_a_jump() -> None:
    e = _engine(skip_timeout=2)
    e.start(0)
    _step(e, 4, 10)  # jump 1 → 5: the silence of views 1..4 was not heard
    assert e.view == 5 and e.next_deadline() == 10 + 2 * D
    _step(e, 5, 20)
    assert e.view == 6 and e.next_deadline() == 20 + 2 * D  # 2 views since the jump: not more than skip_timeout
    _step(e, 6, 30)
    assert e.view == 7 and e.next_deadline() == 30  # 3 views: leader 3 presumed down, nullified at once


def test_a_jump_over_a_single_view_restarts_the_grace() -> None:
    e = _engine(skip_timeout=2)
    e.start(0)
    _step(e, 2, 10)  # 1 → 3 skips view 2
    assert e.view == 3 and e.next_deadline() == 10 + 2 * D


def test_a_silent_leader_is_presumed_down_but_never_this_validator() -> None:
    e = _engine_as(1, skip_timeout=2)
    e.start(0)
    _step(e, 1, 10)
    assert e.view == 2 and e.next_deadline() == 10 + 2 * D  # silent for 2 views: not more than skip_timeout
    _step(e, 2, 20)
    assert e.view == 3 and e.next_deadline() == 20
    _step(e, 3, 30)
    assert e.view == 4 and e.next_deadline() == 30  # leader 0, below this validator's index, is skipped too
    _step(e, 4, 40)
    assert e.view == 5 and e.leader_of(5) == 1 and e.next_deadline() == 40 + 2 * D  # its own view: never


def test_skip_timeout_zero_disables_the_skip_and_one_enables_it() -> None:
    off = _engine(skip_timeout=0)
    off.start(0)
    for view in range(1, 7):
        _step(off, view, view)
    assert off.view == 7 and off.next_deadline() == 6 + 2 * D
    one = _engine(skip_timeout=1)
    one.start(0)
    _step(one, 1, 10)
    assert one.view == 2 and one.next_deadline() == 10  # leader 2 silent for 2 views > 1
    _step(one, 2, 20)
    _step(one, 3, 30)
    assert one.view == 4 and one.next_deadline() == 30 + 2 * D  # this validator's own view


# ------------------------------------------------------------------------------------------------ pruning


def test_exactly_retain_views_are_kept_below_the_finalized_tip() -> None:
    e = _engine(retain=2)
    e.start(0)
    for view in (3, 4, 5, 6):
        _step(e, view, view)
    e.advance_floor(8, DIGEST, _threshold(seed_message(Round(0, 8))), 10)
    assert e.certificates(4) == [] and e.certificates(5) == []
    assert e.certificates(6) == [_nullification(6)]  # views 6 and 7: the two below the tip


def test_fetches_at_or_below_the_finalized_view_are_dropped() -> None:
    e = _engine()
    e.start(0)
    outs = _step(e, 3, 10)  # enters view 4, led here: views 1 and 2 lack nullifications
    assert [m.views for m in _sent(outs, Fetch)] == [(1, 2)]  # type: ignore[attr-defined,arg-type]
    _step(e, 5, 20)  # enters view 6
    p6 = _p(6, 5, _p(5).payload)
    outs = e.receive(2, _vote(Notarize, 2, p6), 20)  # view 5's notarization is missing
    assert [m.views for m in _sent(outs, Fetch)] == [(5,)]  # type: ignore[attr-defined]
    e.advance_floor(2, DIGEST, _threshold(seed_message(Round(0, 2))), 30)
    assert e.next_deadline() == 20 + D  # only view 5's fetch (sent at 20) is still retried


# ------------------------------------------------------------------------------------------------ proposals


def test_the_leader_builds_on_the_highest_notarized_view() -> None:
    e = _engine()
    e.start(0)
    p1 = _p(1)
    p2 = _p(2, 1, p1.payload)
    p3 = _p(3, 2, p2.payload)
    outs = e.receive(1, _notarization(p3), 1)  # enters view 4, led here
    assert _wanted(outs) == [ProposalWanted(Round(0, 4), 3, p3.payload)]


def test_the_leader_skips_no_view_without_its_nullification() -> None:
    e = _engine()
    e.start(0)
    _step(e, 1, 1)  # view 2 entered, never nullified
    outs = _step(e, 3, 2)  # enters view 4, led here
    assert _wanted(outs) == []
    assert [m.views for m in _sent(outs, Fetch)] == [(2,)]  # type: ignore[attr-defined]
    assert _wanted(_step(e, 2, 3)) == [ProposalWanted(Round(0, 4), 0, GENESIS)]


def test_a_proposal_naming_another_parent_than_the_certified_block_is_nullified() -> None:
    for wrong in (bytes(32), b"\xff" * 32):
        e = _engine()
        e.start(0)
        p1 = _p(1)
        e.receive(1, _notarization(p1), 1)
        bad = Proposal(Round(0, 2), 1, wrong, DIGEST)
        outs = e.receive(2, _vote(Notarize, 2, bad), 2)
        assert _verifies(outs) == [] and _nullified(outs) == [Round(0, 2)]


def test_a_leader_that_nullified_its_view_asks_for_no_block() -> None:
    e = _engine()
    e.start(0)
    _step(e, 3, 10)  # view 4, led here; no block asked: views 1 and 2 lack nullifications
    assert _nullified(e.tick(10 + 2 * D)) == [Round(0, 4)]
    _step(e, 1, 10 + 2 * D + 1)
    outs = _step(e, 2, 10 + 2 * D + 2)  # now justified, but this validator gave the view up
    assert _wanted(outs) == []


def test_an_abstaining_leader_asks_for_no_block_at_or_below_the_limit() -> None:
    for limit, asked in ((3, True), (4, False), (8, False)):
        e = _engine(vote_above_view=limit)
        e.start(0)
        for view in (1, 2):
            _step(e, view, view)
        assert bool(_wanted(_step(e, 3, 3))) is asked and e.view == 4


def test_a_left_views_proposal_is_not_sent_for_verification() -> None:
    e = _engine()
    e.start(0)
    _step(e, 2, 1)  # jump to view 3: view 1 left without a certificate of it
    assert _verifies(e.receive(1, _vote(Notarize, 1, _p(1)), 2)) == []


def test_a_proposal_is_sent_for_verification_once() -> None:
    e = _engine()
    e.start(0)
    _step(e, 2, 10)  # view 3
    p3 = _p(3)
    assert _verifies(e.receive(3, _vote(Notarize, 3, p3), 20)) == []  # view 1's nullification fetched
    assert _verifies(_step(e, 1, 30)) == [p3]
    assert _verifies(e.tick(20 + D + 1)) == []  # the fetch's retry re-derives what is missing: nothing
    assert _verifies(e.receive(1, _notarization(_p(1)), 40)) == []  # nor does a later certificate
