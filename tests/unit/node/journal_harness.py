"""A consensus service of validator 0 of four (``test_consensus_preverify``'s genesis) with a vote journal in a
temporary data directory, a fake peer layer, and votes/certificates of the other three signed for it. The engine is
driven with an explicit clock (``t``), never the wall clock."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, VoteJournal, create_empty_journal
from cowboy_node.consensus.simplex.engine import Output
from cowboy_node.consensus.simplex.types import (
    Finalization,
    Finalize,
    Notarization,
    Notarize,
    Nullification,
    Nullify,
    Proposal,
    Vote,
    decode_message,
    finalize_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.consensus.sync_messages import CH_CONSENSUS
from cowboy_node.node.consensus_service import ConsensusService
from cowboy_node.types.block import Round
from tests.unit.node.test_consensus_preverify import _Net, _scheme, _service

OTHERS = (1, 2, 3)


def service(data: Path, *, journal: bool, **cfg: Any) -> tuple[ConsensusService, _Net]:
    """Validator 0 with ``data/consensus-votes.journal`` (created empty first when ``journal``)."""
    path = data / VOTE_JOURNAL_FILE
    if journal:
        create_empty_journal(path)
    return _service(0, journal=VoteJournal(path), **cfg)


def proposal(svc: ConsensusService, view: int, tag: bytes = b"") -> Proposal:
    """A proposal for ``view`` on the genesis block (its views before nullified)."""
    return Proposal(Round(0, view), 0, svc.chain.head.hash(), hashlib.sha256(b"block %d" % view + tag).digest())


def notarize(signer: int, p: Proposal) -> Notarize:
    s = _scheme(signer)
    return Notarize(p, signer, s.sign(notarize_message(p)), s.sign(seed_message(p.round)))


def nullify(signer: int, r: Round) -> Nullify:
    s = _scheme(signer)
    return Nullify(r, signer, s.sign(nullify_message(r)), s.sign(seed_message(r)))


def _recover(message: bytes, r: Round) -> tuple[bytes, bytes]:
    v = _scheme(0)
    sig, _ = v.recover(message, [(i, _scheme(i).sign(message)) for i in OTHERS])
    seed, _ = v.recover(seed_message(r), [(i, _scheme(i).sign(seed_message(r))) for i in OTHERS])
    assert sig is not None and seed is not None
    return sig, seed


def notarization(p: Proposal) -> Notarization:
    return Notarization(p, *_recover(notarize_message(p), p.round))


def finalization(p: Proposal) -> Finalization:
    return Finalization(p, *_recover(finalize_message(p), p.round))


def nullification(view: int) -> Nullification:
    r = Round(0, view)
    return Nullification(r, *_recover(nullify_message(r), r))


def own_votes_sent(net: _Net, me: int = 0) -> list[Vote]:
    """Votes of ``me`` the fake peer layer was asked to send on the consensus channel."""
    out: list[Vote] = []
    for _, channel, payload in net.sent:
        if channel == CH_CONSENSUS:
            m = decode_message(payload)
            if isinstance(m, Notarize | Nullify | Finalize) and m.signer == me:
                out.append(m)
    return out


def consensus_sent(net: _Net) -> int:
    return sum(1 for _, channel, _p in net.sent if channel == CH_CONSENSUS)


def act(svc: ConsensusService, outs: list[Output]) -> list[Output]:
    svc.voter.act(outs)
    return outs
