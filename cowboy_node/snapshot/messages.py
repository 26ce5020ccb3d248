"""State-sync messages between validators, on peer channel :data:`CH_SNAPSHOT` (deterministic CBOR, integer keys,
key 0 the kind; golden bytes in ``tests/unit/storage/test_statesync.py`` and docs/protocol.md "State snapshots").

```
OfferRequest  {0: 0}                                             "what is your newest snapshot?"
Offer         {0: 1, 1: height, 2: manifest bytes}               the answer (the manifest proves itself)
ChunkRequest  {0: 2, 1: height, 2: index}                        "send chunk `index` of your snapshot at `height`"
Chunk         {0: 3, 1: height, 2: index, 3: chunk bytes}        the answer
Refused       {0: 4, 1: reason (text)}                           no snapshot, not that one, over budget
```
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.types.fields import expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

CH_SNAPSHOT = 7
"""Peer channel of these messages (0..6 are consensus, blocks, transactions, sync, presence, endpoints, batches)."""
MAX_REASON_CHARS = 64


@dataclass(frozen=True, slots=True)
class OfferRequest:
    """Ask a peer for its newest snapshot."""


@dataclass(frozen=True, slots=True)
class Offer:
    """A peer's newest snapshot."""

    height: int
    """Its height."""
    manifest: bytes
    """Its encoded manifest (``snapshot/manifest.py``)."""


@dataclass(frozen=True, slots=True)
class ChunkRequest:
    """Ask for one chunk of the snapshot at ``height``."""

    height: int
    """The snapshot's height."""
    index: int
    """The chunk's index in its manifest."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk."""

    height: int
    """The snapshot's height."""
    index: int
    """The chunk's index."""
    data: bytes
    """Its bytes, as the manifest lists them."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The peer will not answer: ``no_snapshot``, ``unknown_snapshot``, ``unknown_chunk``, ``over_budget``."""

    reason: str
    """Why."""


SnapshotMessage = OfferRequest | Offer | ChunkRequest | Chunk | Refused


def encode_snapshot_message(m: SnapshotMessage) -> bytes:
    """Canonical bytes of ``m``."""
    if isinstance(m, OfferRequest):
        return encode({0: 0})
    if isinstance(m, Offer):
        return encode({0: 1, 1: m.height, 2: m.manifest})
    if isinstance(m, ChunkRequest):
        return encode({0: 2, 1: m.height, 2: m.index})
    if isinstance(m, Chunk):
        return encode({0: 3, 1: m.height, 2: m.index, 3: m.data})
    return encode({0: 4, 1: m.reason[:MAX_REASON_CHARS]})


def decode_snapshot_message(data: bytes) -> SnapshotMessage:
    """Strict decode (exact keys per kind); raises DecodeError."""
    try:
        value = decode(data)
    except CodecError as e:
        raise DecodeError(f"snapshot message: {e}") from None
    if not isinstance(value, dict) or 0 not in value:
        raise DecodeError("snapshot message: expected a map with a kind")
    kind = value[0]
    if kind == 0:
        expect_map(value, frozenset({0}), "offer_request")
        return OfferRequest()
    if kind == 1:
        m = expect_map(value, frozenset({0, 1, 2}), "offer")
        return Offer(expect_uint(m[1], "offer.height"), expect_bytes(m[2], "offer.manifest"))
    if kind == 2:
        m = expect_map(value, frozenset({0, 1, 2}), "chunk_request")
        return ChunkRequest(expect_uint(m[1], "chunk_request.height"), expect_uint(m[2], "chunk_request.index"))
    if kind == 3:
        m = expect_map(value, frozenset({0, 1, 2, 3}), "chunk")
        return Chunk(expect_uint(m[1], "chunk.height"), expect_uint(m[2], "chunk.index"),
                     expect_bytes(m[3], "chunk.data"))
    if kind == 4:
        m = expect_map(value, frozenset({0, 1}), "refused")
        reason = m[1]
        if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
            raise DecodeError("refused.reason must be a short text")
        return Refused(reason)
    raise DecodeError(f"snapshot message: unknown kind {kind!r}")
