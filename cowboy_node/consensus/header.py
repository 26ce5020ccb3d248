"""Header checks of a block against its parent (threshold-Simplex rules).

Execution-dependent fields (roots, usage, basefees) are checked by ``execution.block.execute_block``; this
module checks everything else the digest covers: identity, linkage, time, round, proposer, signature, beacon,
and ConsumedSeedsV1.

- ``round`` is the consensus round ``(epoch, view)`` the block was proposed in; views only grow along a chain
  and may skip (nullified views), so the rule is ``round > parent.round`` (the consensus engine checks that
  the round is the one the block was notarized in).
- ``beacon`` is the seed of the **parent's** round, R_{S−1} (CIP-11 §9.2): the threshold group signature
  over ``parent.round`` (for block 1 the genesis beacon, the group signature over Round(0, 0)). A block cannot
  carry its own round's seed: that seed only exists once the block's round is certified.
- ``proposer`` must be the elected leader of the round when the caller knows it (live votes); a block that
  arrives with a finalization certificate (sync, replay) is already proven by that certificate.
"""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.chain.genesis import Genesis
from cowboy_node.consensus.beacon import verify_beacon
from cowboy_node.execution.block import execute_block
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, Round
from cowboy_protocol.crypto import ed25519


def verify_header(block: Block, parent: BlockHeader, genesis: Genesis, *, leader_key: bytes | None = None,
                  max_timestamp_ms: int | None = None) -> None:
    """Raise :class:`InvalidBlock` naming the first rule ``block`` breaks.

    ``leader_key``: the Ed25519 key of the round's elected leader (None: not checked, the block is certified).
    ``max_timestamp_ms``: the latest acceptable timestamp (local clock plus drift; None: not checked).
    """
    h = block.header
    if h.chain_id != genesis.chain_id:
        raise InvalidBlock("wrong_chain_id", f"block is for chain {h.chain_id!r}", field="chain_id")
    if h.height != parent.height + 1:
        raise InvalidBlock("wrong_height", f"expected height {parent.height + 1}, got {h.height}", field="height")
    if h.parent_hash != parent.digest():
        raise InvalidBlock("wrong_parent", "parent_hash does not match the parent block", field="parent_hash")
    if h.timestamp_ms <= parent.timestamp_ms:
        raise InvalidBlock("timestamp_not_increasing", "timestamp must exceed the parent's", field="timestamp_ms")
    if max_timestamp_ms is not None and h.timestamp_ms > max_timestamp_ms:
        raise InvalidBlock("timestamp_in_future", "timestamp is too far ahead of this validator's clock",
                           field="timestamp_ms")
    if h.round.epoch != 0 or h.round <= parent.round:
        raise InvalidBlock("wrong_round", f"round {h.round} must be in epoch 0 and after the parent's "
                           f"{parent.round}", field="round")
    proposers = {v.ed25519_public_key for v in genesis.validators}
    if h.proposer not in proposers:
        raise InvalidBlock("unknown_proposer", "proposer is not a genesis validator", field="proposer")
    if leader_key is not None and h.proposer != leader_key:
        raise InvalidBlock("not_leader", f"proposer is not the elected leader of view {h.round.view}",
                           field="proposer")
    if not ed25519.verify(h.proposer, h.digest(), block.signature):
        raise InvalidBlock("bad_block_signature", "proposer signature does not verify", field="signature")
    if not verify_beacon(genesis.group_public_key, parent.round, h.beacon):
        raise InvalidBlock("bad_beacon", "beacon is not the group signature over the parent's round",
                           field="beacon")
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


def fee_recipient_of(genesis: Genesis, proposer: bytes) -> bytes:
    """The fee recipient of the validator whose Ed25519 key is ``proposer``."""
    return next(v.fee_recipient for v in genesis.validators if v.ed25519_public_key == proposer)


def verify_and_prepare(chain: Chain, block: Block, *, parent: BlockHeader | None = None,
                       world: WorldState | None = None, leader_key: bytes | None = None,
                       max_timestamp_ms: int | None = None,
                       signature_checked: Callable[[bytes], bool] | None = None,
                       finalized_height: int | None = None) -> PreparedBlock:
    """Check ``block`` against ``parent`` (default: ``chain``'s head) and re-execute it on ``world`` (default:
    the head's). Nothing is written: the caller commits a block executed on the head with
    :meth:`Chain.commit`. ``signature_checked``: see :func:`execute_block` (this node's admission marks).
    ``finalized_height``: this validator's finalized height when ``parent`` is not final (CIP-11 §9.2)."""
    parent_header = parent if parent is not None else chain.head.header
    verify_header(block, parent_header, chain.genesis, leader_key=leader_key, max_timestamp_ms=max_timestamp_ms)
    world = world if world is not None else chain.world()
    h = block.header
    env = chain.env_at(height=h.height, timestamp_ms=h.timestamp_ms,
                       fee_recipient=fee_recipient_of(chain.genesis, h.proposer), beacon=h.beacon,
                       presence_input=h.presence_input, round_=h.round, consumed_seeds=h.consumed_seeds,
                       parent=parent_header, finalized_height=finalized_height)
    result = execute_block(world, env, block.header, block.transactions, signature_checked=signature_checked)
    return PreparedBlock(block, result, world)
