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
from dataclasses import dataclass

from cowboy_node.execution.system_state import get_cip11_params
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.transport.subset import EpochSnapshot, Reconfiguration, select_snapshot
from cowboy_protocol.types.fields import decode_map, expect_bytes, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

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


# --- §5.3 / §5.4 reconfiguration: ValidatorSetActivated(E+1, h) records and the height-tied validity helpers ----

KEY_VALIDATOR_SET_EPOCH = b"sys/validator_set_epoch"
"""State key of the newest scheduled subset_epoch (CBOR uint; absent = 0, the genesis snapshot)."""
KEY_ACTIVATION_PREFIX = b"sys/validator_set_activation/"
"""State key prefix of the activation record of an epoch ≥ 1 (``‖ u64be(epoch)``)."""


@dataclass(frozen=True, slots=True)
class ValidatorSetActivation:
    """A ``ValidatorSetActivated(epoch, activation_height)`` (CIP-11 §5.4) as kept in state.

    Encoding (deterministic CBOR): ``{0: epoch (uint), 1: activation_height (uint)}`` under
    ``sys/validator_set_activation/`` ‖ ``u64be(epoch)``; golden bytes in ``docs/protocol.md``."""

    epoch: int
    """The new subset_epoch (E+1 ≥ 1); its snapshot is ``ValidatorSetSnapshot(epoch)``."""
    activation_height: int
    """First height at which the epoch is valid; the OVERLAP_BLOCKS window with epoch − 1 starts here."""

    def encode(self) -> bytes:
        """Canonical bytes."""
        return encode({0: self.epoch, 1: self.activation_height})

    @classmethod
    def decode(cls, raw: bytes) -> ValidatorSetActivation:
        """Inverse of :meth:`encode`; :class:`DecodeError` on anything else."""
        m = decode_map(raw, frozenset({0, 1}), "ValidatorSetActivation")
        return cls(expect_uint(m[0], "ValidatorSetActivation.epoch"),
                   expect_uint(m[1], "ValidatorSetActivation.activation_height"))


def activation_key(epoch: int) -> bytes:
    """State key of the activation record of ``epoch``."""
    return KEY_ACTIVATION_PREFIX + epoch.to_bytes(8, "big")


def newest_epoch(world: WorldState) -> int:
    """The newest subset_epoch the chain has a snapshot for (scheduled, possibly not yet active)."""
    raw = world.get(KEY_VALIDATOR_SET_EPOCH)
    if raw is None:
        return 0
    value = decode(raw)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DecodeError("validator_set_epoch: expected an unsigned integer")
    return value


def get_activation(world: WorldState, epoch: int) -> ValidatorSetActivation | None:
    """The activation record of ``epoch`` (None for epoch 0, active from genesis, or an unknown epoch)."""
    raw = world.get(activation_key(epoch))
    return None if raw is None else ValidatorSetActivation.decode(raw)


def put_activation(world: WorldState, peer_pubkeys: Sequence[bytes], activation_height: int) -> int:
    """Write ``ValidatorSetSnapshot(E+1)``, its activation record and the epoch pointer (E = the newest epoch);
    returns the bytes written. The caller (the ActivateValidatorSet executor) has checked every rule."""
    epoch = newest_epoch(world) + 1
    snap = put_snapshot(world, epoch, peer_pubkeys)
    record = ValidatorSetActivation(epoch, activation_height).encode()
    pointer = encode(epoch)
    world.set(activation_key(epoch), record)
    world.set(KEY_VALIDATOR_SET_EPOCH, pointer)
    return (len(snapshot_key(epoch)) + len(encode_snapshot(snap)) + len(activation_key(epoch)) + len(record)
            + len(KEY_VALIDATOR_SET_EPOCH) + len(pointer))


def _activation_height(world: WorldState, epoch: int) -> int:
    if epoch == 0:
        return 0
    rec = get_activation(world, epoch)
    if rec is None:
        raise DecodeError(f"ValidatorSetSnapshot({epoch}) has no activation record")
    return rec.activation_height


