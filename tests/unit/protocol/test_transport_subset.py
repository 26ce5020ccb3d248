"""CIP-11 §5.1/§5.2 subset function Sub(R)."""

from __future__ import annotations

import random

import pytest

from cowboy_protocol.crypto import secp256k1
from cowboy_protocol.transport.subset import MAX_SUBSET, MIN_SUBSET, in_subset, subset, subset_score, subset_size

# Compressed secp256k1 generator point (private key 1): a public, hand-checkable runner key.
G = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
TEN = [bytes([i]) * 32 for i in range(1, 11)]


def _runner_key(rng: random.Random) -> bytes:
    return secp256k1.private_key_to_public_key(rng.randbytes(31) + b"\x01", compressed=True)


def test_constants_are_the_spec_values() -> None:
    assert (MIN_SUBSET, MAX_SUBSET) == (3, 8)


@pytest.mark.parametrize(("n", "k"), [
    (1, 1), (2, 2),  # |V| = 1 ⇒ k = 1 (launch); |V| = 2 ⇒ k = 2 (§5.1)
    (3, 3), (4, 3),
    (5, 4), (6, 4), (8, 4),  # |V| ∈ [5,8] ⇒ k = 4
    (9, 5), (12, 5), (16, 5),  # |V| ∈ [9,16] ⇒ k = 5
    (17, 6), (32, 6), (33, 7), (64, 7), (65, 8),
    (100, 8), (10_000, 8),  # saturates at MAX_SUBSET (|V| = 100 ⇒ k = 8)
])
def test_subset_size_follows_the_spec_formula(n: int, k: int) -> None:
    assert subset_size(n) == k


def test_subset_size_never_exceeds_the_validator_set() -> None:
    for n in range(1, 300):
        assert 1 <= subset_size(n) <= min(n, MAX_SUBSET)


def test_empty_snapshot_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        subset_size(0)


def test_score_golden_bytes() -> None:
    # keccak256(b"cowboy/cip11/subset/v1" ‖ G ‖ 0x01×32), computed with an independent keccak (pycryptodome).
    assert subset_score(G, TEN[0]).hex() == "2c0d059624076ecf22b09308cf23e234e6b038d2ef3a8c2b9ed50f2658234477"


def test_subset_golden_membership_for_ten_validators() -> None:
    # Scores ranked (independent keccak): v1, v10, v6, v4, v7 | v3, v5, v9, v2, v8; k = 5; snapshot order.
    assert subset(G, TEN) == (TEN[0], TEN[3], TEN[5], TEN[6], TEN[9])


def test_single_validator_is_every_runners_subset() -> None:
    rng = random.Random(1)
    v = bytes(rng.randrange(256) for _ in range(32))
    for _ in range(20):
        runner = _runner_key(rng)
        assert subset(runner, [v]) == (v,)


def test_membership_does_not_depend_on_snapshot_order() -> None:
    shuffled = list(TEN)
    random.Random(7).shuffle(shuffled)
    assert set(subset(G, shuffled)) == set(subset(G, TEN))
    assert subset(G, shuffled) == tuple(v for v in shuffled if v in set(subset(G, TEN)))  # snapshot order


def test_subset_is_stable_under_runner_churn_and_validator_removal_outside_it() -> None:
    # A runner's subset depends only on its own key and the snapshot; removing a validator it did not choose
    # leaves its subset unchanged when k stays the same (|V| 10 → 9: k = 5 both).
    chosen = subset(G, TEN)
    outside = next(v for v in TEN if v not in chosen)
    assert subset(G, [v for v in TEN if v != outside]) == chosen


def test_subset_is_load_balanced_in_expectation() -> None:
    rng = random.Random(42)
    validators = [rng.randbytes(32) for _ in range(16)]  # k = 5
    runners = [_runner_key(rng) for _ in range(1600)]
    counts = dict.fromkeys(validators, 0)
    for r in runners:
        for v in subset(r, validators):
            counts[v] += 1
    expected = len(runners) * 5 / 16  # |R|·k/|V| = 500
    # Binomial(1600, 5/16): sd ≈ 18.5; 5 sd either side.
    assert all(abs(c - expected) < 93 for c in counts.values()), counts


def test_in_subset_is_the_validator_side_gate() -> None:
    chosen = subset(G, TEN)
    assert all(in_subset(v, G, TEN) == (v in chosen) for v in TEN)


def test_bad_keys_and_duplicate_validators_are_rejected() -> None:
    with pytest.raises(ValueError, match="33-byte"):
        subset(G[1:], TEN)
    with pytest.raises(ValueError, match="32-byte"):
        subset(G, [b"\x01" * 31])
    with pytest.raises(ValueError, match="duplicate"):
        subset(G, [TEN[0], TEN[0]])
