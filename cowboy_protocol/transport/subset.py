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
from dataclasses import dataclass

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.preimages import validator_set_hash

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


def subset(runner_pubkey: bytes, peer_pubkeys: Sequence[bytes], *, min_subset: int = MIN_SUBSET,
           max_subset: int = MAX_SUBSET) -> tuple[bytes, ...]:
    """``Sub(R)``: the k validators (raw peer_pubkeys, in snapshot order) that runner ``R`` connects to
    (``min_subset``/``max_subset``: the governed MIN_SUBSET/MAX_SUBSET active at the head)."""
    keys = [bytes(k) for k in peer_pubkeys]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate peer_pubkey in the validator-set snapshot")
    if not keys:
        raise ValueError("the validator-set snapshot is empty")
    k = effective_k(len(keys), min_subset=min_subset, max_subset=max_subset)
    chosen = set(sorted(keys, key=lambda v: subset_score(runner_pubkey, v))[:k])
    return tuple(v for v in keys if v in chosen)


def in_subset(validator_pubkey: bytes, runner_pubkey: bytes, peer_pubkeys: Sequence[bytes], *,
              min_subset: int = MIN_SUBSET, max_subset: int = MAX_SUBSET) -> bool:
    """The §5.2 validator-side gate: is this validator in the runner's ``Sub(R)``?"""
    return bytes(validator_pubkey) in subset(runner_pubkey, peer_pubkeys, min_subset=min_subset,
                                             max_subset=max_subset)


# --- §5.3 subset epochs and reconfiguration -------------------------------------------------------------------
#
# §5.3: "When consensus signals ValidatorSetActivated(E+1, activation_height) (§5.4), every node recomputes
# Sub_{E+1}(R) and validator_set_hash(E+1) from the new snapshot. To avoid a presence/delivery gap at the
# boundary, an OVERLAP_BLOCKS window (default 160, §13) runs from activation_height". So at height H:
#   H <  activation_height                   → only epoch E is valid (E+1 is not active yet);
#   activation_height ≤ H < h + OVERLAP      → E and E+1 (the window);
#   H ≥ activation_height + OVERLAP_BLOCKS   → only E+1: "After the window (at block activation_height +
#     OVERLAP_BLOCKS, a height-tied cutoff identical for all nodes — no grace period): only Sub_{E+1}(R),
#     validator_set_hash(E+1), and epoch-E+1 receipts are valid."


@dataclass(frozen=True, slots=True)
class EpochSnapshot:
    """One §5.4 ValidatorSetSnapshot as CIP-11 consumes it: the epoch and the ordered raw peer_pubkeys."""

    epoch: int
    """``subset_epoch`` (= the snapshot's epoch, §5.4)."""
    validators: tuple[bytes, ...]
    """Ordered raw Ed25519 peer_pubkeys."""

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError("subset_epoch must be >= 0")
        if not self.validators or len(set(self.validators)) != len(self.validators):
            raise ValueError("a snapshot lists at least one validator, each once")

    @property
    def set_hash(self) -> bytes:
        """``validator_set_hash(epoch)``: keccak256 over the ordered peer_pubkeys (§5.1, §5.4)."""
        return validator_set_hash(self.validators)

    def sub(self, runner_pubkey: bytes, *, min_subset: int = MIN_SUBSET,
            max_subset: int = MAX_SUBSET) -> tuple[bytes, ...]:
        """``Sub_epoch(R)``."""
        return subset(runner_pubkey, self.validators, min_subset=min_subset, max_subset=max_subset)


@dataclass(frozen=True, slots=True)
class Reconfiguration:
    """A ``ValidatorSetActivated(E+1, activation_height)`` (§5.4): the old snapshot E and the new one E+1."""

    old: EpochSnapshot
    """Epoch E."""
    new: EpochSnapshot
    """Epoch E+1."""
    activation_height: int
    """The block from which E+1 is active and the OVERLAP_BLOCKS window runs."""

    def __post_init__(self) -> None:
        if self.new.epoch != self.old.epoch + 1:
            raise ValueError("ValidatorSetActivated must advance subset_epoch by exactly one")
        if self.new.validators == self.old.validators:
            # §5.4: "A consensus epoch advance that does not change the canonical ordered validator
            # peer-identity list MUST NOT emit a CIP-11 ValidatorSetActivated".
            raise ValueError("an epoch advance with an unchanged peer-identity list is not a reconfiguration")
        if self.activation_height < 0:
            raise ValueError("activation_height must be >= 0")

    def cutoff(self, overlap_blocks: int) -> int:
        """``activation_height + OVERLAP_BLOCKS``: the first height at which only E+1 is valid."""
        if overlap_blocks < 0:
            raise ValueError("OVERLAP_BLOCKS must be >= 0")
        return self.activation_height + overlap_blocks

    def in_overlap(self, height: int, overlap_blocks: int) -> bool:
        """``activation_height ≤ height < activation_height + OVERLAP_BLOCKS``."""
        return self.activation_height <= height < self.cutoff(overlap_blocks)


