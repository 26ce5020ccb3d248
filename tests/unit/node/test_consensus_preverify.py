"""A follower starts executing the leader's block when its body arrives, before the proposal vote, and votes only
after the engine asked for the verification; the block is executed once (``node/consensus_service.py``)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.journal import VoteJournal
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.simplex.types import (
    Notarize,
    Proposal,
    decode_message,
    encode_message,
    notarize_message,
    seed_message,
)
from cowboy_node.consensus.sync_messages import CH_BLOCKS, CH_CONSENSUS
from cowboy_node.crypto import bls, threshold
from cowboy_node.node.consensus_service import TIMELINE_FILE, ConsensusService, ServiceConfig
from cowboy_node.node.devgenesis import NetworkGenesis, create_genesis
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Block, KnownTransaction, Round
from cowboy_protocol.crypto import ed25519
from tests.helpers import ALICE, ALICE_FUNDS, ALICE_SK, BOB, CHAIN_ID, transfer

NET: NetworkGenesis = create_genesis(
    chain_id=CHAIN_ID, n_validators=4, fee_recipients=[bytes([0x70 + i]) * 20 for i in range(4)],
    balances={ALICE: ALICE_FUNDS}, system_deployers=(ALICE,), genesis_time_ms=1_700_000_000_000,
    entropy=bytes(range(200)))
LEADER = 1  # of view 1 (round robin)


class _Net:
    def __init__(self) -> None:
        self.sent: list[tuple[int | None, int, bytes]] = []
        self.penalized: list[tuple[int, str]] = []

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        self.sent.append((to, channel, payload))
        return True

    def broadcast(self, channel: int, payload: bytes) -> int:
        self.sent.append((None, channel, payload))
        return 3

    def connected(self) -> frozenset[int]:
        return frozenset({1, 2, 3})

    def penalize(self, peer: int, reason: str) -> None:
        self.penalized.append((peer, reason))


def _scheme(i: int) -> ThresholdScheme:
    k = NET.validator_keys[i]
    g = NET.genesis
    return ThresholdScheme(g.group_public_key, g.share_public_keys(), g.threshold,
                           threshold.Share(k.bls_share_index, bls.secret_key_from_bytes(k.bls_secret)))


def _service(me: int, *, journal: VoteJournal | None = None, net: Any = None,
             known_transaction: KnownTransaction | None = None, **cfg: Any) -> tuple[ConsensusService, Any]:
    """Validator ``me`` of :data:`NET` with a fake peer layer (``net``, default a :class:`_Net`), ``journal``,
    ``known_transaction``, and ``cfg`` overriding :class:`ServiceConfig` fields."""
    chain = Chain(MemoryStore(), NET.genesis)
    seed = NET.validator_keys[me].ed25519_seed
    net = _Net() if net is None else net
    svc = ConsensusService(
        chain, config=ServiceConfig(**{"me": me, "block_time_ms": 500, "delta_ms": 60_000,
                                       "election": Election.ROUND_ROBIN, **cfg}),
        scheme=_scheme(me), tree_lock=threading.Lock(), proposer_key=ed25519.public_key_from_seed(seed),
        sign=lambda d: ed25519.sign(seed, d), fee_recipient=NET.genesis.validators[me].fee_recipient,
        take_transactions=list, presence=lambda w: b"\x01\x00", inspect=lambda p, e, o: None,
        on_commit=lambda c: None, admit_gossip=lambda b: None, metrics=NodeMetrics(), journal=journal, net=net,
        known_transaction=known_transaction)
    return svc, net


def _leader_block() -> Block:
    chain = Chain(MemoryStore(), NET.genesis)
    forks = Forks(chain, ConsensusRecords(chain.store))
    seed = NET.validator_keys[LEADER].ed25519_seed
    c = forks.build(chain.head.hash(), Round(0, 1), [transfer(ALICE_SK, 0, BOB, 3)],
                    timestamp_ms=int(time.time() * 1000), proposer=ed25519.public_key_from_seed(seed),
                    sign=lambda d: ed25519.sign(seed, d), fee_recipient=NET.genesis.validators[LEADER].fee_recipient,
                    presence=lambda w: b"\x01\x00")
    return c.prepared.block


def _own_notarizes(net: _Net, me: int) -> list[Any]:
    out = []
    for _, channel, payload in net.sent:
        if channel == CH_CONSENSUS:
            m = decode_message(payload)
            if isinstance(m, Notarize) and m.signer == me:
                out.append(m)
    return out


async def _settle(svc: ConsensusService) -> None:
    for _ in range(200):
        await asyncio.sleep(0.01)
        if not svc.runtime.tasks:
            return


def test_body_from_the_leader_is_executed_on_arrival_and_the_vote_waits_for_the_proposal() -> None:
    async def run() -> None:
        svc, net = _service(0)
        svc.runtime.running = True
        svc.start_engine()
        assert svc.engine is not None and svc.engine.view == 1 and svc.engine.leader_of(1) == LEADER
        block = _leader_block()
        svc.on_peer_message(LEADER, CH_BLOCKS, block.encode())
        await _settle(svc)
        assert block.hash() in svc.forks.candidates  # executed on arrival
        assert dict(svc.forks.executions) == {"verify": 1}
        assert _own_notarizes(net, 0) == []  # no vote without the leader's proposal
        p = Proposal(Round(0, 1), 0, svc.chain.head.hash(), block.hash())
        ls = _scheme(LEADER)
        vote = Notarize(p, LEADER, ls.sign(notarize_message(p)), ls.sign(seed_message(p.round)))
        svc.on_peer_message(LEADER, CH_CONSENSUS, encode_message(vote))
        await _settle(svc)
        assert [m.proposal for m in _own_notarizes(net, 0)] == [p]  # voted after VerifyBlock
        assert dict(svc.forks.executions) == {"verify": 1}  # and did not execute the block again
        svc.close()

    asyncio.run(run())


def test_a_body_not_sent_by_the_views_leader_is_not_executed_early() -> None:
    async def run() -> None:
        svc, _ = _service(0)
        svc.runtime.running = True
        svc.start_engine()
        block = _leader_block()
        svc.on_peer_message(2, CH_BLOCKS, block.encode())  # relayed by another validator
        await _settle(svc)
        assert svc.forks.candidates == {} and not svc.forks.executions
        svc.close()

    asyncio.run(run())


def test_close_leaves_the_view_timeline_next_to_the_vote_journal(tmp_path: Path) -> None:
    async def run() -> None:
        svc, _ = _service(0, journal=VoteJournal(tmp_path / "consensus-votes.journal"))  # start_engine loads it
        svc.runtime.running = True
        svc.start_engine()
        svc.timeline.mark(1, "seen", 1.0, leader=False)
        svc.timeline.mark(1, "committed", 1.25)
        svc.timeline.close(1)
        svc.close()

    asyncio.run(run())
    records = json.loads((tmp_path / TIMELINE_FILE).read_text())
    assert records == [{"view": 1, "leader": False, "ms": {"seen": 1000.0, "committed": 1250.0}}]
