"""Batched partial verification with bisection (``cowboy_node/consensus/batch_verify.py``) and its use by the
threshold scheme's checked path (``ThresholdScheme.recover``) and the engine: a bad partial in a batch is found
and attributed to its signer, and a batch holding a forged partial never yields a certificate."""

from __future__ import annotations

import math
from typing import Any

import pytest
from py_arkworks_bls12381 import G1Point

from cowboy_node.consensus.batch_verify import BatchStats, bad_partials, bisect_bad
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Config, Engine, Faulty, Finalized, Notarized, Output
from cowboy_node.consensus.simplex.scheme import ThresholdScheme, quorum_size
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

N = 16
Q = quorum_size(N)
DEALING = threshold.deal(0x5EED_BA7C, N, Q, b"batch-verify-test-coefficients!!")
KEYS = dict(enumerate(bls.decode_g2(pk) for pk in DEALING.share_public_keys))
M = b"batch verify message"


def _partial(i: int, message: bytes = M) -> bytes:
    return threshold.partial_sign(DEALING.shares[i], message)


def _group(message: bytes) -> bytes:
    return threshold.recover([(i + 1, _partial(i, message)) for i in range(Q)], Q)


# ------------------------------------------------------------------------------------------------ bisection


@pytest.mark.parametrize(("k", "bad"), [(1, {0}), (64, {37}), (64, {0, 63}), (67, {5, 6, 40}), (10, set())])
def test_bisection_names_exactly_the_failing_items_in_logarithmic_checks(k: int, bad: set[int]) -> None:
    calls = []

    def check(batch: Any) -> bool:
        calls.append(len(batch))
        return not bad & set(batch)

    assert bisect_bad(list(range(k)), check) == sorted(bad)
    # one check of the whole batch, then at most two per level of the halving for each bad item — one by one
    # after a failed batch would cost k + 1
    assert len(calls) <= 1 + 2 * len(bad) * max(1, math.ceil(math.log2(k)))


def test_bisection_of_an_empty_batch_checks_nothing() -> None:
    assert bisect_bad([], lambda batch: pytest.fail("checked an empty batch")) == []


# ------------------------------------------------------------------------------------------------ real BLS


def test_a_good_batch_passes_with_one_pairing_check() -> None:
    stats = BatchStats()
    assert bad_partials(KEYS, M, [(i, _partial(i)) for i in range(N)], stats=stats) == frozenset()
    assert stats.checks == 1


def test_forged_partials_in_a_batch_are_found_and_attributed() -> None:
    partials = [(i, _partial(i)) for i in range(N)]
    partials[3] = (3, _partial(3, b"another message"))  # its own key, wrong message
    partials[9] = (9, _partial(10))  # another validator's share
    partials[12] = (12, b"\x00" * 48)  # does not decode
    partials[14] = (14, bytes(G1Point.identity().to_compressed_bytes()))  # the identity
    stats = BatchStats()
    assert bad_partials(KEYS, M, partials, stats=stats) == {3, 9, 12, 14}
    assert stats.undecodable == 2
    assert stats.checks < N  # bisected, not one by one


def test_errors_that_cancel_in_a_plain_sum_are_still_caught() -> None:
    # signer 2 adds D to its partial and signer 5 subtracts it: their plain sum (every coefficient 1) is that of
    # two good partials, so only the random coefficients of the combination expose them
    d = G1Point.hash_to_curve(b"noise", bls.DST_G1_SIG)
    partials = [(i, _partial(i)) for i in range(N)]
    partials[2] = (2, bytes((bls.decode_g1(partials[2][1]) + d).to_compressed_bytes()))
    partials[5] = (5, bytes((bls.decode_g1(partials[5][1]) - d).to_compressed_bytes()))
    assert bad_partials(KEYS, M, partials) == {2, 5}


# ------------------------------------------------------------------------------------------------ the scheme


def test_recover_names_a_forged_partial_in_the_batch_and_recovers_from_good_ones_only() -> None:
    partials = [(i, _partial(i)) for i in range(Q + 1)]
    partials[4] = (4, _partial(4, b"forged"))
    sig, bad = ThresholdScheme.from_dealing(DEALING, None).recover(M, partials)
    assert bad == {4}
    assert sig == _group(M) and bls.verify(DEALING.group_public_key, M, sig)


def test_a_quorum_holding_a_forged_partial_never_yields_a_certificate() -> None:
    partials = [(i, _partial(i)) for i in range(Q)]
    partials[Q - 1] = (Q - 1, _partial(0))  # a copy of another signer's partial
    scheme = ThresholdScheme.from_dealing(DEALING, None)
    sig, bad = scheme.recover(M, partials)
    assert sig is None and bad == {Q - 1}
    seeds = [(i, _partial(i, b"seed")) for i in range(Q)]
    assert scheme.recover_pair(M, partials, b"seed", seeds) is None


# ------------------------------------------------------------------------------------------------ the engine


