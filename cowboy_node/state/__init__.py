"""State layer: ordered key/value stores, the authenticated state tree and the block overlay.

Part of the deterministic execution core: nothing here reads the clock,
randomness, the environment or the network, and no result depends on Python's
hash seed.
"""

from cowboy_node.state.kv_store import StateStore, StoreError, WriteOp
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import (
    EMPTY_ROOT,
    ProofLeaf,
    ProofStep,
    StateProof,
    StateTree,
    TreeError,
    TreeUpdate,
    verify_proof,
)
from cowboy_node.state.world import WorldState

__all__ = [
    "EMPTY_ROOT",
    "LevelDBStore",
    "MemoryStore",
    "ProofLeaf",
    "ProofStep",
    "StateProof",
    "StateStore",
    "StateTree",
    "StoreError",
    "TreeError",
    "TreeUpdate",
    "WorldState",
    "WriteOp",
    "verify_proof",
]
