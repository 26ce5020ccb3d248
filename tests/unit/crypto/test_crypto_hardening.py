"""Strict point decoding, KeyValidate, batched verification, Feldman VSS and checked recovery."""

from __future__ import annotations

import pytest
from py_arkworks_bls12381 import G1Point
from py_ecc.optimized_bls12_381 import G2, add, multiply

from cowboy_node.crypto import bls
from cowboy_node.crypto.threshold import (
    BadPartials,
    Share,
    _coefficient,
    deal,
    partial_sign,
    recover,
    recover_checked,
    share_public_key,
    verify_share,
)
from tests.unit.crypto.test_crypto_bls import _g1_bytes, _g2_bytes, _ref_hash

MSG = b"cowboy hardening"
DEALING = deal(0x1234567890ABCDEF, 7, 5, b"\x07" * 32)
PKS = {s.index: pk for s, pk in zip(DEALING.shares, DEALING.share_public_keys, strict=True)}
PARTIALS = [(s.index, partial_sign(s, MSG)) for s in DEALING.shares]
GROUP_SIG = bls.sign(0x1234567890ABCDEF, MSG)


def test_strict_decoding_rejects_non_canonical_and_flags() -> None:
    sig = bls.sign(5, MSG)
    pk = bls.public_key(5)
    assert bls.decode_g1(sig) is not None and bls.key_validate(pk)
    with pytest.raises(bls.InvalidPoint, match="48 bytes"):
        bls.decode_g1(sig + b"\x00")
    with pytest.raises(bls.InvalidPoint, match="compressed"):
        bls.decode_g1(bytes([sig[0] & 0x7F]) + sig[1:])
    with pytest.raises(bls.InvalidPoint, match="identity"):
        bls.decode_g1(bytes([0xC0]) + bytes(47))
    with pytest.raises(bls.InvalidPoint, match="identity"):
        bls.decode_g2(bytes([0xC0]) + bytes(95))
    # infinity flag with garbage after it: still refused (never "decodes" to the identity)
    with pytest.raises(bls.InvalidPoint):
        bls.decode_g1(bytes([0xC0]) + b"\x01" * 47)
    # x ≥ p (all ones under the flags) is not a field element
    with pytest.raises(bls.InvalidPoint):
        bls.decode_g1(bytes([0x9F]) + b"\xff" * 47)
    assert not bls.key_validate(bytes(96))
    assert not bls.key_validate(pk[:95])
    assert not bls.key_validate(bytes([0xC0]) + bytes(95))


def test_batch_verify_detects_a_single_bad_partial_and_two_that_would_cancel() -> None:
    items = [(PKS[i], p) for i, p in PARTIALS]
    assert bls.batch_verify_same_message(items, MSG)
    assert not bls.batch_verify_same_message([], MSG)
    swapped = [(PKS[1], PARTIALS[1][1]), (PKS[2], PARTIALS[0][1])]
    assert not bls.batch_verify_same_message(swapped, MSG)
    assert not bls.batch_verify_same_message(items, MSG + b"!")
    # σ1 + Δ and σ2 − Δ sum to the right aggregate: only the random-looking coefficients catch it
    delta = G1Point.hash_to_curve(b"delta", bls.DST_G1_SIG)
    s1 = bytes((bls.decode_g1(PARTIALS[0][1]) + delta).to_compressed_bytes())
    s2 = bytes((bls.decode_g1(PARTIALS[1][1]) - delta).to_compressed_bytes())
    assert not bls.batch_verify_same_message([(PKS[1], s1), (PKS[2], s2)], MSG)


def test_feldman_commitment_checks_shares_and_gives_share_keys() -> None:
    assert DEALING.commitment[0] == DEALING.group_public_key
    assert len(DEALING.commitment) == DEALING.threshold
    for share, pk in zip(DEALING.shares, DEALING.share_public_keys, strict=True):
        assert verify_share(DEALING.commitment, share)
        assert share_public_key(DEALING.commitment, share.index) == pk
    s = DEALING.shares[2]
    assert not verify_share(DEALING.commitment, Share(s.index, (s.secret + 1) % bls.R))
    assert not verify_share(DEALING.commitment, Share(s.index + 1, s.secret))
    assert not verify_share(DEALING.commitment[:-1], s)  # a truncated commitment is another polynomial
    assert not verify_share([bytes(96)], s)
    with pytest.raises(ValueError):
        share_public_key(DEALING.commitment, 0)


def test_recover_checked_skips_bad_partials_and_names_them() -> None:
    bad = list(PARTIALS)
    bad[0] = (1, partial_sign(DEALING.shares[1], MSG))  # index 1 carries index 2's partial
    bad[3] = (4, b"\x00" * 48)  # undecodable
    r = recover_checked(bad, 5, message=MSG, public_keys=PKS)
    assert r.signature == GROUP_SIG and r.bad == frozenset({1, 4})
    assert bls.verify(DEALING.group_public_key, MSG, r.signature)
    assert recover(bad, 5, message=MSG, public_keys=PKS) == GROUP_SIG
    r = recover_checked(bad[:6], 5, message=MSG, public_keys=PKS)
    assert r.signature is None and r.bad == frozenset({1, 4})
    with pytest.raises(BadPartials) as e:
        recover(bad[:6], 5, message=MSG, public_keys=PKS)
    assert e.value.bad == frozenset({1, 4})
    # unknown signer and conflicting duplicates are bad, the rest still recovers
    r = recover_checked([*PARTIALS, (99, PARTIALS[0][1]), (2, PARTIALS[0][1])], 5, message=MSG, public_keys=PKS)
    assert r.signature == GROUP_SIG and r.bad == frozenset({2, 99})


def test_recovered_seed_is_unique_whichever_quorum() -> None:
    sigs = {recover_checked(PARTIALS[k:k + 5], 5, message=MSG, public_keys=PKS).signature for k in range(3)}
    assert sigs == {GROUP_SIG}


# --- py_ecc cross-checks (slow reference: a few inputs only) ---------------------------------------


def test_share_public_key_and_recovery_match_py_ecc() -> None:
    seed = b"\x01" * 32
    d = deal(42, 4, 3, seed)
    coeffs = [42] + [_coefficient(seed, i) for i in range(1, 3)]
    x = 3
    f_x = sum(c * x**j for j, c in enumerate(coeffs)) % bls.R
    ref_pk = add(add(multiply(G2, coeffs[0]), multiply(G2, coeffs[1] * x % bls.R)), multiply(G2, coeffs[2] * 9 % bls.R))
    assert share_public_key(d.commitment, 3) == _g2_bytes(ref_pk) == _g2_bytes(multiply(G2, f_x))
    pks = {s.index: pk for s, pk in zip(d.shares, d.share_public_keys, strict=True)}
    sig = recover([(s.index, partial_sign(s, MSG)) for s in d.shares[1:]], 3, message=MSG, public_keys=pks)
    assert sig == _g1_bytes(multiply(_ref_hash(MSG), 42))  # the plain signature under the group secret