def _snapshot(world: WorldState, epoch: int) -> EpochSnapshot:
    snap = get_snapshot(world, epoch)
    if snap is None:
        raise DecodeError(f"the chain state has no ValidatorSetSnapshot({epoch})")
    return snap


def active_epoch_at(world: WorldState, height: int) -> int:
    """The newest epoch whose activation height is ≤ ``height`` (§5.4: "For every block, CIP-11 subset_epoch MUST
    equal the epoch field of the active ValidatorSetSnapshot")."""
    epoch = newest_epoch(world)
    while epoch > 0 and _activation_height(world, epoch) > height:
        epoch -= 1
    return epoch


def reconfiguration_at(world: WorldState, height: int, overlap_blocks: int | None = None) -> Reconfiguration | None:
    """The ``ValidatorSetActivated(E+1, h)`` that governs ``height``, in the form
    :func:`cowboy_protocol.transport.subset.valid_snapshots` takes (None: only the genesis epoch exists): the
    active epoch's own activation while its OVERLAP_BLOCKS window is open (or when it is the newest), else the
    next, not yet reached activation — published before ``h`` so that nodes and runners can plan it.
    ``overlap_blocks`` defaults to the governed OVERLAP_BLOCKS in ``world``."""
    overlap = get_cip11_params(world).OVERLAP_BLOCKS if overlap_blocks is None else overlap_blocks
    epoch, newest = active_epoch_at(world, height), newest_epoch(world)
    if epoch >= 1 and (epoch == newest or height < _activation_height(world, epoch) + overlap):
        return Reconfiguration(_snapshot(world, epoch - 1), _snapshot(world, epoch), _activation_height(world, epoch))
    if epoch < newest:
        return Reconfiguration(_snapshot(world, epoch), _snapshot(world, epoch + 1),
                               _activation_height(world, epoch + 1))
    return None


def snapshots_at(world: WorldState, height: int, overlap_blocks: int | None = None) -> tuple[EpochSnapshot, ...]:
    """The snapshots whose ``(subset_epoch, validator_set_hash)`` are valid at ``height``, oldest first (§5.3):
    E alone before ``h``; E and E+1 for ``h ≤ height < h + OVERLAP_BLOCKS``; E+1 alone from the cutoff
    ``h + OVERLAP_BLOCKS`` on. At most two: an activation ends any earlier window (the executor refuses a new
    activation until the previous window has closed, so this only matters if OVERLAP_BLOCKS is raised later).
    ``overlap_blocks`` defaults to the governed OVERLAP_BLOCKS in ``world``."""
    overlap = get_cip11_params(world).OVERLAP_BLOCKS if overlap_blocks is None else overlap_blocks
    epoch = active_epoch_at(world, height)
    current = _snapshot(world, epoch)
    if epoch == 0 or height >= _activation_height(world, epoch) + overlap:
        return (current,)
    return (_snapshot(world, epoch - 1), current)  # h ≤ height < h + OVERLAP_BLOCKS: the window


def active_snapshot_at(world: WorldState, height: int, overlap_blocks: int | None = None) -> EpochSnapshot:
    """The newest snapshot valid at ``height`` (the active ``ValidatorSetSnapshot``, §5.4)."""
    return snapshots_at(world, height, overlap_blocks)[-1]


def select_at(world: WorldState, height: int, offered_epoch: int, offered_hash: bytes,
              overlap_blocks: int | None = None) -> EpochSnapshot | None:
    """The epoch-paired lookup (§5.3, §6.2, §8.3): the one snapshot valid at ``height`` whose epoch *and*
    ``validator_set_hash`` are the offered pair, or None (a mixed pair, E+1 before h, E past the cutoff). Mode-A
    receipt checks and transport admission use it; the caller then checks ``Sub_epoch(R)`` in the result."""
    return select_snapshot(snapshots_at(world, height, overlap_blocks), offered_epoch, offered_hash)
