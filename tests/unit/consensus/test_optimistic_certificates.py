"""Optimistic certificate assembly with the real threshold scheme (``cowboy_node/consensus/simplex/scheme.py``,
``cowboy_node/consensus/pair_check.py``): a quorum's partials are interpolated without checking them, and the
certificate and seed are accepted only when both verify under the group key (one pairing product); any bad
partial sends the engine back to checking them one by one, which names the culprit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from py_arkworks_bls12381 import G1Point, Scalar

from cowboy_node.consensus.pair_check import check_two
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Config, Engine, Faulty, Finalized, Notarized, Output
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.simplex.types import (
    Finalize,
    Notarize,
    Proposal,
    finalize_message,
    notarize_message,
    seed_message,
)
from cowboy_node.crypto import bls, threshold
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS

N, Q = 4, 3
DEALING = threshold.deal(0x1234_5678_9ABC, N, Q, b"optimistic-certificates-test-seed")
P = Proposal(Round(0, 1), 0, GENESIS, b"\x22" * 32)
M, S = notarize_message(P), seed_message(P.round)


def _scheme(me: int | None) -> ThresholdScheme:
    return ThresholdScheme.from_dealing(DEALING, me)


def _partial(i: int, message: bytes) -> bytes:
    return threshold.partial_sign(DEALING.shares[i], message)


def _honest(message: bytes) -> bytes:
    return threshold.recover([(i + 1, _partial(i, message)) for i in range(Q)], Q)


def test_a_good_quorum_gives_the_group_signature_and_seed() -> None:
    got = _scheme(None).recover_pair(M, [(i, _partial(i, M)) for i in range(N)], S,
                                     [(i, _partial(i, S)) for i in range(N)])
    assert got == (_honest(M), _honest(S))
    assert bls.verify(DEALING.group_public_key, M, got[0]) and bls.verify(DEALING.group_public_key, S, got[1])


def test_one_bad_partial_in_the_quorum_is_not_accepted() -> None:
    s = _scheme(None)
    sigs = [(i, _partial(i, M)) for i in range(Q)]
    seeds = [(i, _partial(i, S)) for i in range(Q)]
    bad_sig = [(0, _partial(0, b"another message")), *sigs[1:]]
    bad_seed = [*seeds[:2], (2, _partial(1, S))]  # signer 2's seed partial made with 1's share
    assert s.recover_pair(M, bad_sig, S, seeds) is None
    assert s.recover_pair(M, sigs, S, bad_seed) is None
    assert s.recover_pair(M, [*sigs[:2], (2, b"\x00" * 48)], S, seeds) is None  # undecodable: None, no raise
    assert s.recover_pair(M, sigs[:2], S, seeds[:2]) is None  # below the quorum


def test_partials_whose_errors_cancel_still_give_only_the_true_signature() -> None:
    # Two faulty signers can shift their partials so the interpolation errors cancel; the result is then the
    # true group signature (the only value that verifies), never a forged one.
    lam1, lam2 = Scalar(3), Scalar(bls.R - 3)  # Lagrange λ at 0 of share indices 1 and 2 among {1, 2, 3}: 3, −3
    d = G1Point.hash_to_curve(b"noise", bls.DST_G1_SIG)
    p0 = bls.decode_g1(_partial(0, M)) + d * lam2
    p1 = bls.decode_g1(_partial(1, M)) - d * lam1
    shifted = [(0, bytes(p0.to_compressed_bytes())), (1, bytes(p1.to_compressed_bytes())), (2, _partial(2, M))]
    got = _scheme(None).recover_pair(M, shifted, S, [(i, _partial(i, S)) for i in range(Q)])
    assert got == (_honest(M), _honest(S))


def test_check_two_needs_both_signatures_good() -> None:
    pk = bls.decode_g2(DEALING.share_public_keys[1])
    good_m, good_s = bls.decode_g1(_partial(1, M)), bls.decode_g1(_partial(1, S))
    assert check_two(pk, M, good_m, S, good_s)
    assert not check_two(pk, M, good_m, S, bls.decode_g1(_partial(2, S)))
    assert not check_two(pk, M, bls.decode_g1(_partial(1, S)), S, bls.decode_g1(_partial(1, M)))  # swapped
    s = _scheme(None)
    assert s.verify_pair(1, M, _partial(1, M), S, _partial(1, S))
    assert not s.verify_pair(1, M, _partial(1, M), S, _partial(0, S))
    assert not s.verify_pair(1, M, b"\x01" * 48, S, _partial(1, S))
    assert not s.verify_pair(9, M, _partial(1, M), S, _partial(1, S))


class _Counting:
    """The threshold scheme, counting the checked recoveries (partials verified one batch at a time)."""

    def __init__(self, inner: ThresholdScheme) -> None:
        self.inner = inner
        self.checked = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        self.checked += 1
        return self.inner.recover(message, partials)


def _of(outs: list[Output], kind: type) -> list[Output]:
    return [o for o in outs if isinstance(o, kind)]


def _engine() -> tuple[Engine, _Counting]:
    scheme = _Counting(_scheme(0))
    e = Engine(Config(me=0, delta_ms=100, genesis=GENESIS, election=Election.ROUND_ROBIN), scheme)
    e.start(0)
    return e, scheme


def _vote(cls: type, i: int, p: Proposal) -> Any:
    msg = notarize_message(p) if cls is Notarize else finalize_message(p)
    return cls(p, i, _partial(i, msg), _partial(i, seed_message(p.round)))


def test_engine_assembles_good_quorums_without_checking_partials() -> None:
    e, scheme = _engine()
    p = P
    e.receive(1, _vote(Notarize, 1, p), 1)  # view 1's leader is 1 (round robin)
    e.verified(p, True, 2)
    outs = e.receive(2, _vote(Notarize, 2, p), 3)
    (nz,) = _of(outs, Notarized)
    assert isinstance(nz, Notarized) and nz.certificate.signature == _honest(notarize_message(p))
    outs = e.receive(1, _vote(Finalize, 1, p), 4) + e.receive(2, _vote(Finalize, 2, p), 5)
    (fin,) = _of(outs, Finalized)
    assert isinstance(fin, Finalized) and fin.certificate.signature == _honest(finalize_message(p))
    assert fin.seed == _honest(seed_message(p.round))
    assert scheme.checked == 0 and not _of(outs, Faulty)


def test_engine_falls_back_to_checking_and_names_a_bad_signer() -> None:
    e, scheme = _engine()
    p = P
    e.receive(1, _vote(Notarize, 1, p), 1)
    e.verified(p, True, 2)
    bad = Notarize(p, 3, _partial(2, notarize_message(p)), _partial(3, seed_message(p.round)))  # 2's share
    outs = e.receive(3, bad, 3)
    assert [(o.signer, o.reason) for o in _of(outs, Faulty)] == [(3, "bad notarize signature")]  # type: ignore
    assert not _of(outs, Notarized) and scheme.checked >= 1
    outs = e.receive(2, _vote(Notarize, 2, p), 4)
    (nz,) = _of(outs, Notarized)
    assert isinstance(nz, Notarized) and nz.certificate.signature == _honest(notarize_message(p))
