"""Messages of the block-sync channel between validators (deterministic CBOR, integer keys, key 0 = kind).

```
Status        {0: 0, 1: finalized_height}                       every second, to every peer
BlockRequest  {0: 1, 1: digest bytes(32)}                        "send me this block's body"
SyncRequest   {0: 2, 1: from_height, 2: max_blocks (1..64)[, 3: 1]}  "send me finalized blocks from this height"
SyncResponse  {0: 3, 1: [block bytes, ...] (1..MAX_SYNC_BLOCKS), 2: Finalization bytes}
SyncPage      {0: 4, 1: [block bytes, ...] (1..MAX_SYNC_BLOCKS), 2: certified_height, 3: Finalization bytes}
SyncPruned    {0: 5, 1: earliest_retained_height}                "the heights you asked for are pruned here"
PackedPage    {0: 6, 1: first_height, 2: blocks (1..MAX_SYNC_BLOCKS), 3: raw_size, 4: zlib bytes}
```

Transactions travel on their own channel, :data:`CH_TX_BATCH`, as a :class:`TxBatch` (:func:`encode_tx_batch`):

```
TxBatch       {0: 0, 1: [tx bytes, ...] (1..MAX_TX_BATCH_TXS)}     gossip of admitted transactions
```

Block bodies themselves (a proposal, or the answer to a BlockRequest) travel on the blocks channel as plain
encoded blocks. A SyncResponse's blocks are consecutive, and its certificate finalizes the last of them;
the requester links them by ``parent_hash`` from its own head, so one certificate proves the whole run.

A server answers with a run sized in bytes (below the peer message cap, at least one block). When the run
contains a block with its own stored certificate it ends there and is a SyncResponse (the same bytes and meaning
as before); when it does not (the server's own certificates are sparser than the byte budget allows), it is a
SyncPage: its certificate finalizes the block at ``certified_height`` > the run's last height, the nearest such
block the server holds. The requester verifies that certificate at once and keeps the page's blocks (unexecuted)
until the chain linked from its head reaches the certified block, whose hash must be the certificate's payload:
one certificate then proves every page below it.

A SyncRequest with key 3 (= 1; omitted otherwise) accepts a PackedPage: the server's SyncResponse or SyncPage
bytes compressed with zlib (full transfer blocks shrink to about half), with the first height, the block count and
the uncompressed size outside, so the requester matches and accounts for the answer on its event loop and
decompresses it (bounded by ``raw_size``, at most :data:`MAX_PACKED_RAW`) off the loop. Receiving a datagram
through aioquic costs the requester's event loop about as much as executing its share of a block; halving the
bytes halves that.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.types.fields import expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

CH_CONSENSUS = 0
"""Peer channel of consensus messages (votes, certificates, fetches)."""
CH_BLOCKS = 1
"""Peer channel of block bodies."""
CH_TXS = 2
"""Peer channel of single gossiped transactions (raw transaction bytes): still accepted, no longer sent (the node
sends :data:`CH_TX_BATCH`)."""
CH_SYNC = 3
"""Peer channel of the messages of this module."""
CH_TX_BATCH = 6
"""Peer channel of :class:`TxBatch` messages (4 and 5 are presence and endpoint gossip)."""
MAX_TX_BATCH_TXS = 1024
"""Most transactions in one TxBatch."""
MAX_SYNC_REQUEST = 64
"""Most blocks a SyncRequest may ask for."""
MAX_SYNC_BLOCKS = 128
"""Most blocks in a SyncResponse (the run may extend past the request to reach a certified block)."""
MAX_PACKED_RAW = 16 * 1024 * 1024
"""Largest uncompressed answer a PackedPage may declare (twice the peer message cap)."""


@dataclass(frozen=True, slots=True)
class Status:
    """A validator's finalized height (a peer ahead of us is a reason to sync)."""

    height: int
    """Height of the sender's committed (finalized) head."""


@dataclass(frozen=True, slots=True)
class BlockRequest:
    """Ask for the body of one block."""

    digest: bytes
    """Hash of the block wanted."""


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """Ask for finalized blocks from ``from_height``."""

    from_height: int
    """First height wanted (the requester's head + 1)."""
    max_blocks: int
    """How many blocks the requester wants at most (the answer may add a few to reach a certified block)."""
    packed: bool = False
    """The requester accepts the answer as a :class:`PackedPage` (key 3 = 1; omitted when False)."""


