"""CIP-11 §5.3 reconfiguration E → E+1 as pure functions (``cowboy_protocol.transport.subset``), on a simulated
``ValidatorSetActivated(E+1, h)``: which snapshots are valid at H, epoch-paired admission, the runner's union of
connections, and the routing/presence validity of a connection before, during and after the OVERLAP_BLOCKS window.

Vectors: runner G (secp256k1 generator), old snapshot E = 0 over v1..v10, new E+1 = 1 over v1..v6, v11, v12;
Sub_0(G) = {v1, v4, v6, v7, v10} (k = 5, golden in test_transport_subset.py), Sub_1(G) = {v1, v4, v6, v11} (k = 4).
"""

from __future__ import annotations

import pytest

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.subset import (
    EpochSnapshot,
    PlannedSession,
    Reconfiguration,
    epoch_paired_valid,
    runner_sessions,
    select_snapshot,
    subset,
    valid_snapshots,
)

G = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
V = {i: bytes([i]) * 32 for i in range(1, 13)}
OLD = EpochSnapshot(0, tuple(V[i] for i in range(1, 11)))
NEW = EpochSnapshot(1, tuple(V[i] for i in (1, 2, 3, 4, 5, 6, 11, 12)))
H = 1_000  # activation_height
OVERLAP = 160
RECFG = Reconfiguration(OLD, NEW, H)


def _ids(keys: tuple[bytes, ...]) -> list[int]:
    return [k[0] for k in keys]


def test_vectors_sub_e_and_sub_e_plus_1() -> None:
    assert _ids(OLD.sub(G)) == [1, 4, 6, 7, 10]
    assert _ids(NEW.sub(G)) == [1, 4, 6, 11]
    assert NEW.set_hash == keccak256(b"".join(NEW.validators)) != OLD.set_hash


@pytest.mark.parametrize(("height", "epochs"), [
    (0, [0]), (H - 1, [0]),  # before activation: E+1 is not active yet
    (H, [0, 1]), (H + 1, [0, 1]), (H + OVERLAP - 1, [0, 1]),  # "an OVERLAP_BLOCKS window [...] runs from h"
    (H + OVERLAP, [1]), (H + 10 * OVERLAP, [1]),  # "at block activation_height + OVERLAP_BLOCKS [...] only E+1"
])
def test_valid_snapshots_before_during_after_the_window(height: int, epochs: list[int]) -> None:
    assert [s.epoch for s in valid_snapshots(OLD, RECFG, height, OVERLAP)] == epochs
    assert RECFG.in_overlap(height, OVERLAP) is (epochs == [0, 1])


def test_without_a_reconfiguration_only_the_current_snapshot_is_valid() -> None:
    assert valid_snapshots(OLD, None, 10**9, OVERLAP) == (OLD,)


def test_the_cutoff_follows_the_governed_overlap_blocks() -> None:
    assert [s.epoch for s in valid_snapshots(OLD, RECFG, H + 20, 20)] == [1]
    assert [s.epoch for s in valid_snapshots(OLD, RECFG, H + 20, 21)] == [0, 1]


def test_select_snapshot_is_epoch_paired_never_mixed() -> None:
    both = valid_snapshots(OLD, RECFG, H, OVERLAP)
    assert select_snapshot(both, 0, OLD.set_hash) is OLD
    assert select_snapshot(both, 1, NEW.set_hash) is NEW
    assert select_snapshot(both, 0, NEW.set_hash) is None  # one epoch's number with the other's hash
    assert select_snapshot(both, 1, OLD.set_hash) is None
    assert select_snapshot(both, 2, NEW.set_hash) is None
    after = valid_snapshots(OLD, RECFG, H + OVERLAP, OVERLAP)
    assert select_snapshot(after, 0, OLD.set_hash) is None  # "a Hello offering validator_set_hash(E) past the
    # cutoff is rejected at §6.2 admission"


@pytest.mark.parametrize(("validator", "epoch", "before", "during", "after"), [
    (1, 0, True, True, False),  # in both subsets, connection under E: valid until the cutoff
    (1, 1, False, True, True),  # in both, under E+1: valid from activation on
    (7, 0, True, True, False),  # epoch-E-only member
    (7, 1, False, False, False),  # not in Sub_{E+1} (and not in that snapshot's subset)
    (11, 1, False, True, True),  # epoch-E+1-only member (not in snapshot E at all)
    (11, 0, False, False, False),  # v11's key does not resolve in snapshot E
    (2, 0, False, False, False),  # in both snapshots, in neither subset
    (2, 1, False, False, False),
])
def test_epoch_paired_admission_and_routing_validity(validator: int, epoch: int, before: bool, during: bool,
                                                     after: bool) -> None:
    snap = OLD if epoch == 0 else NEW
    for height, want in ((H - 1, before), (H, during), (H + OVERLAP - 1, during), (H + OVERLAP, after)):
        valid = valid_snapshots(OLD, RECFG, height, OVERLAP)
        assert epoch_paired_valid(V[validator], G, valid, epoch, snap.set_hash) is want, height


def test_mixing_one_epochs_hash_with_the_other_epochs_membership_is_rejected() -> None:
    # v7 is in Sub_0(G) but the Hello offers epoch 1's hash; v11 is in Sub_1(G) but offers epoch 0's.
    both = valid_snapshots(OLD, RECFG, H, OVERLAP)
    assert not epoch_paired_valid(V[7], G, both, 1, NEW.set_hash)
    assert not epoch_paired_valid(V[7], G, both, 0, NEW.set_hash)
    assert not epoch_paired_valid(V[11], G, both, 1, OLD.set_hash)


@pytest.mark.parametrize(("height", "planned"), [
    (H - 1, [(1, 0), (4, 0), (6, 0), (7, 0), (10, 0)]),  # Sub_E(R)
    # the union Sub_E ∪ Sub_{E+1}, members of both under E+1, then the epoch-E-only ones under E:
    (H, [(1, 1), (4, 1), (6, 1), (11, 1), (7, 0), (10, 0)]),
    (H + OVERLAP - 1, [(1, 1), (4, 1), (6, 1), (11, 1), (7, 0), (10, 0)]),
    (H + OVERLAP, [(1, 1), (4, 1), (6, 1), (11, 1)]),  # "then drop epoch-E-only validators"
])
def test_runner_sessions_hold_the_union_during_the_window(height: int, planned: list[tuple[int, int]]) -> None:
    sessions = runner_sessions(G, valid_snapshots(OLD, RECFG, height, OVERLAP))
    assert [(p.validator[0], p.snapshot.epoch) for p in sessions] == planned
    valid = valid_snapshots(OLD, RECFG, height, OVERLAP)
    for p in sessions:  # every planned connection is one the validator admits at that height
        assert epoch_paired_valid(p.validator, G, valid, p.snapshot.epoch, p.snapshot.set_hash)


def test_runner_sessions_use_the_governed_subset_bounds() -> None:
    assert runner_sessions(G, (OLD,), min_subset=2, max_subset=2) == (PlannedSession(V[1], OLD),
                                                                     PlannedSession(V[10], OLD))
    assert _ids(subset(G, OLD.validators, min_subset=2, max_subset=2)) == [1, 10]


def test_a_reconfiguration_must_advance_the_epoch_by_one_and_change_the_peer_list() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Reconfiguration(OLD, EpochSnapshot(2, NEW.validators), H)
    with pytest.raises(ValueError, match="unchanged peer-identity list"):  # §5.4: no ValidatorSetActivated
        Reconfiguration(OLD, EpochSnapshot(1, OLD.validators), H)
    with pytest.raises(ValueError):
        EpochSnapshot(0, ())
