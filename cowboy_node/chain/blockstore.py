"""Where blocks, receipts and indexes live in the store, next to the state.

Key layout (one LevelDB, disjoint prefixes)::

    s/<state key>          state values          (WorldState data_prefix)
    n/<nibble path>        state tree internal nodes; n/0xfe‖H(k) leaves (StateTree prefix, state/tree.py)
    B/<height be8>         block bytes
    R/<height be8>         receipts of that block (CBOR array)
    H/<block hash>         height be8
    T/<tx hash>            height be8 ‖ index be4
    M/head                 height be8 of the last committed block
    M/chain_id, M/genesis_hash   identity of the data directory
    M/installing           present while a state snapshot is being installed (snapshot/install.py)
    X/…, Y/…               the event index (chain/event_index.py)

Everything one block changes is returned as write ops for a single batch.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from cowboy_node.execution.records import encode_receipt
from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_node.types.block import Block
from cowboy_node.types.receipt import Receipt
from cowboy_protocol.codec import decode
from cowboy_protocol.codec.fixed import array_head
from cowboy_protocol.types.validation_errors import DecodeError

STATE_PREFIX = b"s/"
TREE_PREFIX = b"n/"
_BLOCK = b"B/"
_RECEIPTS = b"R/"
_HASH = b"H/"
_TX = b"T/"
KEY_HEAD = b"M/head"
KEY_CHAIN_ID = b"M/chain_id"
KEY_GENESIS_HASH = b"M/genesis_hash"
KEY_INSTALLING = b"M/installing"
"""Written first by a snapshot install, deleted in its last batch: a store holding it is never opened as a chain."""
_BE8 = struct.Struct(">Q")
_TXLOC = struct.Struct(">QI")


def block_ops(block: Block, receipts: Sequence[Receipt], *, receipt_bytes: Sequence[bytes] | None = None,
              tx_hashes: Sequence[bytes] | None = None) -> list[WriteOp]:
    """Writes that store ``block`` and its receipts and move the head to it.

    ``receipt_bytes`` / ``tx_hashes``: each receipt's canonical encoding and each transaction's hash, in order,
    when execution already computed them (``BlockResult``), so they are not computed twice.
    """
    height = block.header.height
    h = _BE8.pack(height)
    if receipt_bytes is None or len(receipt_bytes) != len(receipts):
        receipt_bytes = [encode_receipt(r) for r in receipts]
    if tx_hashes is None or len(tx_hashes) != len(block.transactions):
        tx_hashes = [tx.tx_hash() for tx in block.transactions]
    ops: list[WriteOp] = [
        (_BLOCK + h, block.encode()),
        # encode([r.to_cbor() for r in receipts]): an array's encoding is its head, then its items' encodings.
        (_RECEIPTS + h, array_head(len(receipt_bytes)) + b"".join(receipt_bytes)),
        (_HASH + block.hash(), h),
        (KEY_HEAD, h),
    ]
    pack = _TXLOC.pack
    ops.extend([(_TX + th, pack(height, i)) for i, th in enumerate(tx_hashes)])
    return ops


class BlockStore:
    """Read access to committed blocks and indexes."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def head_height(self) -> int | None:
        """Height of the last committed block, or None for an empty data directory."""
        raw = self._store.get(KEY_HEAD)
        return None if raw is None else int(_BE8.unpack(raw)[0])

    def block(self, height: int) -> Block | None:
        """Block at ``height``."""
        raw = self._store.get(_BLOCK + _BE8.pack(height))
        return None if raw is None else Block.decode(raw)

    def block_bytes(self, height: int) -> bytes | None:
        """The stored bytes of the block at ``height`` (its canonical encoding), not decoded: what a peer asking
        for it is sent as is."""
        return self._store.get(_BLOCK + _BE8.pack(height))

    def block_bytes_by_hash(self, block_hash: bytes) -> bytes | None:
        """The stored bytes of the committed block with this hash, not decoded."""
        height = self.height_of(block_hash)
        return None if height is None else self.block_bytes(height)

    def receipts(self, height: int) -> list[Receipt] | None:
        """Receipts of the block at ``height``."""
        raw = self._store.get(_RECEIPTS + _BE8.pack(height))
        if raw is None:
            return None
        value = decode(raw)
        if not isinstance(value, list):
            raise DecodeError("stored receipts: expected an array")
        return [Receipt.from_cbor(r) for r in value]

    def height_of(self, block_hash: bytes) -> int | None:
        """Height of the block with this hash."""
        raw = self._store.get(_HASH + block_hash)
        return None if raw is None else int(_BE8.unpack(raw)[0])

    def tx_location(self, tx_hash: bytes) -> tuple[int, int] | None:
        """(height, index) of a committed transaction."""
        raw = self._store.get(_TX + tx_hash)
        if raw is None:
            return None
        height, index = _TXLOC.unpack(raw)
        return int(height), int(index)

    def identity(self) -> tuple[str, bytes] | None:
        """(chain_id, genesis hash) the data directory was created for."""
        cid = self._store.get(KEY_CHAIN_ID)
        gh = self._store.get(KEY_GENESIS_HASH)
        if cid is None or gh is None:
            return None
        return cid.decode(), gh


def identity_ops(chain_id: str, genesis_hash: bytes) -> list[WriteOp]:
    """Writes that bind a new data directory to its chain."""
    return [(KEY_CHAIN_ID, chain_id.encode()), (KEY_GENESIS_HASH, genesis_hash)]
