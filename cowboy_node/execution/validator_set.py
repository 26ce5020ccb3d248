"""The execution-readable ``ValidatorSetSnapshot(epoch)`` of CIP-11 §5.4, kept in chain state.

A static genesis network needs only ``ValidatorSetSnapshot(0)``: the genesis validators' ordered Ed25519
``peer_pubkey``s, written by :func:`cowboy_node.execution.genesis.apply_genesis` so that the snapshot is part
of the genesis state root (anchored, not read from a node's local file). ``Sub(R)``, ``validator_set_hash``,
QUIC admission and ``JobAssignment.validator_pubkey`` checks all read it from here.

Encoding (CIP-11 §12.6 deterministic CBOR): ``{0: epoch (uint), 1: [peer_pubkey (bstr 32), ...]}`` under
``sys/validator_set/`` ‖ ``u64be(epoch)``. The mutable stake is not part of the snapshot (§8.3: it is excluded
from ``validator_set_hash``), and neither are network endpoints, which are routing hints, not identity.
"""

from __future__ import annotations

from collections.abc import Sequence

from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import encode
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.types.errors import DecodeError
from cowboy_protocol.types.fields import decode_map, expect_bytes, expect_uint

KEY_VALIDATOR_SET_PREFIX = b"sys/validator_set/"
PEER_PUBKEY_LEN = 32


def snapshot_key(epoch: int) -> bytes:
    """State key of ``ValidatorSetSnapshot(epoch)``."""
    return KEY_VALIDATOR_SET_PREFIX + epoch.to_bytes(8, "big")


def encode_snapshot(snapshot: EpochSnapshot) -> bytes:
    """Canonical bytes of a snapshot (golden in ``docs/protocol.md``)."""
    return encode({0: snapshot.epoch, 1: [bytes(k) for k in snapshot.validators]})


def decode_snapshot(raw: bytes) -> EpochSnapshot:
    """Inverse of :func:`encode_snapshot`; :class:`DecodeError` on anything else."""
    m = decode_map(raw, frozenset({0, 1}), "ValidatorSetSnapshot")
    keys = m[1]
    if not isinstance(keys, list):
        raise DecodeError("ValidatorSetSnapshot.peer_pubkeys: expected an array")
    peers = tuple(expect_bytes(k, f"ValidatorSetSnapshot.peer_pubkeys[{i}]", PEER_PUBKEY_LEN)
                  for i, k in enumerate(keys))
    try:
        return EpochSnapshot(expect_uint(m[0], "ValidatorSetSnapshot.epoch"), peers)
    except ValueError as exc:
        raise DecodeError(f"ValidatorSetSnapshot: {exc}") from exc


def put_snapshot(world: WorldState, epoch: int, peer_pubkeys: Sequence[bytes]) -> EpochSnapshot:
    """Write ``ValidatorSetSnapshot(epoch)`` (ordered as given: the consensus participants' order)."""
    snap = EpochSnapshot(epoch, tuple(bytes(k) for k in peer_pubkeys))
    for k in snap.validators:
        if len(k) != PEER_PUBKEY_LEN:
            raise ValueError(f"peer_pubkey must be {PEER_PUBKEY_LEN} bytes, got {len(k)}")
    world.set(snapshot_key(epoch), encode_snapshot(snap))
    return snap


def get_snapshot(world: WorldState, epoch: int) -> EpochSnapshot | None:
    """``ValidatorSetSnapshot(epoch)``, or None when the chain has none for that epoch."""
    raw = world.get(snapshot_key(epoch))
    return None if raw is None else decode_snapshot(raw)
