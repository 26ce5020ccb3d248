"""The chain: store, state tree, head, genesis, and committing blocks atomically.

Commit protocol: a block's state writes, tree nodes, block, receipts,
indexes and head pointer go into ONE synced write batch. A crash before the
batch leaves the previous head intact; after it, the new head with its state.
On open the node checks that the data directory belongs to this genesis and
that the head block's state root equals the stored tree root.

The batch also holds the block's undo record (``chain/undo.py``, what ``cowboy-node rollback`` applies) and,
for a block with events, the ``E/`` record pruning uses to find them (``chain/pruning.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cowboy_node.chain.blockstore import (
    KEY_INSTALLING,
    STATE_PREFIX,
    TREE_PREFIX,
    BlockStore,
    block_ops,
    identity_ops,
)
from cowboy_node.chain.event_index import index_ops
from cowboy_node.chain.genesis import Genesis
from cowboy_node.chain.pruning import earliest_height, event_keys_op
from cowboy_node.chain.undo import undo_op
from cowboy_node.execution.block import BlockResult, build_block
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.execution.genesis import apply_genesis
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.derived import DERIVED_PREFIXES
from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, ConsumedSeed, Round
from cowboy_node.types.merkle import receipts_root, tx_root
from cowboy_node.types.receipt import Receipt
from cowboy_protocol.types.transaction import Transaction

ZERO_HASH = bytes(32)
_Signer = Callable[[bytes], bytes]
"""Signs a block digest with the proposer's Ed25519 key."""


class ChainError(Exception):
    """The data directory cannot be used with this genesis (message says why)."""


def genesis_block(genesis: Genesis, state_root: bytes) -> Block:
    """Block 0: derived from genesis.json alone."""
    header = BlockHeader(
        chain_id=genesis.chain_id, height=0, parent_hash=ZERO_HASH, round=Round(0, 0),
        timestamp_ms=genesis.genesis_time_ms, proposer=bytes(32), tx_root=tx_root([]),
        state_root=state_root, receipts_root=receipts_root([]), beacon=genesis.genesis_beacon,
        presence_input=None, consumed_seeds=(), cycles_used=0, cells_used=0,
        cycle_basefee=genesis.basefee.initial_basefee, cell_basefee=genesis.basefee.initial_basefee,
    )
    return Block(header, (), b"")


@dataclass(slots=True)
class PreparedBlock:
    """A built block whose writes are ready but not yet committed."""

    block: Block
    """The signed block."""
    result: BlockResult
    """Execution outcome (receipts, state ops)."""
    world: WorldState
    """The world that produced ``result`` (marked committed after the batch lands)."""


