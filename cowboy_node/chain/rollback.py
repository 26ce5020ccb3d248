"""``cowboy-node rollback``: undo the last committed block (CometBFT's ``rollback``), for recovery from a bad binary.

The store is opened as the node would open it (identity and head state checked), the head block's undo record
(``chain/undo.py``) is applied in one synced batch, and the store is opened again, which checks that the new
head's state root equals the restored state tree's root. The block itself is not lost to the network: a block
this validator proposed is kept as its pending proposal (and re-finalized from the vote journal on restart), any
other is fetched again by block sync; either way it is re-executed by the binary the node runs then.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.chain.chain import Chain, ChainError
from cowboy_node.chain.genesis import Genesis
from cowboy_node.chain.undo import RollbackError, rollback_ops
from cowboy_node.state.kv_store import StateStore


@dataclass(frozen=True, slots=True)
class RolledBack:
    """What :func:`rollback` did."""

    height: int
    """Height of the undone block."""
    block_hash: bytes
    """Its hash."""
    head_height: int
    """The head now (``height − 1``)."""
    state_root: bytes
    """The head's state root, equal to the restored tree root."""


def rollback(store: StateStore, genesis: Genesis) -> RolledBack:
    """Undo the head block of ``store``. Raises :class:`RollbackError` (nothing written) or :class:`ChainError`."""
    chain = Chain(store, genesis)
    if chain.height == 0:
        raise RollbackError("no_undo_record", "the head is the genesis block; there is nothing to roll back")
    record, ops = rollback_ops(store, chain.height, chain.head.hash())
    store.write_batch(ops, sync=True)
    after = Chain(store, genesis)  # fresh tree: checks the restored state against the new head's root
    if after.height != record.height - 1:
        raise ChainError(f"after the rollback the head is {after.height}, expected {record.height - 1}")
    return RolledBack(record.height, record.block_hash, after.height, after.head.header.state_root)


__all__ = ["RollbackError", "RolledBack", "rollback"]
