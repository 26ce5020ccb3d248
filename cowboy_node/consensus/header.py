"""Header checks of a received block against its parent (single-validator rules).

Execution-dependent fields (roots, usage, basefees) are checked by
``execution.block.execute_block``; this module checks everything else the
digest covers: identity, linkage, time, round, proposer, signature, beacon,
and the CIP-11 block fields by flag.
"""

from __future__ import annotations

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.chain.genesis import Genesis
from cowboy_node.consensus.beacon import verify_beacon
from cowboy_node.execution.block import execute_block
from cowboy_node.execution.errors import InvalidBlock
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, Round
from cowboy_protocol.crypto import ed25519


def expected_round(height: int) -> Round:
    """Single validator: one view per height in epoch 0."""
    return Round(0, height)


def verify_header(block: Block, parent: BlockHeader, genesis: Genesis, parent_world: WorldState) -> None:
    """Raise :class:`InvalidBlock` naming the first rule ``block`` breaks."""
    h = block.header
    if h.chain_id != genesis.chain_id:
        raise InvalidBlock("wrong_chain_id", f"block is for chain {h.chain_id!r}", field="chain_id")
    if h.height != parent.height + 1:
        raise InvalidBlock("wrong_height", f"expected height {parent.height + 1}, got {h.height}", field="height")
    if h.parent_hash != parent.digest():
        raise InvalidBlock("wrong_parent", "parent_hash does not match the head", field="parent_hash")
    if h.timestamp_ms <= parent.timestamp_ms:
        raise InvalidBlock("timestamp_not_increasing", "timestamp must exceed the parent's", field="timestamp_ms")
    if h.round != expected_round(h.height):
        raise InvalidBlock("wrong_round", f"expected round {expected_round(h.height)}", field="round")
    proposers = {v.ed25519_public_key for v in genesis.validators}
    if h.proposer not in proposers:
        raise InvalidBlock("unknown_proposer", "proposer is not a genesis validator", field="proposer")
    if not ed25519.verify(h.proposer, h.digest(), block.signature):
        raise InvalidBlock("bad_block_signature", "proposer signature does not verify", field="signature")
    if not verify_beacon(genesis.group_public_key, h.round, h.beacon):
        raise InvalidBlock("bad_beacon", "beacon is not the group signature over the round", field="beacon")
    rounds = [(c.seed_epoch, c.seed_view) for c in h.consumed_seeds]
    if rounds != sorted(set(rounds)):
        raise InvalidBlock("consumed_seeds_not_sorted", "consumed_seeds must be sorted by round without duplicates",
                           field="consumed_seeds")
    for c in h.consumed_seeds:
        # Every entry must be the threshold seed of its round; execution checks each one is consumed (§9.2).
        if (c.seed_epoch, c.seed_view) >= (h.round.epoch, h.round.view) or \
                not verify_beacon(genesis.group_public_key, Round(c.seed_epoch, c.seed_view), c.seed_signature):
            raise InvalidBlock("bad_consumed_seed", f"consumed seed of round ({c.seed_epoch}, {c.seed_view}) "
                               "does not verify", field="consumed_seeds")
    # PresenceInput is decoded and checked by execution against |registry(H−1)| (execution.block).
    del parent_world


def verify_and_prepare(chain: Chain, block: Block) -> PreparedBlock:
    """Check a received block against ``chain``'s head and re-execute it (used by replay and sync); nothing is
    written: the caller commits the returned block with :meth:`Chain.commit`."""
    verify_header(block, chain.head.header, chain.genesis, chain.world())
    fee_recipient = next(v.fee_recipient for v in chain.genesis.validators
                         if v.ed25519_public_key == block.header.proposer)
    world = chain.world()
    h = block.header
    env = chain.env_at(height=h.height, timestamp_ms=h.timestamp_ms, fee_recipient=fee_recipient, beacon=h.beacon,
                       presence_input=h.presence_input, round_=h.round, consumed_seeds=h.consumed_seeds)
    result = execute_block(world, env, block.header, block.transactions)
    return PreparedBlock(block, result, world)