class Chain:
    """Owns the store and the committed head; builds, verifies and commits blocks."""

    def __init__(self, store: StateStore, genesis: Genesis, *, halt_height: int | None = None) -> None:
        self.store = store
        self.genesis = genesis
        self.halt_height = halt_height
        """``--halt-height`` / ``[node] halt_height``: no block above it is built, verified or committed here."""
        self.tree = StateTree(store, TREE_PREFIX)
        self.blocks = BlockStore(store)
        if store.get(KEY_INSTALLING) is not None:
            raise ChainError("a state snapshot install into this data directory was interrupted; run "
                             "`cowboy-node snapshot import` again (it starts over), or empty the directory")
        identity = self.blocks.identity()
        if identity is None:
            if self.blocks.head_height() is not None:
                raise ChainError("data directory has blocks but no chain identity; refusing to use it")
            self._init_genesis()
        else:
            chain_id, genesis_hash = identity
            if chain_id != genesis.chain_id or genesis_hash != genesis.hash():
                raise ChainError(
                    f"data directory belongs to chain {chain_id!r} (genesis 0x{genesis_hash.hex()[:16]}…), "
                    f"not {genesis.chain_id!r} (genesis 0x{genesis.hash().hex()[:16]}…); refusing to start")
        height = self.blocks.head_height()
        head = None if height is None else self.blocks.block(height)
        if head is None:
            raise ChainError("head pointer refers to a missing block; the data directory is damaged")
        if head.header.state_root != self.tree.root():
            raise ChainError(f"head block {height} state root does not match the stored state; "
                             "the data directory is damaged")
        self._check_derived_keys_uncommitted()
        self.head: Block = head

    def _check_derived_keys_uncommitted(self) -> None:
        """Refuse a data directory whose state tree commits to derived keys (``state/derived.py``).

        Versions before the timer indexes left the tree committed to them, so their chains' roots are not this
        version's: executing on would fork from a node that replays the same blocks. One seek and one tree read
        per prefix: the first stored derived key is in the tree iff the directory was written that way.
        """
        for prefix in DERIVED_PREFIXES:
            for key, _ in self.store.iterate(STATE_PREFIX + prefix):
                if self.tree.get(key[len(STATE_PREFIX):]) is not None:
                    raise ChainError(
                        f"the state tree of this data directory commits to {prefix.decode()}… keys, which this "
                        "version keeps out of the state root (docs/timers.md §2): it was written by an older "
                        "version whose state roots differ; start a new chain (a local devnet: remove its home, "
                        "e.g. `rm -rf devnet-home`) or join an upgraded network from its snapshot")
                break

    def _init_genesis(self) -> None:
        world = self.world()
        g = self.genesis
        apply_genesis(world, chain_id=g.chain_id, balances=g.balances, system_deployers=g.system_deployers,
                      basefee=g.basefee, timer=g.timer, limits=g.limits, flags=g.cip11, runners=g.runners,
                      validator_peer_keys=tuple(v.ed25519_public_key for v in g.validators))
        root, ops = world.prepare_commit()
        block = genesis_block(g, root)
        self.store.write_batch([*ops, *block_ops(block, []), *identity_ops(g.chain_id, g.hash())], sync=True)
        world.mark_committed()

    # -- state views --------------------------------------------------------------
    def world(self) -> WorldState:
        """A fresh buffered view over the committed head state."""
        return WorldState(self.store, self.tree, data_prefix=STATE_PREFIX)

    @property
    def height(self) -> int:
        """Committed head height."""
        return self.head.header.height

    def beyond_halt(self, height: int) -> bool:
        """Whether ``height`` is above the halt height (such a block is never built, voted for or committed)."""
        return self.halt_height is not None and height > self.halt_height

    def earliest_height(self) -> int:
        """The lowest height whose block is still stored (0 unless ``[storage] retain_blocks`` pruned some)."""
        return earliest_height(self.store)

    # -- building -----------------------------------------------------------------
    def env_for(self, *, timestamp_ms: int, fee_recipient: bytes, beacon: bytes, presence_input: bytes | None,
                round_: Round | None = None, consumed_seeds: tuple[ConsumedSeed, ...] = ()) -> BlockEnv:
        """Execution environment of the next block on the head; ``beacon`` is the seed of the head's round."""
        r = round_ if round_ is not None else Round(0, self.height + 1)
        return self.env_at(height=self.height + 1, timestamp_ms=timestamp_ms, fee_recipient=fee_recipient,
                           beacon=beacon, presence_input=presence_input, round_=r, consumed_seeds=consumed_seeds)

    def env_at(self, *, height: int, timestamp_ms: int, fee_recipient: bytes, beacon: bytes,
               presence_input: bytes | None, round_: Round, consumed_seeds: tuple[ConsumedSeed, ...],
               parent: BlockHeader | None = None, finalized_height: int | None = None) -> BlockEnv:
        """Execution environment of a block at ``height`` on ``parent`` (default: the head), built or received.

        ``finalized_height``: the finalized head's height when ``parent`` is not final (see
        :attr:`BlockEnv.finalized_height`).

        ``beacon`` is the block's header beacon: the seed of the parent's round, R_{S−1} (CIP-11 §9.2), which
        execution reads as the parent beacon.
        """
        p = parent if parent is not None else self.head.header
        return BlockEnv(chain_id=self.genesis.chain_id, height=height, timestamp_ms=timestamp_ms,
                        fee_recipient=fee_recipient, beacon=beacon, parent_beacon=beacon,
                        presence_input=presence_input, parent_state_root=p.state_root,
                        round=(round_.epoch, round_.view), parent_round=(p.round.epoch, p.round.view),
                        consumed_seeds=tuple((c.seed_epoch, c.seed_view, c.seed_signature) for c in consumed_seeds),
                        n_validators=len(self.genesis.validators), finalized_height=finalized_height)

    def build(self, candidates: list[Transaction], *, env: BlockEnv, round_: Round, proposer: bytes,
              sign: _Signer, signatures_checked: bool, observe: Observe | None = None,
              world: WorldState | None = None, parent_hash: bytes | None = None) -> PreparedBlock:
        """Execute candidates on ``world`` (default: the head's) and return the signed block (nothing written).

        ``parent_hash`` names the parent when ``world`` is not the head's (consensus builds on notarized,
        not yet final blocks). ``observe`` wraps each End-of-Block step (the node times them for its metrics).
        """
        world = world if world is not None else self.world()
        result = build_block(world, env, candidates, signatures_checked=signatures_checked, observe=observe)
        header = BlockHeader(
            chain_id=env.chain_id, height=env.height,
            parent_hash=parent_hash if parent_hash is not None else self.head.hash(), round=round_,
            timestamp_ms=env.timestamp_ms, proposer=proposer, tx_root=result.tx_root,
            state_root=result.state_root, receipts_root=result.receipts_root, beacon=env.beacon,
            presence_input=env.presence_input,
            consumed_seeds=tuple(ConsumedSeed(e, v, sig) for e, v, sig in env.consumed_seeds),
            cycles_used=result.cycles_used,
            cells_used=result.cells_used, cycle_basefee=result.cycle_basefee, cell_basefee=result.cell_basefee,
        )
        block = Block(header, tuple(result.transactions), sign(header.digest()))
        return PreparedBlock(block, result, world)

    def commit(self, prepared: PreparedBlock, extra_ops: Sequence[WriteOp] = ()) -> None:
        """Write everything the block changes (and ``extra_ops``, e.g. its finalization certificate) in one
        synced batch, then advance the head. ``prepared`` must have been executed on the head's world."""
        block = prepared.block
        if block.header.height != self.height + 1 or block.header.parent_hash != self.head.hash():
            raise InvalidBlock("not_next_block", "block does not extend the current head")
        if self.beyond_halt(block.header.height):
            raise InvalidBlock("halt_height", f"block {block.header.height} is above the halt height "
                                              f"{self.halt_height}")
        result = prepared.result
        height = block.header.height
        events = index_ops(height, result.receipts, result.block_events)
        ops = block_ops(block, result.receipts, receipt_bytes=result.receipt_bytes, tx_hashes=result.tx_hashes)
        batch = [*result.state_ops, *ops, *events, *extra_ops]
        event_keys = event_keys_op(height, events)
        if event_keys is not None:
            batch.append(event_keys)
        batch.append(undo_op(self.store, height, block.hash(), batch))
        self.store.write_batch(batch, sync=True)
        prepared.world.mark_committed()
        self.head = block

    def receipts_at(self, height: int) -> list[Receipt] | None:
        """Receipts of a committed block."""
        return self.blocks.receipts(height)

    def close(self) -> None:
        """Close the store."""
        self.store.close()
