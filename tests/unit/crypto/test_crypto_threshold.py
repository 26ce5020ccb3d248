"""Threshold BLS: any t partials recover the plain group signature; fewer cannot."""

from __future__ import annotations

import hashlib
from itertools import combinations

import pytest

from cowboy_node.crypto import bls
from cowboy_node.crypto.threshold import Dealing, Share, deal, partial_sign, recover, verify_partial

SECRET = bls.secret_key_from_seed(b"threshold test group secret seed!")
SEED = bytes(range(32))
MSG = b"beacon round 7"


def _partials(dealing: Dealing, message: bytes = MSG) -> list[tuple[int, bytes]]:
    return [(s.index, partial_sign(s, message)) for s in dealing.shares]


@pytest.mark.parametrize(("n", "t"), [(1, 1), (4, 3), (7, 5)])
def test_any_t_partials_recover_the_plain_signature(n: int, t: int) -> None:
    dealing = deal(SECRET, n, t, SEED)
    assert dealing.threshold == t and len(dealing.shares) == n and len(dealing.share_public_keys) == n
    assert dealing.group_public_key == bls.public_key(SECRET)
    expected = bls.sign(SECRET, MSG)
    partials = _partials(dealing)
    for share, share_pk, (index, partial) in zip(dealing.shares, dealing.share_public_keys, partials, strict=True):
        assert share_pk == bls.public_key(share.secret)
        assert verify_partial(share_pk, MSG, partial)
        assert index == share.index
    for subset in combinations(partials, t):
        sig = recover(list(reversed(subset)), t)  # order of the input does not matter
        assert sig == expected
    assert bls.verify(dealing.group_public_key, MSG, expected)
    assert recover(partials, t) == expected  # more than t: the t smallest indices are used


@pytest.mark.parametrize(("n", "t"), [(4, 3), (7, 5)])
def test_t_minus_one_partials_raise(n: int, t: int) -> None:
    partials = _partials(deal(SECRET, n, t, SEED))
    for subset in combinations(partials, t - 1):
        with pytest.raises(ValueError, match="distinct"):
            recover(list(subset), t)
    # repeating an index does not make it count twice
    with pytest.raises(ValueError, match="distinct"):
        recover([*partials[: t - 1], partials[0]], t)


def test_no_partials_raise() -> None:
    with pytest.raises(ValueError):
        recover([], 1)


def test_n1_t1_is_the_plain_signature() -> None:
    dealing = deal(SECRET, 1, 1, SEED)
    assert dealing.shares == (Share(1, SECRET),)
    assert dealing.share_public_keys == (dealing.group_public_key,)
    partial = partial_sign(dealing.shares[0], MSG)
    assert partial == bls.sign(SECRET, MSG)
    assert recover([(1, partial)], 1) == partial


def test_corrupted_partial_fails_verification_and_poisons_recovery() -> None:
    dealing = deal(SECRET, 4, 3, SEED)
    partials = _partials(dealing)
    pk1 = dealing.share_public_keys[0]
    wrong_share = partials[1][1]  # share 2's partial, claimed as share 1's
    wrong_message = partial_sign(dealing.shares[0], MSG + b"?")
    assert not verify_partial(pk1, MSG, wrong_share)
    assert not verify_partial(pk1, MSG, wrong_message)
    flipped = bytearray(partials[0][1])
    flipped[-1] ^= 1
    assert not verify_partial(pk1, MSG, bytes(flipped))
    sig = recover([(1, wrong_message), partials[1], partials[2]], 3)
    assert not bls.verify(dealing.group_public_key, MSG, sig)
    # a bad partial at an index beyond the first t is ignored
    assert recover([*partials[:3], (4, wrong_message)], 3) == bls.sign(SECRET, MSG)


def test_dealing_is_deterministic_and_follows_the_documented_polynomial() -> None:
    a, b = deal(SECRET, 7, 5, SEED), deal(SECRET, 7, 5, SEED)
    assert a == b
    other = deal(SECRET, 7, 5, SEED[::-1])
    assert other.shares != a.shares and other.group_public_key == a.group_public_key
    # f(x) = secret + Σ c_i x^i, c_i = SHA-512(seed ‖ uint32_be(i)) mod r, computed here independently
    coeffs = [SECRET] + [
        int.from_bytes(hashlib.sha512(SEED + i.to_bytes(4, "big")).digest(), "big") % bls.R for i in range(1, 5)
    ]
    for share in a.shares:
        assert share.secret == sum(c * share.index**k for k, c in enumerate(coeffs)) % bls.R


def test_dealing_validation() -> None:
    for n, t in [(3, 4), (3, 0), (0, 0)]:
        with pytest.raises(ValueError):
            deal(SECRET, n, t, SEED)
    for secret in (0, bls.R, -5):
        with pytest.raises(ValueError):
            deal(secret, 3, 2, SEED)


def test_recover_validation() -> None:
    partials = _partials(deal(SECRET, 4, 3, SEED))
    with pytest.raises(ValueError, match="threshold"):
        recover(partials, 0)
    with pytest.raises(ValueError, match="index"):
        recover([(0, partials[0][1]), *partials[1:]], 3)
    with pytest.raises(ValueError, match="index"):
        recover([(-1, partials[0][1]), *partials[1:]], 3)
    with pytest.raises(ValueError, match="conflicting"):
        recover([*partials, (1, partials[1][1])], 3)
    assert recover([*partials, partials[0]], 3) == bls.sign(SECRET, MSG)  # exact duplicate is fine
    with pytest.raises(ValueError, match="not a valid G1 point"):
        recover([(1, b"\x00" * 48), *partials[1:]], 3)
