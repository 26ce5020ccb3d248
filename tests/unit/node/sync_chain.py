"""A finalized chain of a 4-validator network built by hand, with real group seeds and finalization certificates
(threshold partials of three validators combined), for the sync tests and ``bench/sync_catchup.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.simplex.types import Finalization, Proposal, finalize_message, seed_message
from cowboy_node.crypto import bls, threshold
from cowboy_node.node.devgenesis import NetworkGenesis, create_genesis
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_FUNDS, CHAIN_ID


def network(balances: dict[bytes, int] | None = None) -> NetworkGenesis:
    """A 4-validator genesis (fixed entropy) funding ``balances`` (default: ALICE)."""
    return create_genesis(
        chain_id=CHAIN_ID, n_validators=4, fee_recipients=[bytes([0x70 + i]) * 20 for i in range(4)],
        balances=balances or {ALICE: ALICE_FUNDS}, system_deployers=(ALICE,), genesis_time_ms=1_700_000_000_000,
        entropy=bytes(range(200)))


NET = network()


def scheme(net: NetworkGenesis, i: int | None) -> ThresholdScheme:
    """Validator ``i``'s scheme (None: verify only)."""
    g = net.genesis
    share = None
    if i is not None:
        k = net.validator_keys[i]
        share = threshold.Share(k.bls_share_index, bls.secret_key_from_bytes(k.bls_secret))
    return ThresholdScheme(g.group_public_key, g.share_public_keys(), g.threshold, share)


def group_sign(schemes: Sequence[ThresholdScheme], quorum: int, message: bytes) -> bytes:
    """The group signature over ``message`` from the first ``quorum`` validators' partials."""
    return threshold.recover([(i + 1, schemes[i].sign(message)) for i in range(quorum)], quorum)


def build_chain(n: int, *, net: NetworkGenesis = NET, store: StateStore | None = None,
                txs: Callable[[int], list[Transaction]] = lambda h: [], cert_every: int = 1,
                block_ms: int = 500) -> tuple[Chain, list[Block]]:
    """Commit ``n`` finalized blocks (view = height, proposer validator 0) with their seeds; a certificate is
    stored for every ``cert_every``-th block and for the last one."""
    chain = Chain(store if store is not None else MemoryStore(), net.genesis)
    forks = Forks(chain, ConsensusRecords(chain.store))
    schemes = [scheme(net, i) for i in range(4)]
    quorum = net.genesis.threshold
    seed0 = net.validator_keys[0].ed25519_seed
    blocks = []
    for v in range(1, n + 1):
        parent = chain.head
        cand = forks.build(parent.hash(), Round(0, v), txs(v), timestamp_ms=net.genesis.genesis_time_ms + v * block_ms,
                           proposer=ed25519.public_key_from_seed(seed0), sign=lambda d: ed25519.sign(seed0, d),
                           fee_recipient=net.genesis.validators[0].fee_recipient, presence=lambda w: b"\x01\x00")
        block = cand.prepared.block
        p = Proposal(Round(0, v), parent.header.round.view, parent.hash(), block.hash())
        seed = group_sign(schemes, quorum, seed_message(p.round))
        cert = None
        if v % cert_every == 0 or v == n:
            cert = Finalization(p, group_sign(schemes, quorum, finalize_message(p)), seed)
        forks.commit(block, seed=seed, certificate=cert, inspect=lambda prepared, env: None)
        blocks.append(block)
    return chain, blocks