@dataclass(frozen=True, slots=True)
class SyncResponse:
    """Consecutive finalized blocks and the finalization certificate of the last one."""

    blocks: tuple[bytes, ...]
    """Encoded blocks, consecutive heights from the request's ``from_height``."""
    finalization: bytes
    """Encoded Finalization whose proposal is the last block."""


@dataclass(frozen=True, slots=True)
class SyncPage:
    """Consecutive finalized blocks and the certificate of a later block (see the module docstring)."""

    blocks: tuple[bytes, ...]
    """Encoded blocks, consecutive heights from the request's ``from_height``."""
    certified_height: int
    """Height of the block the certificate finalizes: above the last block's."""
    finalization: bytes
    """Encoded Finalization of the block at ``certified_height``."""


@dataclass(frozen=True, slots=True)
class SyncPruned:
    """The answer to a SyncRequest below the server's earliest retained height (``[storage] retain_blocks``): it
    cannot serve those blocks; the requester asks another peer, or joins from a state snapshot."""

    earliest: int
    """The server's earliest retained height."""


@dataclass(frozen=True, slots=True)
class PackedPage:
    """A SyncResponse or SyncPage compressed with zlib, for a SyncRequest that accepts one (``packed``)."""

    first_height: int
    """Height of its first block (the request's ``from_height``)."""
    blocks: int
    """How many blocks it holds."""
    raw_size: int
    """Bytes of the encoded SyncResponse / SyncPage once decompressed (1..:data:`MAX_PACKED_RAW`)."""
    data: bytes
    """``zlib.compress`` of those bytes."""


def unpack_page(m: PackedPage) -> SyncResponse | SyncPage:
    """The SyncResponse or SyncPage inside ``m`` (decompressing at most ``raw_size`` bytes); raises DecodeError when
    the data does not decompress to exactly ``raw_size`` bytes of a SyncResponse / SyncPage of ``blocks`` blocks."""
    d = zlib.decompressobj()
    try:
        raw = d.decompress(m.data, m.raw_size)
    except zlib.error as e:
        raise DecodeError(f"packed_page.data: {e}") from None
    if len(raw) != m.raw_size or not d.eof or d.unconsumed_tail or d.unused_data:
        raise DecodeError(f"packed_page.data does not decompress to its raw_size of {m.raw_size} bytes")
    inner = decode_sync(raw)
    if not isinstance(inner, SyncResponse | SyncPage):
        raise DecodeError("packed_page.data holds no SyncResponse or SyncPage")
    if len(inner.blocks) != m.blocks:
        raise DecodeError(f"packed_page holds {len(inner.blocks)} blocks, not the {m.blocks} it declares")
    return inner


@dataclass(frozen=True, slots=True)
class TxBatch:
    """Transactions a validator admitted (from RPC), gossiped to the others in one message."""

    txs: tuple[bytes, ...]
    """Raw transaction bytes (each as submitted), 1..:data:`MAX_TX_BATCH_TXS`, in the order admitted."""


def encode_tx_batch(m: TxBatch) -> bytes:
    """Canonical bytes of ``m``."""
    return encode({0: 0, 1: list(m.txs)})


def decode_tx_batch(data: bytes) -> TxBatch:
    """Strict decode (exact keys, kind 0, 1..MAX_TX_BATCH_TXS non-empty byte strings); raises DecodeError. The
    transactions themselves are not opened here: admission decodes and checks each one."""
    try:
        value = decode(data)
    except CodecError as e:
        raise DecodeError(f"tx batch: {e}") from None
    if not isinstance(value, dict):
        raise DecodeError("tx batch: expected a map")
    m = expect_map(value, frozenset({0, 1}), "tx_batch")
    if m[0] != 0:
        raise DecodeError(f"tx batch: unknown kind {m[0]!r}")
    txs = m[1]
    if not isinstance(txs, list) or not 1 <= len(txs) <= MAX_TX_BATCH_TXS \
            or not all(isinstance(t, bytes) and t for t in txs):
        raise DecodeError(f"tx_batch.txs must be 1..{MAX_TX_BATCH_TXS} non-empty byte strings")
    return TxBatch(tuple(txs))


SyncMessage = Status | BlockRequest | SyncRequest | SyncResponse | SyncPage | SyncPruned | PackedPage


