"""Header checks of a received block against its parent (single-validator rules).

Execution-dependent fields (roots, usage, basefees) are checked by
``execution.block.execute_block``; this module checks everything else the
digest covers: identity, linkage, time, round, proposer, signature, beacon,
and the CIP-11 block fields by flag.
"""

from __future__ import annotations

from cowboy_node.chain.beacon import verify_beacon
from cowboy_node.chain.genesis import Genesis
from cowboy_node.crypto import ed25519
from cowboy_node.execution.errors import InvalidBlock
from cowboy_node.execution.system_state import get_cip11_flags
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, Round
from cowboy_node.types.errors import DecodeError
from cowboy_node.types.presence import decode_presence

REGISTRY_SIZE_WITHOUT_RUNNERS = 0
"""The runner registry is empty until runner registration exists; presence indexes refer to it."""


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
    if h.consumed_seeds:
        # No pending selection exists to consume a seed; any entry is unconsumed and thus invalid (§9.2).
        raise InvalidBlock("unconsumed_seed", "consumed_seeds lists a seed no pending selection uses",
                           field="consumed_seeds")
    flags = get_cip11_flags(parent_world)
    if flags.CIP11_PRESENT_FIRST_ENABLED and not flags.PRESENCE_HARD_EXCLUDE_ENABLED:
        if h.presence_input is None:
            raise InvalidBlock("missing_presence_input", "PresenceInputV1 is required while present-first "
                               "selection is enabled", field="presence_input")
        try:
            decode_presence(h.presence_input, REGISTRY_SIZE_WITHOUT_RUNNERS)
        except DecodeError as e:
            raise InvalidBlock("invalid_presence_input", e.message, field="presence_input") from e
