"""A validator slower than the others is not presumed down (issue 33 §2, ``skip_timeout``).

Its votes for a view reach us after the others finalized the view: they are not processed, but once the vote's
own partial verifies they count as the signer's activity, so its leader view gets the leader timeout instead of
being nullified on entry. A late vote whose signature does not verify counts for nothing, and late votes cost at
most one signature check per signer per view entered.

Engine under test: validator 0 of 4, round-robin leaders (view ``v`` led by ``v mod 4``), ``skip_timeout`` 4;
validator 3 is the slow one. Views 1, 2, 5, 6 are finalized by certificates; view 3 (led by 3) is nullified, view
4 (led by 0) proposed by the engine itself. Entering view 7 (led by 3): without activity from 3 since the start,
``7 − 0 > 4`` presumes it down.
"""

from __future__ import annotations

import hashlib

from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Broadcast, Config, Engine, Faulty, Output, ProposalWanted
from cowboy_node.consensus.simplex.types import (
    Finalization,
    Finalize,
    Notarize,
    Nullification,
    Nullify,
    Proposal,
    finalize_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, CountingScheme, FastScheme

D = 100  # Δ: the leader timeout is 2Δ
N = 4
SLOW = 3
SKIP = 4


def _threshold(message: bytes) -> bytes:
    sig, _ = FastScheme(N, None).recover(message, [(i, FastScheme(N, i).sign(message)) for i in range(N)])
    assert sig is not None
    return sig


def _p(view: int, parent_view: int, parent: bytes) -> Proposal:
    return Proposal(Round(0, view), parent_view, parent, hashlib.sha256(b"block %d" % view).digest())


def _finalize(signer: int, p: Proposal, forged: bool = False) -> Finalize:
    s = FastScheme(N, signer)
    sig = s.sign(finalize_message(p))
    if forged:
        sig = bytes(x ^ 1 for x in sig)
    return Finalize(p, signer, sig, s.sign(seed_message(p.round)))


def _notarize(signer: int, p: Proposal) -> Notarize:
    s = FastScheme(N, signer)
    return Notarize(p, signer, s.sign(notarize_message(p)), s.sign(seed_message(p.round)))


class _Run:
    """Drives the engine through views 1..6 as the module docstring says; ``late`` is called after each view
    is finalized (to deliver the slow validator's votes for it, now late)."""

    def __init__(self, skip_timeout: int = SKIP) -> None:
        self.scheme = CountingScheme(N, 0, certificates=False)
        cfg = Config(me=0, delta_ms=D, election=Election.ROUND_ROBIN, genesis=GENESIS, skip_timeout=skip_timeout)
        self.engine = Engine(cfg, self.scheme)
        self.now = 0
        self.engine.start(self.now)
        self.tip: tuple[int, bytes] = (0, GENESIS)
        self.finalized: list[Proposal] = []

    def finalize_view(self, view: int) -> Proposal:
        p = _p(view, *self.tip)
        e = self.engine
        e.receive(view % N, _notarize(view % N, p), self.now)  # the leader's proposal
        e.receive(1, Finalization(p, _threshold(finalize_message(p)), _threshold(seed_message(p.round))), self.now)
        assert e.finalized_view == view
        self.tip = (view, p.payload)
        self.finalized.append(p)
        return p

    def nullify_view(self, view: int) -> list[Output]:
        r = Round(0, view)
        return self.engine.receive(1, Nullification(r, _threshold(nullify_message(r)), _threshold(seed_message(r))),
                                   self.now)

    def own_view(self, view: int, outs: list[Output]) -> Proposal:
        """The engine leads ``view``: it proposes, the others finalize."""
        (want,) = [o for o in outs if isinstance(o, ProposalWanted)]
        p = _p(view, want.parent_view, want.parent)
        self.engine.propose(want.round, p.payload, self.now)
        self.engine.receive(1, Finalization(p, _threshold(finalize_message(p)), _threshold(seed_message(p.round))),
                            self.now)
        assert self.engine.finalized_view == view
        self.tip = (view, p.payload)
        self.finalized.append(p)
        return p

    def _late(self, p: Proposal, forged: bool) -> None:
        """The slow validator's finalize of ``p``, after ``p`` is final: not processed (nothing but, when forged,
        the report of its bad signature)."""
        outs = self.engine.receive(SLOW, _finalize(SLOW, p, forged), self.now)
        if forged:
            assert outs == [Faulty(SLOW, p.round, "bad late finalize signature")]
        else:
            assert outs == []

    def to_view_7(self, late: bool, forged: bool = False) -> None:
        """Views 1..6; the slow validator's finalize vote of each finalized view arrives after its finalization."""
        e = self.engine
        for view in (1, 2):
            p = self.finalize_view(view)
            if late:
                self._late(p, forged)
        self.now += 2 * D
        e.tick(self.now)  # view 3: 3 - 0 <= 4, the slow leader still gets its timeout
        entered_4 = self.nullify_view(3)
        for view in (4, 5, 6):
            if view > 4:
                self.now += 1
            p = self.own_view(4, entered_4) if view == 4 else self.finalize_view(view)
            if late:
                self._late(p, forged)
        assert e.view == 7 and e.leader_of(7) == SLOW


def _nullifies_of(outs: list[Output], view: int) -> list[Nullify]:
    return [o.message for o in outs if isinstance(o, Broadcast) and isinstance(o.message, Nullify)
            and o.message.round.view == view]


def test_a_signer_whose_votes_all_arrive_after_finalization_keeps_its_leader_timeout() -> None:
    run = _Run()
    run.to_view_7(late=True)
    e, t = run.engine, run.now
    assert e.next_deadline() == t + 2 * D  # armed when view 7 was entered (at t): the leader timeout, not 0
    assert _nullifies_of(e.tick(t), 7) == []
    assert _nullifies_of(e.tick(t + 2 * D - 1), 7) == []
    assert len(_nullifies_of(e.tick(t + 2 * D), 7)) == 1  # and it still times out if the leader stays silent


def test_without_late_votes_the_silent_signer_is_presumed_down() -> None:
    """The control: the same views with nothing from validator 3 nullify its view 7 on entry."""
    run = _Run()
    run.to_view_7(late=False)
    assert len(_nullifies_of(run.engine.tick(run.now), 7)) == 1


def test_a_forged_late_vote_does_not_count_as_activity() -> None:
    run = _Run()
    run.to_view_7(late=True, forged=True)
    assert len(_nullifies_of(run.engine.tick(run.now), 7)) == 1


def test_late_votes_cost_at_most_one_check_per_signer_per_view() -> None:
    run = _Run()
    run.to_view_7(late=False)
    e, scheme = run.engine, run.scheme
    p = run.finalized[-1]
    before = scheme.checks
    faults = []
    for k in range(50):  # a flood of late votes from one signer (forged: none of them counts)
        vote = Finalize(p, SLOW, hashlib.sha384(b"junk%d" % k).digest(), bytes(48))
        faults += e.receive(SLOW, vote, run.now)
    assert scheme.checks - before == 1
    assert faults == [Faulty(SLOW, p.round, "bad late finalize signature")]  # the one checked, reported once
    for _ in range(50):  # a valid late vote in the same view waits for the next view's budget
        e.receive(SLOW, _finalize(SLOW, p), run.now)
    assert scheme.checks - before == 1
    assert len(_nullifies_of(e.tick(run.now), 7)) == 1


def test_a_late_vote_is_checked_only_when_it_would_matter() -> None:
    """A late vote that cannot keep its signer active for the next view, or that arrives while its signer's
    activity is recent, costs no check."""
    run = _Run()
    run.to_view_7(late=False)
    e, scheme = run.engine, run.scheme
    before = scheme.checks
    e.receive(SLOW, _finalize(SLOW, run.finalized[0]), run.now)  # view 1: 1 + 4 <= 7, too old to matter
    assert scheme.checks == before
    e.receive(2, _finalize(2, run.finalized[-1]), run.now)  # validator 2 voted in view 6 (in window): no newer
    assert scheme.checks == before
    e.receive(1, _finalize(1, run.finalized[-2]), run.now)  # validator 1 proposed view 5: its vote of 5, no newer
    assert scheme.checks == before
    e.receive(SLOW, _finalize(SLOW, run.finalized[-1]), run.now)  # the control: this one is checked
    assert scheme.checks == before + 1


def test_a_late_vote_is_not_checked_while_its_signers_activity_is_recent() -> None:
    """With ``skip_timeout`` 10, validator 1's last vote (its proposal of view 5) is 2 views old in view 7, less
    than half of 10: its late vote of view 6 is not checked; validator 3, silent since the start, is."""
    run = _Run(skip_timeout=10)
    run.to_view_7(late=False)
    e, scheme = run.engine, run.scheme
    before = scheme.checks
    e.receive(1, _finalize(1, run.finalized[-1]), run.now)
    assert scheme.checks == before
    e.receive(SLOW, _finalize(SLOW, run.finalized[-1]), run.now)
    assert scheme.checks == before + 1
