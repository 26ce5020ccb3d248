"""CIP-11 §5.1 subset function ``Sub(R)``: the validators a runner keeps sessions with.

``k = min(|V|, clamp(ceil(log2 |V|) + 1, MIN_SUBSET, MAX_SUBSET))`` is the spec's formula (§5.1, restated in
§8.4), computed in one place for both uses (the transport's subset and execution's §8.4 Mode A guard):
:func:`effective_k`. The ranking
that picks *which* k validators was lost from the specification text we have; this module uses rendezvous
(highest-random-weight) hashing, which has exactly the §5.2 properties the spec lists:

* stable under runner churn: a runner's subset depends only on its own key and the snapshot;
* load-balanced in expectation: each validator is chosen by ``|R|·k/|V|`` runners on average;
* under one validator, the subset is that validator.

The score of validator ``v`` for runner ``R`` is ``keccak256(SUBSET_DOMAIN ‖ R.auth_pubkey ‖ v.peer_pubkey)``
with ``R.auth_pubkey`` the 33-byte compressed secp256k1 key (raw, untagged) and ``v.peer_pubkey`` the raw
32-byte Ed25519 key; the k *lowest* scores win (project choice, docs/transport.md "Subsets"). Membership does not
depend on the order in which the snapshot lists validators; the result is returned in snapshot order.
"""

from __future__ import annotations

from collections.abc import Sequence

from cowboy_protocol.crypto.keccak import keccak256

MIN_SUBSET = 3
"""CIP-11 §13 MIN_SUBSET: floor on the connectivity subset size k."""
MAX_SUBSET = 8
"""CIP-11 §13 MAX_SUBSET: ceiling on k in default Mode B."""

SUBSET_DOMAIN = b"cowboy/cip11/subset/v1"
"""Domain tag of the rendezvous score (project choice)."""


def effective_k(n_validators: int, *, min_subset: int = MIN_SUBSET, max_subset: int = MAX_SUBSET) -> int:
    """``min(|V|, clamp(ceil(log2 |V|) + 1, MIN_SUBSET, MAX_SUBSET))`` (CIP-11 §5.1, §8.4)."""
    if n_validators < 1:
        raise ValueError("a chain has at least one validator")
    ceil_log2 = (n_validators - 1).bit_length()  # exact ceil(log2 n) for n ≥ 1, no floating point
    return min(n_validators, min(max(ceil_log2 + 1, min_subset), max_subset))


def subset_size(n_validators: int) -> int:
    """``k`` for a snapshot of ``n_validators`` (≥ 1): 1 → 1, 2 → 2, 3–4 → 3, 5–8 → 4, 9–16 → 5, … capped at 8."""
    if n_validators < 1:
        raise ValueError("the validator-set snapshot is empty")
    return effective_k(n_validators)


def subset_score(runner_pubkey: bytes, peer_pubkey: bytes) -> bytes:
    """Rendezvous score of one validator for one runner (lower wins)."""
    if len(runner_pubkey) != 33:
        raise ValueError("runner auth_pubkey must be a 33-byte compressed secp256k1 key")
    if len(peer_pubkey) != 32:
        raise ValueError("validator peer_pubkey must be a 32-byte Ed25519 key")
    return keccak256(SUBSET_DOMAIN + runner_pubkey + peer_pubkey)


def subset(runner_pubkey: bytes, peer_pubkeys: Sequence[bytes]) -> tuple[bytes, ...]:
    """``Sub(R)``: the k validators (raw peer_pubkeys, in snapshot order) that runner ``R`` connects to."""
    keys = [bytes(k) for k in peer_pubkeys]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate peer_pubkey in the validator-set snapshot")
    k = subset_size(len(keys))
    chosen = set(sorted(keys, key=lambda v: subset_score(runner_pubkey, v))[:k])
    return tuple(v for v in keys if v in chosen)


def in_subset(validator_pubkey: bytes, runner_pubkey: bytes, peer_pubkeys: Sequence[bytes]) -> bool:
    """The §5.2 validator-side gate: is this validator in the runner's ``Sub(R)``?"""
    return bytes(validator_pubkey) in subset(runner_pubkey, peer_pubkeys)