def _of(outs: list[Output], kind: type) -> list[Any]:
    return [o for o in outs if isinstance(o, kind)]


def _engine() -> Engine:
    e = Engine(Config(me=0, delta_ms=100, genesis=GENESIS, election=Election.ROUND_ROBIN),
               ThresholdScheme.from_dealing(DEALING, 0))
    e.start(0)
    return e


P = Proposal(Round(0, 1), 0, GENESIS, b"\x33" * 32)  # view 1: leader 1 (round robin)
SEED = seed_message(P.round)


def _vote(cls: type, i: int, sig: bytes | None = None, seed: bytes | None = None) -> Any:
    msg = notarize_message(P) if cls is Notarize else finalize_message(P)
    return cls(P, i, sig if sig is not None else _partial(i, msg), seed if seed is not None else _partial(i, SEED))


def test_engine_names_every_forger_of_a_batch_and_certifies_with_the_honest_votes() -> None:
    e = _engine()
    e.receive(1, _vote(Notarize, 1), 1)
    e.verified(P, True, 2)
    forged = {2: _vote(Notarize, 2, sig=_partial(2, b"wrong")),  # a bad signature partial
              3: _vote(Notarize, 3, seed=_partial(4, SEED))}  # a bad seed partial (signer 4's share)
    outs: list[Output] = []
    for i in range(2, Q + 2):  # the first quorum holds both forgers; two more honest votes complete it
        outs += e.receive(i, forged.get(i, _vote(Notarize, i)), 3 + i)
    assert sorted((f.signer, f.reason) for f in _of(outs, Faulty)) == [(2, "bad notarize signature"),
                                                                         (3, "bad notarize signature")]
    (nz,) = _of(outs, Notarized)
    assert nz.certificate.signature == _group(notarize_message(P))
    assert bls.verify(DEALING.group_public_key, notarize_message(P), nz.certificate.signature)
    assert nz.certificate.seed == _group(SEED)


def test_engine_makes_no_certificate_from_a_quorum_that_holds_a_forged_partial() -> None:
    e = _engine()
    e.receive(1, _vote(Notarize, 1), 1)
    e.verified(P, True, 2)
    outs: list[Output] = []
    for i in range(2, Q):  # with its own vote and the leader's: exactly a quorum, one of them forged
        outs += e.receive(i, _vote(Notarize, i, sig=_partial(i, b"wrong")) if i == 7 else _vote(Notarize, i), 3)
    assert not _of(outs, Notarized)
    assert [(f.signer, f.reason) for f in _of(outs, Faulty)] == [(7, "bad notarize signature")]
    outs = e.receive(Q, _vote(Notarize, Q), 4)  # one more honest vote: a quorum of good partials
    (nz,) = _of(outs, Notarized)
    assert nz.certificate.signature == _group(notarize_message(P))


def test_engine_finalizes_with_the_known_seed_and_names_a_forged_finalize_signature() -> None:
    e = _engine()
    e.receive(1, _vote(Notarize, 1), 1)
    e.verified(P, True, 2)
    for i in range(2, Q):
        e.receive(i, _vote(Notarize, i), 3)
    outs: list[Output] = []
    for i in range(1, Q + 1):
        vote = _vote(Finalize, i, sig=_partial(i, b"wrong")) if i == 5 else _vote(Finalize, i)
        outs += e.receive(i, vote, 4)
    assert [(f.signer, f.reason) for f in _of(outs, Faulty)] == [(5, "bad finalize signature")]
    (fin,) = _of(outs, Finalized)
    assert fin.certificate.signature == _group(finalize_message(P)) and fin.seed == _group(SEED)


def test_scheme_reuses_a_verified_seed_only_for_its_own_round() -> None:
    scheme = ThresholdScheme.from_dealing(DEALING, None)
    sigs = [(i, _partial(i, notarize_message(P))) for i in range(Q)]
    seeds = [(i, _partial(i, SEED)) for i in range(Q)]
    assert scheme.recover_pair(notarize_message(P), sigs, SEED, seeds) == (_group(notarize_message(P)), _group(SEED))
    fin = [(i, _partial(i, finalize_message(P))) for i in range(Q)]
    junk_seeds = [(i, _partial(i, b"junk")) for i in range(Q)]
    # the round's seed is known: the finalization takes it, whatever seed partials came with the votes
    assert scheme.recover_pair(finalize_message(P), fin, SEED, junk_seeds) == (_group(finalize_message(P)),
                                                                             _group(SEED))
    other = seed_message(Round(0, 2))  # another round's seed is not known: junk seed partials fail
    assert scheme.recover_pair(finalize_message(P), fin, other, junk_seeds) is None


def test_own_partials_are_the_dealt_shares_signatures() -> None:
    scheme = ThresholdScheme.from_dealing(DEALING, 3)
    assert scheme.sign(SEED) == _partial(3, SEED) == scheme.sign(SEED)
    assert scheme.sign(M) == _partial(3, M)
