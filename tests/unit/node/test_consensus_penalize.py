"""Bounded cost of what peers send the service (issue 30 §2): a peer the engine proves faulty (a certificate
that does not verify, conflicting votes) is backed off by the peer layer (``Network.penalize`` with the fault's
bounded label); unsolicited block bodies beyond the vote window are dropped, and cached bodies are bounded in
bytes."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.service import bodies as bodies_mod
from cowboy_node.consensus.simplex.types import Notarization, Proposal, encode_message
from cowboy_node.consensus.sync_messages import CH_BLOCKS, CH_CONSENSUS
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.node.test_consensus_preverify import LEADER, NET, _service


def test_a_bad_certificate_gets_its_sender_penalized_and_counted() -> None:
    svc, net = _service(0)
    svc.start_engine()
    p = Proposal(Round(0, 3), 0, svc.chain.head.hash(), hashlib.sha256(b"junk").digest())
    junk = Notarization(p, bytes(48), bytes(48))  # not even a curve point
    svc.on_peer_message(2, CH_CONSENSUS, encode_message(junk))
    assert net.penalized == [(2, "bad_certificate")]
    assert svc.metrics.consensus_faults.labels(reason="bad_certificate")._value.get() == 1


def _block_at(view: int) -> Block:
    chain = Chain(MemoryStore(), NET.genesis)
    forks = Forks(chain, ConsensusRecords(chain.store))
    seed = NET.validator_keys[LEADER].ed25519_seed
    c = forks.build(chain.head.hash(), Round(0, view), [transfer(ALICE_SK, 0, BOB, 3)],
                    timestamp_ms=int(time.time() * 1000), proposer=ed25519.public_key_from_seed(seed),
                    sign=lambda d: ed25519.sign(seed, d), fee_recipient=NET.genesis.validators[LEADER].fee_recipient,
                    presence=lambda w: b"\x01\x00")
    return c.prepared.block


def test_an_unsolicited_body_beyond_the_vote_window_is_dropped_and_counted() -> None:
    svc, _ = _service(0)
    svc.start_engine()
    assert svc.engine is not None and svc.engine.view == 1
    far = _block_at(1 + svc.engine.cfg.window + 1)
    svc.on_peer_message(2, CH_BLOCKS, far.encode())
    assert far.hash() not in svc.bodies.blocks
    assert svc.metrics.consensus_bad_messages.labels(reason="unsolicited_body")._value.get() == 1
    near = _block_at(1 + svc.engine.cfg.window)
    svc.on_peer_message(2, CH_BLOCKS, near.encode())
    assert near.hash() in svc.bodies.blocks


def test_an_awaited_body_is_kept_whatever_its_view() -> None:
    svc, _ = _service(0)
    svc.start_engine()
    far = _block_at(1_000)
    svc.bodies.waiters[far.hash()] = asyncio.Event()  # asked for (a BlockRequest is out)
    svc.on_peer_message(2, CH_BLOCKS, far.encode())
    assert far.hash() in svc.bodies.blocks


def test_cached_peer_bodies_are_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, _ = _service(0)
    svc.start_engine()
    blocks = [_block_at(v) for v in (2, 3, 4)]
    size = len(blocks[0].encode())
    monkeypatch.setattr(bodies_mod, "BODY_CACHE_BYTES", 2 * size)
    for b in blocks:
        svc.on_peer_message(2, CH_BLOCKS, b.encode())
    assert list(svc.bodies.blocks) == [blocks[1].hash(), blocks[2].hash()]  # the oldest went
    assert svc.bodies.bytes == sum(len(b.encode()) for b in blocks[1:])
