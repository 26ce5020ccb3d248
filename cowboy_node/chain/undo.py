"""The undo record of the last committed block, and ``cowboy-node rollback`` built on it.

Every commit batch also writes ``M/undo``: the block's height and hash, then, for every key the batch writes, the
value that key had before (or "absent"). It is overwritten by the next commit, so it costs one block's worth of
bytes, never a growing history. Applying it in one synced batch puts the store back exactly as it was before the
block: state values, state tree nodes, the head pointer, the block, its receipts and indexes, its certificate,
and -- for a block this validator proposed -- the kept proposal body the commit had dropped (``C/p/``), so a
restarted single validator re-finalizes the same block from its vote journal and re-executes it with the
binary it now runs (CometBFT's ``rollback``: state back one height, the block re-applied on restart). A block
of another proposer is fetched again from the peers by block sync.

Only one block can be undone: the record is removed by the rollback (a second rollback is refused with
``no_undo_record``), as CometBFT rolls back one height.

Encoding (local, not consensus; never sent): ``height be8 ‖ block hash(32) ‖ entries``, each entry
``u32_be len(key) ‖ key ‖ u32_be len(value) ‖ value``, with length ``0xFFFFFFFF`` and no bytes for "absent".
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cowboy_node.state.kv_store import StateStore, WriteOp

KEY_UNDO = b"M/undo"
"""Where the last committed block's undo record lives."""
_BE8 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_ABSENT = 0xFFFFFFFF


class RollbackError(Exception):
    """The store cannot be rolled back; ``code`` is ``no_undo_record``, ``bad_undo_record`` or ``head_mismatch``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True, slots=True)
class UndoRecord:
    """A decoded ``M/undo``."""

    height: int
    """Height of the block it undoes (the head when it was written)."""
    block_hash: bytes
    """Hash of that block."""
    prior: tuple[WriteOp, ...]
    """Every key the block's batch wrote, with its value before the batch (None: it did not exist)."""


def undo_op(store: StateStore, height: int, block_hash: bytes, batch: Sequence[WriteOp]) -> WriteOp:
    """The ``M/undo`` write for a commit batch of block ``height``: read before the batch is applied (the caller is
    the chain's only writer, so nothing changes those keys in between). A key written twice is read once."""
    parts = [_BE8.pack(height), block_hash]
    seen: set[bytes] = {KEY_UNDO}
    get = store.get
    pack = _U32.pack
    for key, _ in batch:
        if key in seen:
            continue
        seen.add(key)
        old = get(key)
        parts.append(pack(len(key)))
        parts.append(key)
        if old is None:
            parts.append(pack(_ABSENT))
        else:
            parts.append(pack(len(old)))
            parts.append(old)
    return KEY_UNDO, b"".join(parts)


def decode_undo(raw: bytes) -> UndoRecord:
    """Parse an ``M/undo`` value; :class:`RollbackError` ``bad_undo_record`` when it is truncated or malformed."""
    if len(raw) < 40:
        raise RollbackError("bad_undo_record", f"{len(raw)} bytes, shorter than its 40-byte head")
    (height,) = _BE8.unpack_from(raw, 0)
    block_hash = raw[8:40]
    pos, n = 40, len(raw)
    prior: list[WriteOp] = []
    try:
        while pos < n:
            (klen,) = _U32.unpack_from(raw, pos)
            pos += 4
            if pos + klen > n:
                raise RollbackError("bad_undo_record", "a key runs past the end")
            key = raw[pos:pos + klen]
            pos += klen
            (vlen,) = _U32.unpack_from(raw, pos)
            pos += 4
            if vlen == _ABSENT:
                prior.append((key, None))
                continue
            if pos + vlen > n:
                raise RollbackError("bad_undo_record", "a value runs past the end")
            prior.append((key, raw[pos:pos + vlen]))
            pos += vlen
    except struct.error:
        raise RollbackError("bad_undo_record", "truncated entry") from None
    return UndoRecord(int(height), block_hash, tuple(prior))


def read_undo(store: StateStore) -> UndoRecord:
    """The store's undo record; :class:`RollbackError` ``no_undo_record`` when there is none."""
    raw = store.get(KEY_UNDO)
    if raw is None:
        raise RollbackError("no_undo_record", "nothing to roll back: no block was committed since the data "
                                              "directory was created or last rolled back")
    return decode_undo(raw)


def rollback_ops(store: StateStore, head_height: int | None, head_hash: bytes | None) -> tuple[UndoRecord,
                                                                                           list[WriteOp]]:
    """The batch that undoes the head block (checked to be the one the record names), and the record."""
    record = read_undo(store)
    if head_height != record.height or head_hash != record.block_hash:
        raise RollbackError("head_mismatch", f"the undo record is for block {record.height} "
                                             f"0x{record.block_hash.hex()[:16]}…, the head is {head_height}")
    return record, [*record.prior, (KEY_UNDO, None)]
