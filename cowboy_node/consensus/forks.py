"""Blocks between proposal and finality: build, verify and commit them on the right parent state.

Simplex finalizes a block only after later votes, and a leader may build on a notarized block that is not
final yet, so a validator holds a small tree of *candidates* (blocks it built or verified, not yet
committed) above its committed head. Executing on a candidate parent uses an overlay of the uncommitted
ancestors' writes (:mod:`cowboy_node.consensus.overlay`). Each block is executed once per validator: a
finalized candidate is committed with the result of its build or verification. One executed on the head's own
world is committed as it is; one executed over an overlay is committed with the same store writes (the overlay
reproduced the parent's state exactly, and execution is deterministic), and the head's tree then adopts the new
root and internal nodes from those writes (so its cache only ever sees committed nodes). Only a block never
executed here (its body arrived with its finalization) is executed at commit.

Every method here runs in the node's block-builder thread under its state lock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from cowboy_node.chain.blockstore import TREE_PREFIX
from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.header import fee_recipient_of, verify_and_prepare
from cowboy_node.consensus.overlay import overlay_world
from cowboy_node.consensus.records import ConsensusRecords, drop_proposal_op, finalization_op, seed_op
from cowboy_node.consensus.simplex.types import Finalization
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.execution.jobs.dispatch import due_seed_rounds
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.kv_store import WriteOp
from cowboy_node.state.tree import TreeUpdate
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, ConsumedSeed, Round
from cowboy_protocol.types.transaction import Transaction

T = TypeVar("T")
MAX_CANDIDATES = 256
"""Candidates kept above the head (older ones are dropped: they can no longer be finalized)."""


@dataclass(slots=True)
class Candidate:
    """A block this validator built or verified and has not committed."""

    prepared: PreparedBlock
    """The block and its execution result."""
    env: BlockEnv
    """The environment it was executed in."""
    direct_on: bytes | None
    """Hash of the committed head whose own world it was executed on (None: over an overlay)."""


def seeds_due(world: WorldState, round_: Round, records: ConsensusRecords,
              finalized_height: int | None = None) -> tuple[ConsumedSeed, ...]:
    """ConsumedSeedsV1 of a block proposed in ``round_``: the seed of every pending-selection round before it
    that this validator has seen revealed and whose block S is final at ``finalized_height`` (CIP-11 §9.2; a
    round whose seed it lacks, or whose S is only notarized, waits for a later block)."""
    out = []
    for epoch, view in due_seed_rounds(world, round_.view - 1, finalized_height):
        seed = records.seed(Round(epoch, view))
        if seed is not None:
            out.append(ConsumedSeed(epoch, view, seed))
    return tuple(out)


class Forks:
    """The candidates above ``chain``'s head and the operations on them (see the module docstring)."""

    def __init__(self, chain: Chain, records: ConsensusRecords, *,
                 signature_checked: Callable[[bytes], bool] | None = None) -> None:
        """``signature_checked``: this node's admission marks (``chain/signature_marks.py``), handed to every
        verification (see :func:`~cowboy_node.execution.block.execute_block`); None checks every signature."""
        self.chain = chain
        self.records = records
        self.signature_checked = signature_checked
        self.candidates: dict[bytes, Candidate] = {}
        """Candidates by block hash."""
        self.executions: collections.Counter[str] = collections.Counter()
        """Block executions by kind: ``build``, ``verify`` (on the head's own world), ``verify_overlay`` (on an
        uncommitted parent), ``commit_unverified`` (a finalized block never executed here, executed at commit)."""

    def header(self, digest: bytes) -> BlockHeader | None:
        """Header of a candidate or committed block, by hash."""
        block = self.block(digest)
        return None if block is None else block.header

    def block(self, digest: bytes) -> Block | None:
        """A candidate or committed block, by hash."""
        c = self.candidates.get(digest)
        if c is not None:
            return c.prepared.block
        height = self.chain.blocks.height_of(digest)
        return None if height is None else self.chain.blocks.block(height)

    def memory_block(self, digest: bytes) -> Block | None:
        """A candidate block (held in memory, not committed), by hash."""
        c = self.candidates.get(digest)
        return None if c is None else c.prepared.block

    def parent_seed(self, parent: BlockHeader) -> bytes | None:
        """The seed of ``parent``'s round: the beacon of its child (the genesis beacon for block 0)."""
        if parent.height == 0:
            return self.chain.genesis.genesis_beacon
        return self.records.seed(parent.round)

    def world_on(self, parent_hash: bytes) -> tuple[WorldState, BlockHeader, bool]:
        """A world holding ``parent_hash``'s state, its header, and whether it is the head's own world.

        Raises InvalidBlock ``unknown_parent`` when the parent is neither the head nor a candidate chained to
        it (e.g. a block on a parent below the finalized head)."""
        head = self.chain.head
        if parent_hash == head.hash():
            return self.chain.world(), head.header, True
        path: list[Candidate] = []
        digest = parent_hash
        while digest != head.hash():
            c = self.candidates.get(digest)
            if c is None or len(path) > MAX_CANDIDATES:
                raise InvalidBlock("unknown_parent", "parent is not a known block above the finalized head",
                                   field="parent_hash")
            path.append(c)
            digest = c.prepared.block.header.parent_hash
        path.reverse()
        world = overlay_world(self.chain.store, [c.prepared.result.state_ops for c in path])
        return world, path[-1].prepared.block.header, False

    def build(self, parent_hash: bytes, round_: Round, transactions: list[Transaction], *, timestamp_ms: int,
              proposer: bytes, sign: Callable[[bytes], bytes], fee_recipient: bytes,
              presence: Callable[[WorldState], bytes | None], observe: Observe | None = None) -> Candidate:
        """Build this validator's block for ``round_`` on ``parent_hash`` and keep it as a candidate."""
        world, parent, direct = self.world_on(parent_hash)
        self._check_halt(parent.height + 1)
        self.executions["build"] += 1
        seed = self.parent_seed(parent)
        final = self.chain.head.header.height  # only committed blocks are final (§9.2 pending-pass condition)
        if seed is None:
            raise InvalidBlock("missing_parent_seed", f"the seed of round {parent.round} is not known",
                               field="beacon")
        env = self.chain.env_at(height=parent.height + 1, timestamp_ms=max(timestamp_ms, parent.timestamp_ms + 1),
                                fee_recipient=fee_recipient, beacon=seed, presence_input=presence(world),
                                round_=round_, consumed_seeds=seeds_due(world, round_, self.records, final),
                                parent=parent, finalized_height=final)
        prepared = self.chain.build(transactions, env=env, round_=round_, proposer=proposer, sign=sign,
                                    signatures_checked=True, observe=observe, world=world, parent_hash=parent_hash)
        return self._keep(prepared, env, self.chain.head.hash() if direct else None)

    def verify(self, block: Block, *, leader_key: bytes | None, max_timestamp_ms: int | None) -> Candidate:
        """Check and execute a proposed block on its parent; keep it as a candidate. Raises InvalidBlock."""
        known = self.candidates.get(block.hash())
        if known is not None:
            return known
        self._check_halt(block.header.height)
        world, parent, direct = self.world_on(block.header.parent_hash)
        self.executions["verify" if direct else "verify_overlay"] += 1
        final = self.chain.head.header.height  # a block assigning from a non-final S is refused (§9.2)
        prepared = verify_and_prepare(self.chain, block, parent=parent, world=world, leader_key=leader_key,
                                      max_timestamp_ms=max_timestamp_ms, signature_checked=self.signature_checked,
                                      finalized_height=final)
        return self._keep(prepared, self._env_of(block, parent, final), self.chain.head.hash() if direct else None)

    def _check_halt(self, height: int) -> None:
        """A validator halting at H (``--halt-height``) neither proposes nor votes for a block above H, so the block
        after H is made by the binary operators upgrade to."""
        if self.chain.beyond_halt(height):
            raise InvalidBlock("halt_height", f"block {height} is above the halt height {self.chain.halt_height}")

    def _env_of(self, block: Block, parent: BlockHeader, finalized_height: int | None = None) -> BlockEnv:
        h = block.header
        return self.chain.env_at(height=h.height, timestamp_ms=h.timestamp_ms,
                                 fee_recipient=fee_recipient_of(self.chain.genesis, h.proposer), beacon=h.beacon,
                                 presence_input=h.presence_input, round_=h.round, consumed_seeds=h.consumed_seeds,
                                 parent=parent, finalized_height=finalized_height)

    def _keep(self, prepared: PreparedBlock, env: BlockEnv, direct_on: bytes | None) -> Candidate:
        c = Candidate(prepared, env, direct_on)
        self.candidates[prepared.block.hash()] = c
        while len(self.candidates) > MAX_CANDIDATES:
            self.candidates.pop(next(iter(self.candidates)))
        return c

    def commit(self, block: Block, *, seed: bytes, certificate: Finalization | None,
               inspect: Callable[[PreparedBlock, BlockEnv], T]) -> tuple[PreparedBlock, T]:
        """Commit the finalized ``block`` (child of the head) with its round's seed and, when it finalizes this
        very block, its certificate; ``inspect`` runs before the commit (the head is still the parent)."""
        head = self.chain.head
        if block.header.parent_hash != head.hash():
            raise InvalidBlock("not_next_block", "finalized block does not extend the committed head")
        c = self.candidates.get(block.hash())
        adopt: TreeUpdate | None = None
        if c is not None and c.direct_on == head.hash():
            prepared, env = c.prepared, c.env
        elif c is not None and c.direct_on is None and c.env.parent_state_root == head.header.state_root \
                and self.chain.tree.root() == head.header.state_root:
            # Executed over an overlay of ancestors that are all committed now: its writes are the ones an
            # execution on the head would make; the head's tree adopts them after the commit.
            prepared, env = c.prepared, c.env
            tree_ops = tuple(op for op in prepared.result.state_ops if op[0].startswith(TREE_PREFIX))
            adopt = TreeUpdate(prepared.result.state_root, tree_ops)
        else:  # never executed here (or on a parent state that is not the head's): execute on the head's world
            self.executions["commit_unverified"] += 1
            prepared = verify_and_prepare(self.chain, block, signature_checked=self.signature_checked)
            env = self._env_of(block, head.header)
        inspected = inspect(prepared, env)
        extra: list[WriteOp] = [seed_op(block.header.round, seed), drop_proposal_op(block.hash())]
        if certificate is not None and certificate.proposal.payload == block.hash():
            extra.append(finalization_op(block.header.height, certificate))
        self.chain.commit(prepared, extra)
        if adopt is not None:
            self.chain.tree.commit(adopt)
        height = block.header.height
        for digest in [d for d, x in self.candidates.items() if x.prepared.block.header.height <= height]:
            del self.candidates[digest]
        return prepared, inspected