def encode_sync(m: SyncMessage) -> bytes:
    """Canonical bytes of ``m``."""
    if isinstance(m, Status):
        return encode({0: 0, 1: m.height})
    if isinstance(m, BlockRequest):
        return encode({0: 1, 1: m.digest})
    if isinstance(m, SyncRequest):
        if m.packed:
            return encode({0: 2, 1: m.from_height, 2: m.max_blocks, 3: 1})
        return encode({0: 2, 1: m.from_height, 2: m.max_blocks})
    if isinstance(m, PackedPage):
        return encode({0: 6, 1: m.first_height, 2: m.blocks, 3: m.raw_size, 4: m.data})
    if isinstance(m, SyncPage):
        return encode({0: 4, 1: list(m.blocks), 2: m.certified_height, 3: m.finalization})
    if isinstance(m, SyncPruned):
        return encode({0: 5, 1: m.earliest})
    return encode({0: 3, 1: list(m.blocks), 2: m.finalization})


def decode_sync(data: bytes) -> SyncMessage:
    """Strict decode (exact key set per kind, bounds); raises DecodeError."""
    try:
        value = decode(data)
    except CodecError as e:
        raise DecodeError(f"sync message: {e}") from None
    if not isinstance(value, dict) or 0 not in value:
        raise DecodeError("sync message: expected a map with a kind")
    kind = value[0]
    if kind == 0:
        m = expect_map(value, frozenset({0, 1}), "status")
        return Status(expect_uint(m[1], "status.height"))
    if kind == 1:
        m = expect_map(value, frozenset({0, 1}), "block_request")
        return BlockRequest(expect_bytes(m[1], "block_request.digest", 32))
    if kind == 2:
        m = expect_map(value, frozenset({0, 1, 2, 3}) if 3 in value else frozenset({0, 1, 2}), "sync_request")
        n = expect_uint(m[2], "sync_request.max_blocks")
        if not 1 <= n <= MAX_SYNC_REQUEST:
            raise DecodeError(f"sync_request.max_blocks must be in 1..{MAX_SYNC_REQUEST}")
        if 3 in m and (type(m[3]) is not int or m[3] != 1):
            raise DecodeError("sync_request.packed must be 1 when present")
        return SyncRequest(expect_uint(m[1], "sync_request.from_height"), n, packed=3 in m)
    if kind == 3:
        m = expect_map(value, frozenset({0, 1, 2}), "sync_response")
        return SyncResponse(_blocks(m[1], "sync_response"), _fin(m[2], "sync_response"))
    if kind == 4:
        m = expect_map(value, frozenset({0, 1, 2, 3}), "sync_page")
        blocks = _blocks(m[1], "sync_page")
        certified = expect_uint(m[2], "sync_page.certified_height")
        return SyncPage(blocks, certified, _fin(m[3], "sync_page"))
    if kind == 5:
        m = expect_map(value, frozenset({0, 1}), "sync_pruned")
        return SyncPruned(expect_uint(m[1], "sync_pruned.earliest"))
    if kind == 6:
        m = expect_map(value, frozenset({0, 1, 2, 3, 4}), "packed_page")
        count = expect_uint(m[2], "packed_page.blocks")
        if not 1 <= count <= MAX_SYNC_BLOCKS:
            raise DecodeError(f"packed_page.blocks must be in 1..{MAX_SYNC_BLOCKS}")
        raw_size = expect_uint(m[3], "packed_page.raw_size")
        if not 1 <= raw_size <= MAX_PACKED_RAW:
            raise DecodeError(f"packed_page.raw_size must be in 1..{MAX_PACKED_RAW}")
        if not isinstance(m[4], bytes) or not m[4]:
            raise DecodeError("packed_page.data must be non-empty bytes")
        return PackedPage(expect_uint(m[1], "packed_page.first_height"), count, raw_size, m[4])
    raise DecodeError(f"sync message: unknown kind {kind!r}")


def _blocks(value: object, what: str) -> tuple[bytes, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SYNC_BLOCKS \
            or not all(isinstance(b, bytes) for b in value):
        raise DecodeError(f"{what}.blocks must be 1..{MAX_SYNC_BLOCKS} byte strings")
    return tuple(value)


def _fin(value: object, what: str) -> bytes:
    if not isinstance(value, bytes):
        raise DecodeError(f"{what}.finalization must be bytes")
    return value