def valid_snapshots(current: EpochSnapshot, reconfiguration: Reconfiguration | None, height: int,
                    overlap_blocks: int) -> tuple[EpochSnapshot, ...]:
    """The snapshots whose ``(subset_epoch, validator_set_hash)`` are valid at ``height``, oldest first.

    ``current`` is the snapshot in force without a reconfiguration; with one, it is ignored in favour of
    ``reconfiguration.old`` / ``.new`` (see the window rules above)."""
    if reconfiguration is None:
        return (current,)
    if height < reconfiguration.activation_height:
        return (reconfiguration.old,)
    if height < reconfiguration.cutoff(overlap_blocks):
        return (reconfiguration.old, reconfiguration.new)
    return (reconfiguration.new,)


def select_snapshot(valid: Sequence[EpochSnapshot], offered_epoch: int,
                    offered_hash: bytes) -> EpochSnapshot | None:
    """§6.2: "the offered (subset_epoch, validator_set_hash) MUST select exactly one snapshot (epoch E or E+1)";
    the epoch and the hash must both be that snapshot's — "Mixing one epoch's hash with the other epoch's
    membership is rejected". None: no valid snapshot is selected (``Goodbye{WrongValidatorSet}``)."""
    chosen = [s for s in valid if s.epoch == offered_epoch and s.set_hash == bytes(offered_hash)]
    return chosen[0] if len(chosen) == 1 else None


def epoch_paired_valid(validator_pubkey: bytes, runner_pubkey: bytes, valid: Sequence[EpochSnapshot],
                       offered_epoch: int, offered_hash: bytes, *, min_subset: int = MIN_SUBSET,
                       max_subset: int = MAX_SUBSET) -> bool:
    """§5.3 admission, "epoch-paired, never cross-product": "A connection is valid iff (offered hash ==
    validator_set_hash(E) and this validator ∈ Sub_E(runner)) OR (offered hash == validator_set_hash(E+1) and
    this validator ∈ Sub_{E+1}(runner))" — "the validator's peer_pubkey and its subset membership MUST both
    resolve in that same snapshot". Also the §5.3 routing & presence rule: "A validator routes/attests for a
    runner only over an epoch-paired-valid connection (point 2)", re-evaluated at each height with ``valid``
    from :func:`valid_snapshots`."""
    snap = select_snapshot(valid, offered_epoch, offered_hash)
    if snap is None or bytes(validator_pubkey) not in snap.validators:
        return False
    return bytes(validator_pubkey) in snap.sub(runner_pubkey, min_subset=min_subset, max_subset=max_subset)


@dataclass(frozen=True, slots=True)
class PlannedSession:
    """One connection a runner must hold: the validator and the snapshot its Hello offers."""

    validator: bytes
    """Raw Ed25519 peer_pubkey."""
    snapshot: EpochSnapshot
    """The epoch whose ``(subset_epoch, validator_set_hash)`` this connection offers and verifies."""


def runner_sessions(runner_pubkey: bytes, valid: Sequence[EpochSnapshot], *, min_subset: int = MIN_SUBSET,
                    max_subset: int = MAX_SUBSET) -> tuple[PlannedSession, ...]:
    """§5.3 connections: "Runners MUST open connections to Sub_{E+1}(R) while keeping Sub_E(R) open — i.e.
    maintain the union Sub_E(R) ∪ Sub_{E+1}(R) for the window — then drop epoch-E-only validators."

    ``valid`` is :func:`valid_snapshots` at the height (oldest first). Each member of the union appears once: a
    validator in both subsets is reached under the newest epoch (project choice: that connection stays valid past
    the cutoff, so it never has to be re-opened); an epoch-E-only one under epoch E. Order: the newest snapshot's
    subset in snapshot order, then the older epochs' remaining members."""
    planned: list[PlannedSession] = []
    seen: set[bytes] = set()
    for snap in reversed(tuple(valid)):
        for v in snap.sub(runner_pubkey, min_subset=min_subset, max_subset=max_subset):
            if v not in seen:
                seen.add(v)
                planned.append(PlannedSession(v, snap))
    return tuple(planned)
