"""The Simplex state machine, sans-I/O: no clock, no sockets, no randomness, no threads.

The host drives it with :meth:`Engine.start`, :meth:`Engine.receive` (an authenticated message from peer
``sender``), :meth:`Engine.tick` (the clock reached :meth:`Engine.next_deadline`), :meth:`Engine.propose`
(the answer to :class:`ProposalWanted`) and :meth:`Engine.verified` (the answer to :class:`VerifyBlock`).
Each returns a list of outputs, to be acted on in order:

- :class:`Journal` — persist this own vote (fsync) *before* acting on any later output: it always precedes
  the :class:`Broadcast` of the same vote. On restart the journaled votes are handed back to the
  constructor and the engine never signs a conflicting vote.
- :class:`Broadcast` / :class:`Send` — messages for every peer / one peer.
- events: :class:`ProposalWanted`, :class:`VerifyBlock`, :class:`Notarized`, :class:`Nullified`,
  :class:`Finalized` (in chain order, each block once), :class:`SeedRevealed`, :class:`Faulty`.

Rules (term length 1, as commonware's ``simplex`` with the threshold-VRF scheme):

- Entering view ``v`` arms the leader timeout ``2Δ`` and the advance timeout ``3Δ``. A view is left on a
  notarization, nullification or finalization of it (or of any higher view: jump). A leader from whom no
  vote arrived in the last ``skip_timeout`` views gets no leader timeout: its view is nullified at once. A vote
  for a view already finalized here counts too (a validator slower than the others is alive), once its
  signature verifies, at most one such check per signer per view entered; it is not processed otherwise.
- The leader proposes on the highest view ``p < v`` holding a notarization (or the finalized tip) such that
  every view in ``(p, v)`` holds a nullification. A validator notarizes the leader's proposal once it holds
  that same justification and the host verified the block; never two proposals in a view, never after its
  own ``nullify`` of the view.
- On a notarization of ``v``: broadcast ``finalize`` unless this validator nullified ``v``.
- On a timeout, a failed verification or the leader's own ``nullify``: broadcast ``nullify(v)``; every
  ``retry`` after that, rebroadcast the view's own votes and the certificate that entered it.
- Missing certificates (ancestry of a proposal or of a finalized block) are asked for with :class:`Fetch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cowboy_node.consensus.simplex.elector import Election, elect
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.consensus.simplex.types import (
    DIGEST_LEN,
    MAX_FETCH_VIEWS,
    Certificate,
    Fetch,
    Finalization,
    Finalize,
    Message,
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

__all__ = [
    "Broadcast",
    "Config",
    "ConsensusFault",
    "Engine",
    "Event",
    "Faulty",
    "Finalized",
    "Journal",
    "JournalRejected",
    "Notarized",
    "Nullified",
    "Output",
    "ProposalWanted",
    "SeedRevealed",
    "Send",
    "VerifyBlock",
]


# ------------------------------------------------------------------------------------------------ outputs


@dataclass(frozen=True, slots=True)
class Broadcast:
    message: Message


@dataclass(frozen=True, slots=True)
class Send:
    to: int
    message: Message


@dataclass(frozen=True, slots=True)
class Journal:
    """Persist this own vote durably before sending anything that follows."""

    vote: Vote


@dataclass(frozen=True, slots=True)
class ProposalWanted:
    """This validator leads ``round``: build a block on ``parent`` (certified at ``parent_view``) and call
    :meth:`Engine.propose`."""

    round: Round
    parent_view: int
    parent: bytes


@dataclass(frozen=True, slots=True)
class VerifyBlock:
    """Check the block ``proposal.payload`` (fetch it if needed) and call :meth:`Engine.verified`."""

    proposal: Proposal


@dataclass(frozen=True, slots=True)
class Notarized:
    certificate: Notarization


@dataclass(frozen=True, slots=True)
class Nullified:
    certificate: Nullification


@dataclass(frozen=True, slots=True)
class Finalized:
    """``proposal`` is final. ``certificate`` is the finalization that finalized it (its own, or a
    descendant's); ``seed`` is the seed of the proposal's own round."""

    proposal: Proposal
    certificate: Finalization
    seed: bytes


@dataclass(frozen=True, slots=True)
class SeedRevealed:
    """The seed (group signature over the round) of ``round`` became known; once per round."""

    round: Round
    seed: bytes


@dataclass(frozen=True, slots=True)
class Faulty:
    """Peer ``signer`` sent something only a faulty validator sends (evidence is local: partials are not
    attributable to third parties)."""

    signer: int
    round: Round
    reason: str
    votes: tuple[Vote, ...] = ()
    """For conflicting votes: the two votes, both signatures verified — evidence any third party can check
    against the signer's share public key. Empty for faults only this validator can attest."""


Event = ProposalWanted | VerifyBlock | Notarized | Nullified | Finalized | SeedRevealed | Faulty
Output = Broadcast | Send | Journal | Event


class ConsensusFault(RuntimeError):
    """Certificates contradict each other: more than ``f`` validators are faulty. The engine cannot go on."""


class JournalRejected(ValueError):
    """The journaled votes handed to the engine cannot be restored: two different own votes of one kind in one
    view, ``nullify`` and ``finalize`` in one view, or a vote of another validator or epoch. Starting from them
    could mean signing a third vote contradicting one already sent: the host must refuse to start."""

    def __init__(self, view: int, reason: str) -> None:
        super().__init__(f"journal holds {reason} for view {view}")
        self.view = view
        """The view the offending votes are for."""


# ------------------------------------------------------------------------------------------------ config


@dataclass(frozen=True, slots=True)
class Config:
    me: int
    """This validator's 0-based index."""
    epoch: int = 0
    delta_ms: int = 1000
    """Δ: the leader timeout is 2Δ, the advance (notarization) timeout 3Δ."""
    retry_ms: int | None = None
    """Rebroadcast period after a timeout (default Δ)."""
    election: Election = Election.RANDOM
    genesis: bytes = bytes(DIGEST_LEN)
    """Digest of the block finalized at view 0 (or of the floor below)."""
    floor_view: int = 0
    """View of the last block known final at start (0: genesis)."""
    floor_seed: bytes | None = None
    """Seed of the floor view's round, when known (the random elector needs it to elect the next leader)."""
    window: int = 64
    """Votes and certificates are admitted up to this many views above the current one."""
    retain: int = 1024
    """Views of certificates kept below the finalized tip (to answer :class:`Fetch`)."""
    skip_timeout: int = 10
    """A leader from whom no vote arrived in this many views is presumed down: entering its view nullifies at
    once instead of waiting 2Δ (commonware's ``skip_timeout``; 0 disables). Liveness only — a leader that is
    merely slow still gets its view when any vote of it arrives."""
    vote_above_view: int = 0
    """Abstain: never sign a vote (no :class:`Journal`, no own vote broadcast) for a view at or below this one;
    everything else (certificates, view changes, finalization, :class:`Fetch` answers) works as usual. The host
    raises it while a validator without its journal watches the network (the double-sign guard) and lowers it
    with :meth:`Engine.allow_votes_above`. 0: vote in every view."""

    @property
    def leader_timeout_ms(self) -> int:
        return 2 * self.delta_ms

    @property
    def advance_timeout_ms(self) -> int:
        return 3 * self.delta_ms


# ------------------------------------------------------------------------------------------------ state


@dataclass(slots=True)
class _View:
    round: Round
    leader: int | None = None
    proposal: Proposal | None = None
    """The leader's proposal (its first validly signed notarize)."""
    proposal_requested: bool = False
    verify_requested: bool = False
    verified_ok: bool = False
    my_notarize: Notarize | None = None
    my_nullify: Nullify | None = None
    my_finalize: Finalize | None = None
    notarizes: dict[int, Notarize] = field(default_factory=dict)
    nullifies: dict[int, Nullify] = field(default_factory=dict)
    finalizes: dict[int, Finalize] = field(default_factory=dict)
    bad: set[int] = field(default_factory=set)
    conflicted: set[tuple[int, str]] = field(default_factory=set)
    """(signer, vote kind) already shown to conflict in this view: further differing votes of that kind from that
    signer are dropped without a signature check (a proven fault is recorded once, its repeats cost nothing)."""
    notarization: Notarization | None = None
    nullification: Nullification | None = None
    finalization: Finalization | None = None
    seed: bytes | None = None
    leader_deadline: int | None = None
    advance_deadline: int | None = None
    retry_at: int | None = None
    timed_out: bool = False


class Engine:
    """One validator's Simplex state machine (see the module docstring)."""

    def __init__(self, config: Config, scheme: Scheme, journal: Iterable[Vote] = ()) -> None:
        if not 0 <= config.me < scheme.n:
            raise ValueError("config.me is not a validator index")
        self.cfg = config
        self.scheme = scheme
        self.n = scheme.n
        self.q = scheme.quorum
        self.epoch = config.epoch
        self.view = 0
        """Current view (0 until :meth:`start`)."""
        self.finalized_view = config.floor_view
        self.finalized_digest = config.genesis
        self._retry = config.retry_ms if config.retry_ms is not None else config.delta_ms
        self._views: dict[int, _View] = {}
        self._pending_final: Finalization | None = None
        self._fetch_at: dict[int, int] = {}
        self._now = 0
        self._out: list[Output] = []
        self._start_view = config.floor_view + 1
        self._entered = 0
        self._last_vote_view = [0] * self.n
        """Per validator, the highest view of a vote received from it (own: every view we vote in)."""
        self._late_checked = [0] * self.n
        """Per validator, the view we were in when we last checked a late vote of it (one check per view)."""
        self._grace_from = config.floor_view
        self._vote_above = config.vote_above_view
        self._cert_muted: dict[int, int] = {}
        """Peers that sent a certificate that does not verify → until when their certificates are ignored."""
        """No leader counts as inactive before ``skip_timeout`` views past this one (start, or a synced jump)."""
        if config.floor_seed is not None:
            self._state(config.floor_view).seed = bytes(config.floor_seed)
        for vote in journal:
            self._restore(vote)

    # -------------------------------------------------------------------------------- public API

    def start(self, now: int) -> list[Output]:
        """Enter the first view (the one after the floor, or the highest journaled one).

        Journaled votes are first re-assembled into the certificates they make on their own (with one
        validator, a journaled notarize or finalize is a quorum): a restart between voting and committing
        then finishes that view instead of waiting for its timeout."""
        self._now = now
        for view in sorted(w for w in self._views if w > self.finalized_view):
            self._try_certify(self._views[view])
        self._enter(self._start_view)
        return self._flush()

    def receive(self, sender: int, message: Message, now: int) -> list[Output]:
        """Handle a message from peer ``sender`` (authenticated by the transport)."""
        self._now = now
        if not 0 <= sender < self.n or sender == self.cfg.me:
            return []
        if isinstance(message, Fetch):
            self._answer_fetch(sender, message)
        elif isinstance(message, Notarize | Nullify | Finalize):
            self._on_vote(sender, message)
        else:
            self._on_certificate(sender, message)
        return self._flush()

    def tick(self, now: int) -> list[Output]:
        """Fire the timers that are due at ``now``."""
        self._now = now
        v = self._views.get(self.view)
        if v is not None and not self._ended(v):
            due = (v.leader_deadline is not None and now >= v.leader_deadline) or \
                  (v.advance_deadline is not None and now >= v.advance_deadline)
            if due and not v.timed_out:
                self._timeout(v)
            elif v.timed_out and v.retry_at is not None and now >= v.retry_at:
                self._rebroadcast(v)
                v.retry_at = now + self._retry
        self._retry_fetches()
        return self._flush()

    def next_deadline(self) -> int | None:
        """When :meth:`tick` next has something to do (None: nothing armed)."""
        v = self._views.get(self.view)
        times: list[int] = []
        if v is not None and not self._ended(v):
            if not v.timed_out:
                times += [t for t in (v.leader_deadline, v.advance_deadline) if t is not None]
            elif v.retry_at is not None:
                times.append(v.retry_at)
        if self._fetch_at:
            times.append(min(self._fetch_at.values()) + self._retry)
        return min(times) if times else None

    def propose(self, round_: Round, payload: bytes, now: int) -> list[Output]:
        """The host's block for the :class:`ProposalWanted` of ``round_`` (ignored if the view moved on)."""
        self._now = now
        v = self._views.get(round_.view)
        if round_.epoch != self.epoch or v is None or round_.view != self.view or v.leader != self.cfg.me \
                or v.proposal is not None or v.my_nullify is not None or v.my_notarize is not None:
            return []
        if len(payload) != DIGEST_LEN:
            raise ValueError("payload must be a 32-byte digest")
        parent = self._parent_for(round_.view)
        if parent is None:
            return []
        p = Proposal(round_, parent[0], parent[1], bytes(payload))
        v.proposal, v.verified_ok, v.leader_deadline = p, True, None
        self._notarize(v, p)
        return self._flush()

    def verified(self, proposal: Proposal, ok: bool, now: int) -> list[Output]:
        """The host's verdict on a :class:`VerifyBlock`."""
        self._now = now
        v = self._views.get(proposal.round.view)
        if v is None or v.proposal != proposal or proposal.round.epoch != self.epoch:
            return []
        if ok:
            v.verified_ok = True
            if proposal.round.view == self.view and not self._ended(v):
                self._notarize(v, proposal)
        elif proposal.round.view == self.view and not self._ended(v):
            self._nullify(v)
        return self._flush()

    def advance_floor(self, view: int, digest: bytes, seed: bytes, now: int) -> list[Output]:
        """The host finalized the block ``digest`` of ``view`` by other means (a synced run of blocks ending in
        a verified finalization certificate): adopt it as the finalized tip and, if behind, enter the view
        after it. Ignored unless it is above the current finalized view."""
        self._now = now
        if view <= self.finalized_view:
            return []
        self.finalized_view, self.finalized_digest = view, bytes(digest)
        self._grace_from = max(self._grace_from, view)  # we were not listening: nobody's silence is known
        v = self._state(view)
        if v.seed is None:
            v.seed = bytes(seed)
        if self._pending_final is not None and self._pending_final.round.view <= view:
            self._pending_final = None
        self._set_leader_if_known(view + 1)
        if self.view <= view:
            self._enter(view + 1)
        self._prune()
        self._finalize_chain()
        return self._flush()

    def allow_votes_above(self, view: int) -> None:
        """Sign votes again, for views above ``view`` only (ends the abstention of :attr:`Config.vote_above_view`;
        a lower ``view`` than the current limit also lowers it)."""
        self._vote_above = view

    @property
    def votes_above(self) -> int:
        """No own vote is signed at or below this view (:attr:`Config.vote_above_view`)."""
        return self._vote_above

    def own_votes(self) -> list[Vote]:
        """This validator's votes the engine still holds in views above its finalized one. Not what the journal
        keeps: a restart resumes from the committed head, which may be below the finalized view, so the host
        compacts its journal by the committed head's view (:meth:`VoteJournal.compact`)."""
        out: list[Vote] = []
        for view in sorted(self._views):
            if view <= self.finalized_view:
                continue
            s = self._views[view]
            out += [x for x in (s.my_notarize, s.my_nullify, s.my_finalize) if x is not None]
        return out

    def leader_of(self, view: int) -> int | None:
        """The leader elected for ``view`` (None while unknown)."""
        v = self._views.get(view)
        return None if v is None else v.leader

    def certificates(self, view: int) -> list[Certificate]:
        """The certificates held for ``view`` (what a :class:`Fetch` of it is answered with)."""
        v = self._views.get(view)
        if v is None:
            return []
        return [c for c in (v.finalization, v.notarization, v.nullification) if c is not None]

    # -------------------------------------------------------------------------------- helpers

    def _flush(self) -> list[Output]:
        out, self._out = self._out, []
        return out

    def _emit(self, o: Output) -> None:
        self._out.append(o)

    def _state(self, view: int) -> _View:
        v = self._views.get(view)
        if v is None:
            v = self._views[view] = _View(Round(self.epoch, view))
        return v

    def _ended(self, v: _View) -> bool:
        return v.notarization is not None or v.nullification is not None or v.finalization is not None

    def _restore(self, vote: Vote) -> None:
        """Take back one journaled own vote. Refuses (:class:`JournalRejected`) what this engine would never have
        signed: two different votes of one kind in a view, ``nullify`` with ``finalize``, another signer or
        epoch. An exact repeat of a vote is harmless and kept once."""
        view = vote.round.view
        if vote.round.epoch != self.epoch or vote.signer != self.cfg.me:
            raise JournalRejected(view, f"a vote of validator {vote.signer} in epoch {vote.round.epoch} (this is "
                                        f"validator {self.cfg.me} in epoch {self.epoch})")
        if view <= self.finalized_view:
            return
        v = self._state(view)
        if isinstance(vote, Notarize):
            if v.my_notarize is not None and v.my_notarize != vote:
                raise JournalRejected(view, "two different notarize votes")
            v.my_notarize = vote
            v.notarizes[vote.signer] = vote
        elif isinstance(vote, Nullify):
            if v.my_nullify is not None and v.my_nullify != vote:
                raise JournalRejected(view, "two different nullify votes")
            v.my_nullify = vote
            v.timed_out = True
            v.nullifies[vote.signer] = vote
        else:
            if v.my_finalize is not None and v.my_finalize != vote:
                raise JournalRejected(view, "two different finalize votes")
            v.my_finalize = vote
            v.finalizes[vote.signer] = vote
        if v.my_nullify is not None and v.my_finalize is not None:
            raise JournalRejected(view, "nullify and finalize votes")
        self.view = max(self.view, view)
        self._start_view = max(self._start_view, view)

    # -------------------------------------------------------------------------------- views

    def _enter(self, view: int) -> None:
        if view <= self._entered:
            return
        if view > self._entered + 1:  # a jump: we did not hear the views we skipped, so silence proves nothing
            self._grace_from = max(self._grace_from, view - 1)
        self._entered = view
        self.view = view
        v = self._state(view)
        if v.leader is None:
            prev = self._views.get(view - 1)
            v.leader = elect(self.cfg.election, v.round, self.n, prev.seed if prev else None)
        if not self._ended(v):
            if v.my_nullify is None:
                wait = 0 if self._presumed_down(v.leader, view) else self.cfg.leader_timeout_ms
                v.leader_deadline = self._now + wait if v.proposal is None else None
                v.advance_deadline = self._now + self.cfg.advance_timeout_ms
            else:  # restarted after our own nullify: keep rebroadcasting it
                v.retry_at = self._now
        self._prune()
        if self._ended(v):  # we already hold a certificate of the view we enter: go on
            self._advance_from(v)
            return
        self._try_propose(v)
        self._check_leader_vote(v)

    def _presumed_down(self, leader: int | None, view: int) -> bool:
        """True when ``leader`` (not us) has sent no vote in the last ``skip_timeout`` views."""
        k = self.cfg.skip_timeout
        if k <= 0 or leader is None or leader == self.cfg.me:
            return False
        return view - max(self._last_vote_view[leader], self._grace_from) > k

    def _advance_from(self, v: _View) -> None:
        if v.round.view >= self.view:
            self._enter(v.round.view + 1)

    def _prune(self) -> None:
        floor = self.finalized_view - self.cfg.retain
        for view in [w for w in self._views if w < floor]:
            del self._views[view]
        for view in [w for w in self._fetch_at if w <= self.finalized_view]:
            del self._fetch_at[view]

    def _set_leader_if_known(self, view: int) -> None:
        v = self._views.get(view)
        if v is not None and v.leader is None:
            prev = self._views.get(view - 1)
            v.leader = elect(self.cfg.election, v.round, self.n, prev.seed if prev else None)

    # -------------------------------------------------------------------------------- proposals

    def _parent_for(self, view: int) -> tuple[int, bytes] | None:
        """Highest certified parent for a proposal at ``view`` with nullifications for every skipped view;
        None (and fetch) when a certificate is missing."""
        missing: list[int] = []
        w = view - 1
        while w > self.finalized_view:
            s = self._views.get(w)
            cert = None if s is None else (s.finalization or s.notarization)
            if cert is not None:
                if missing:
                    self._fetch(missing)
                    return None
                return w, cert.proposal.payload
            if s is None or s.nullification is None:
                missing.append(w)
            w -= 1
        if missing:
            self._fetch(missing)
            return None
        return self.finalized_view, self.finalized_digest

    def _justified(self, p: Proposal) -> bool | None:
        """True: ``p``'s parent is certified and skipped views nullified; False: ``p`` contradicts what we
        hold; None: a certificate is missing (fetched)."""
        if p.parent_view < self.finalized_view:
            return False
        if p.parent_view == self.finalized_view:
            if p.parent != self.finalized_digest:
                return False
        else:
            s = self._views.get(p.parent_view)
            cert = None if s is None else (s.finalization or s.notarization)
            if cert is None:
                self._fetch([p.parent_view])
                return None
            if cert.proposal.payload != p.parent:
                return False
        missing = [w for w in range(p.parent_view + 1, p.round.view)
                   if (s := self._views.get(w)) is None or s.nullification is None]
        if missing:
            self._fetch(missing)
            return None
        return True

    def _try_propose(self, v: _View) -> None:
        if v.leader != self.cfg.me or v.proposal is not None or v.proposal_requested or v.my_nullify is not None \
                or v.round.view != self.view or self._ended(v):
            return
        if v.round.view <= self._vote_above:  # abstaining: a proposal is a notarize it may not sign, so no build
            return
        if v.my_notarize is not None:  # restarted after proposing: our journaled notarize is the proposal
            v.proposal = v.my_notarize.proposal
            return
        parent = self._parent_for(v.round.view)
        if parent is None:
            return
        v.proposal_requested = True
        self._emit(ProposalWanted(v.round, parent[0], parent[1]))

    def _check_leader_vote(self, v: _View) -> None:
        """Adopt the leader's notarize in the current view as its proposal, then ask for verification."""
        if v.round.view != self.view or self._ended(v) or v.leader is None:
            return
        if v.proposal is None:
            vote = v.notarizes.get(v.leader)
            if vote is None or v.leader == self.cfg.me:
                return
            if not self.scheme.verify_pair(vote.signer, notarize_message(vote.proposal), vote.signature,
                                           seed_message(vote.round), vote.seed):
                self._bad(v, vote.signer, "bad signature on proposal")
                return
            v.proposal = vote.proposal
            v.leader_deadline = None
        p = v.proposal
        if v.verify_requested or v.my_notarize is not None or v.my_nullify is not None:
            return
        ok = self._justified(p)
        if ok is None:
            return
        if not ok:
            self._nullify(v)
            return
        v.verify_requested = True
        self._emit(VerifyBlock(p))

    # -------------------------------------------------------------------------------- own votes

    def _notarize(self, v: _View, p: Proposal) -> None:
        if v.my_notarize is not None or v.my_nullify is not None or v.round.view <= self._vote_above:
            return
        vote = Notarize(p, self.cfg.me, self.scheme.sign(notarize_message(p)), self.scheme.sign(seed_message(p.round)))
        v.my_notarize = vote
        self._emit(Journal(vote))
        self._emit(Broadcast(vote))
        v.notarizes[self.cfg.me] = vote
        self._try_certify(v)

    def _nullify(self, v: _View) -> None:
        v.timed_out = True
        v.retry_at = self._now + self._retry
        if v.my_nullify is not None or v.my_finalize is not None or v.round.view <= self._vote_above:
            return
        vote = Nullify(v.round, self.cfg.me, self.scheme.sign(nullify_message(v.round)),
                       self.scheme.sign(seed_message(v.round)))
        v.my_nullify = vote
        self._emit(Journal(vote))
        self._emit(Broadcast(vote))
        v.nullifies[self.cfg.me] = vote
        self._try_certify(v)

    def _finalize(self, v: _View, p: Proposal) -> None:
        if v.my_finalize is not None or v.my_nullify is not None or v.round.view <= self.finalized_view \
                or v.round.view <= self._vote_above:
            return
        vote = Finalize(p, self.cfg.me, self.scheme.sign(finalize_message(p)), self.scheme.sign(seed_message(p.round)))
        v.my_finalize = vote
        self._emit(Journal(vote))
        self._emit(Broadcast(vote))
        v.finalizes[self.cfg.me] = vote
        self._try_certify(v)

    def _timeout(self, v: _View) -> None:
        self._nullify(v)

    def _rebroadcast(self, v: _View) -> None:
        prev = self._views.get(v.round.view - 1)
        if prev is not None:
            cert = prev.finalization or prev.nullification or prev.notarization
            if cert is not None:
                self._emit(Broadcast(cert))
            if prev.my_finalize is not None and prev.finalization is None:
                self._emit(Broadcast(prev.my_finalize))
        for vote in (v.my_notarize, v.my_nullify):
            if vote is not None:
                self._emit(Broadcast(vote))

    # -------------------------------------------------------------------------------- incoming votes

    def _bad(self, v: _View, signer: int, reason: str) -> None:
        v.bad.add(signer)
        if signer != self.cfg.me:
            v.notarizes.pop(signer, None)
            v.nullifies.pop(signer, None)
            v.finalizes.pop(signer, None)
        self._emit(Faulty(signer, v.round, reason))

    def _conflict(self, v: _View, sender: int, seen: Vote, vote: Vote, reason: str) -> None:
        """Two different votes of one kind from ``sender`` in one view. Both signatures are checked, once per
        (sender, view, kind): only then is it transferable evidence; a badly signed second vote is reported as such
        (it proves nothing about the signer's key, though the authenticated sender is faulty either way). Every
        later differing vote of that kind from ``sender`` in the view is dropped unverified — otherwise each one
        would cost two pairing checks while the attacker spends one signature."""
        key = (sender, type(vote).__name__)
        if key in v.conflicted:
            return
        v.conflicted.add(key)
        if not self.scheme.verify(sender, vote.vote_message(), vote.signature):
            self._emit(Faulty(sender, vote.round, f"bad {type(vote).__name__.lower()} signature"))
        elif not self.scheme.verify(sender, seen.vote_message(), seen.signature):
            self._emit(Faulty(sender, vote.round, f"bad {type(seen).__name__.lower()} signature"))
        else:
            self._emit(Faulty(sender, vote.round, reason, (seen, vote)))

    def _on_vote(self, sender: int, vote: Vote) -> None:
        if vote.signer != sender:
            self._emit(Faulty(sender, vote.round, "vote signed for another validator"))
            return
        r = vote.round
        if r.epoch != self.epoch or r.view > self.view + self.cfg.window:
            return
        if r.view <= self.finalized_view:
            self._late_activity(sender, vote)
            return
        if r.view > self._last_vote_view[sender]:
            self._last_vote_view[sender] = r.view
        v = self._state(r.view)
        if sender in v.bad:
            return
        if isinstance(vote, Notarize):
            seen = v.notarizes.get(sender)
            if seen is not None:
                if seen != vote:
                    self._conflict(v, sender, seen, vote, "conflicting notarize votes")
                return
            v.notarizes[sender] = vote
            if sender == v.leader and v.proposal is None:
                self._check_leader_vote(v)
        elif isinstance(vote, Nullify):
            if sender in v.nullifies:
                return
            v.nullifies[sender] = vote
            if sender == v.leader and r.view == self.view and not self._ended(v) and v.my_nullify is None \
                    and self.scheme.verify(sender, nullify_message(r), vote.signature):
                self._nullify(v)  # the leader gave up its own view: no need to wait for the timeout
        else:
            seen_f = v.finalizes.get(sender)
            if seen_f is not None:
                if seen_f != vote:
                    self._conflict(v, sender, seen_f, vote, "conflicting finalize votes")
                return
            v.finalizes[sender] = vote
        self._try_certify(v)

    def _late_activity(self, sender: int, vote: Vote) -> None:
        """A vote for a view already finalized here is not processed, but it shows its signer alive: a validator
        whose votes reach us after the others finalized would otherwise be presumed down and lose its leader
        views although it proposes. It counts only once its own partial verifies (the authenticated transport
        names the sender, but activity is never taken from an unchecked signature; a bad one is reported as
        :class:`Faulty`), and the check is paid only
        when it can matter and at most once per signer per view entered, so late junk costs at most ``n − 1``
        checks per view:

        - the vote must raise the signer's last known activity, and keep it active for the next view;
        - the signer's activity must be at least half of ``skip_timeout`` old: a slow but live validator sends a
          late vote every view, so a refresh every ``skip_timeout / 2`` views keeps it active at a fraction of a
          check per view (late votes trail by a view or two, well inside the other half).
        """
        k = self.cfg.skip_timeout
        seen = max(self._last_vote_view[sender], self._grace_from)
        view = vote.round.view
        if k <= 0 or view <= seen or view + k <= self.view or self.view - seen < k // 2:
            return
        if self._late_checked[sender] >= self.view:
            return
        self._late_checked[sender] = self.view
        if self.scheme.verify(sender, vote.vote_message(), vote.signature):
            self._last_vote_view[sender] = view
        else:  # the authenticated sender signed badly: faulty, reported (once per view at most, by the budget)
            self._emit(Faulty(sender, vote.round, f"bad late {type(vote).__name__.lower()} signature"))

    def _try_certify(self, v: _View) -> None:
        """Assemble whichever certificates the collected votes allow (verifying partials lazily, at quorum)."""
        # below a quorum of votes of a kind no certificate can form: skip the grouping, which costs O(votes) per
        # vote and made a view quadratic in n (at n = 100 the largest Python cost of the view)
        if v.finalization is None and len(v.finalizes) >= self.q:
            for p, votes in _group(v.finalizes.values()):
                fin = self._assemble(v, votes, finalize_message(p), "finalize")
                if fin is not None:
                    self._apply(Finalization(p, fin[0], fin[1]))
                    break
        if v.notarization is None and len(v.notarizes) >= self.q:
            for p, votes in _group(v.notarizes.values()):
                nz = self._assemble(v, votes, notarize_message(p), "notarize")
                if nz is not None:
                    self._apply(Notarization(p, nz[0], nz[1]))
                    break
        if v.nullification is None and len(v.nullifies) >= self.q:
            nl = self._assemble(v, list(v.nullifies.values()), nullify_message(v.round), "nullify")
            if nl is not None:
                self._apply(Nullification(v.round, nl[0], nl[1]))

    def _assemble(self, v: _View, votes: list[Vote], message: bytes, what: str) -> tuple[bytes, bytes] | None:
        if len(votes) >= self.q:  # optimistic: both certificates verify under the group key, no partial checked
            pair = self.scheme.recover_pair(message, [(x.signer, x.signature) for x in votes], seed_message(v.round),
                                            [(x.signer, x.seed) for x in votes])
            if pair is not None:
                if v.seed is not None and pair[1] != v.seed:
                    raise ConsensusFault(f"two different seeds recovered for view {v.round.view}")
                return pair
        while len(votes) >= self.q:
            sig, bad = self.scheme.recover(message, [(x.signer, x.signature) for x in votes])
            seed: bytes | None = None
            bad_seed: frozenset[int] = frozenset()
            if sig is not None:  # the seed partials are checked too (one batch), even when the seed is known
                seed, bad_seed = self.scheme.recover(seed_message(v.round), [(x.signer, x.seed) for x in votes
                                                                              if x.signer not in bad])
                if seed is not None and v.seed is not None and seed != v.seed:
                    raise ConsensusFault(f"two different seeds recovered for view {v.round.view}")
            bad = bad | bad_seed
            if sig is not None and seed is not None and not bad_seed:
                for signer in sorted(bad):
                    self._bad(v, signer, f"bad {what} signature")
                return sig, seed
            if not bad:
                return None
            for signer in sorted(bad):
                self._bad(v, signer, f"bad {what} signature")
            votes = [x for x in votes if x.signer not in bad]
        return None

    # -------------------------------------------------------------------------------- certificates

    def _on_certificate(self, sender: int, cert: Certificate) -> None:
        """Admit a certificate at any higher view once it verifies: only a quorum makes one, so a verified
        certificate is never junk. Nothing is kept before it verifies (a flood of junk creates no per-view
        state), and one that does not verify proves its sender faulty (honest validators relay only verified
        certificates): reported, and that sender's certificates are ignored for ``retry`` so a flood costs at
        most one pairing check per retry period."""
        r = cert.round
        if r.epoch != self.epoch or r.view <= self.finalized_view:
            return
        if self._now < self._cert_muted.get(sender, -1):
            return
        v = self._views.get(r.view)
        seed = None if v is None else v.seed
        if v is not None:
            have = {Notarization: v.notarization, Nullification: v.nullification,
                    Finalization: v.finalization}[type(cert)]
            if have is not None:
                return
        if seed is not None and cert.seed != seed:
            self._bad_certificate(sender, r, "certificate seed differs from the round's seed")
        elif not self.scheme.verify_certificate(cert.vote_message(), cert.signature):
            self._bad_certificate(sender, r, "bad certificate signature")
        elif seed is None and not self.scheme.verify_certificate(seed_message(r), cert.seed):
            self._bad_certificate(sender, r, "bad certificate seed signature")
        else:
            self._apply(cert)

    def _bad_certificate(self, sender: int, round_: Round, reason: str) -> None:
        if len(self._cert_muted) >= self.n:  # bounded by the validator count; stale entries go first
            self._cert_muted = {k: t for k, t in self._cert_muted.items() if t > self._now}
        self._cert_muted[sender] = self._now + self._retry
        self._emit(Faulty(sender, round_, reason))

    def _apply(self, cert: Certificate) -> None:
        """Record a verified certificate (assembled here or received) and act on it."""
        view = cert.round.view
        v = self._state(view)
        if v.seed is None:
            v.seed = cert.seed
            self._emit(SeedRevealed(cert.round, cert.seed))
            self._set_leader_if_known(view + 1)
        if isinstance(cert, Notarization):
            if v.notarization is not None:
                return
            other = v.finalization
            if other is not None and other.proposal != cert.proposal:
                raise ConsensusFault(f"notarization and finalization of different blocks in view {view}")
            v.notarization = cert
            self._emit(Notarized(cert))
            self._emit(Broadcast(cert))
            self._finalize(v, cert.proposal)
        elif isinstance(cert, Nullification):
            if v.nullification is not None:
                return
            v.nullification = cert
            self._emit(Nullified(cert))
            self._emit(Broadcast(cert))
        else:
            if v.finalization is not None:
                return
            if v.notarization is not None and v.notarization.proposal != cert.proposal:
                raise ConsensusFault(f"notarization and finalization of different blocks in view {view}")
            v.finalization = cert
            self._emit(Broadcast(cert))
            if self._pending_final is None or self._pending_final.round.view < view:
                self._pending_final = cert
        self._advance_from(v)
        self._finalize_chain()
        cur = self._views.get(self.view)
        if cur is not None:  # a new certificate may complete what the current view was waiting for
            self._try_propose(cur)
            self._check_leader_vote(cur)

    def _finalize_chain(self) -> None:
        fin = self._pending_final
        if fin is None or fin.round.view <= self.finalized_view:
            self._pending_final = None
            return
        chain = [fin.proposal]
        p = fin.proposal
        while p.parent_view > self.finalized_view:
            s = self._views.get(p.parent_view)
            cert = None if s is None else (s.finalization or s.notarization)
            if cert is None:
                self._fetch([p.parent_view])
                return
            if cert.proposal.payload != p.parent:
                raise ConsensusFault(f"finalized block's parent at view {p.parent_view} is not the certified one")
            p = cert.proposal
            chain.append(p)
        if p.parent_view != self.finalized_view or p.parent != self.finalized_digest:
            raise ConsensusFault(f"finalized block at view {fin.round.view} does not extend the finalized tip")
        for q in reversed(chain):
            s = self._views[q.round.view]
            assert s.seed is not None
            self._emit(Finalized(q, fin, s.seed))
        self.finalized_view, self.finalized_digest = fin.round.view, fin.proposal.payload
        self._pending_final = None
        self._prune()

    # -------------------------------------------------------------------------------- fetch

    def _fetch(self, views: Sequence[int]) -> None:
        due = sorted(w for w in set(views) if w > self.finalized_view and
                     (w not in self._fetch_at or self._now >= self._fetch_at[w] + self._retry))
        for w in due:
            self._fetch_at[w] = self._now
        for i in range(0, len(due), MAX_FETCH_VIEWS):
            self._emit(Broadcast(Fetch(self.epoch, tuple(due[i:i + MAX_FETCH_VIEWS]))))

    def _retry_fetches(self) -> None:
        stale = [w for w, at in self._fetch_at.items() if self._now >= at + self._retry]
        if not stale:
            return
        for w in stale:
            del self._fetch_at[w]
        # re-derive what is still missing rather than re-asking blindly
        cur = self._views.get(self.view)
        if cur is not None and not self._ended(cur):
            if cur.leader == self.cfg.me and not cur.proposal_requested:
                self._try_propose(cur)
            elif cur.proposal is not None and not cur.verify_requested:
                self._check_leader_vote(cur)
        self._finalize_chain()

    def _answer_fetch(self, sender: int, req: Fetch) -> None:
        if req.epoch != self.epoch:
            return
        for view in req.views:
            for cert in self.certificates(view):
                self._emit(Send(sender, cert))


def _group(votes: Iterable[Notarize | Finalize]) -> list[tuple[Proposal, list[Vote]]]:
    by: dict[Proposal, list[Vote]] = {}
    for vote in votes:
        by.setdefault(vote.proposal, []).append(vote)
    return sorted(by.items(), key=lambda kv: -len(kv[1]))
