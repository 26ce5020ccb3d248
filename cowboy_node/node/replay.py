"""Re-execute a stored chain from genesis in memory and compare every state root.

Used by ``cowboy-node replay`` and by the crash test: a block that does not
re-execute to the root in its header is reported with its height.
"""

from __future__ import annotations

from collections.abc import Iterator

from cowboy_node.chain.blockstore import BlockStore
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.genesis import Genesis
from cowboy_node.chain.pruning import earliest_height
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.memory import MemoryStore


def replay(source: StateStore, genesis: Genesis) -> Iterator[tuple[int, bytes]]:
    """Yield (height, state_root) for every block of ``source``, re-executed from genesis.

    Raises InvalidBlock (from verification) or ValueError on a mismatch.
    """
    blocks = BlockStore(source)
    head = blocks.head_height()
    if head is None:
        return
    earliest = earliest_height(source)
    if earliest > 0:
        raise ValueError(f"blocks below {earliest} are not stored (pruned by [storage] retain_blocks, or joined from "
                         "a snapshot): replay needs every block from genesis")
    fresh = Chain(MemoryStore(), genesis)
    stored0 = blocks.block(0)
    if stored0 is None or stored0.hash() != fresh.head.hash():
        raise ValueError("block 0 differs from the genesis block derived from genesis.json")
    yield 0, fresh.head.header.state_root
    for height in range(1, head + 1):
        block = blocks.block(height)
        if block is None:
            raise ValueError(f"block {height} is missing")
        prepared = verify_and_prepare(fresh, block)
        fresh.commit(prepared)
        yield height, prepared.result.state_root
