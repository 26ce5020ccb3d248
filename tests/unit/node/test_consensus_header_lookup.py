"""The consensus service's header lookups take the committed head's header from memory instead of reading the
stored block back (which decodes every transaction of it); other committed blocks are still read from the store,
unknown digests are still unknown (``consensus/service/application.py`` ``Application.header``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.node.test_consensus_preverify import LEADER, NET, _service


def _commit_one_block(svc: Any) -> Block:
    seed = NET.validator_keys[LEADER].ed25519_seed
    c = svc.forks.build(svc.chain.head.hash(), Round(0, 1), [transfer(ALICE_SK, 0, BOB, 3)],
                        timestamp_ms=int(time.time() * 1000), proposer=ed25519.public_key_from_seed(seed),
                        sign=lambda d: ed25519.sign(seed, d),
                        fee_recipient=NET.genesis.validators[LEADER].fee_recipient, presence=lambda w: b"\x01\x00")
    block: Block = c.prepared.block
    svc.forks.commit(block, seed=bytes(96), certificate=None, inspect=lambda p, e: None)
    assert svc.chain.head.hash() == block.hash()
    return block


def test_the_heads_header_is_not_read_back_from_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, _ = _service(0)
    genesis_hash = svc.chain.head.hash()
    block = _commit_one_block(svc)
    stored = svc.chain.blocks.block(1)
    assert stored is not None and stored.hash() == block.hash()
    reads: list[int] = []
    real = svc.chain.blocks.block
    monkeypatch.setattr(svc.chain.blocks, "block", lambda h: reads.append(h) or real(h))

    assert svc.application.header(block.hash()) == stored.header
    assert asyncio.run(svc.application.known_header(block.hash())) == stored.header
    assert reads == []  # the head: no block decoded

    genesis = svc.application.header(genesis_hash)  # committed, not the head: from the store, as before
    assert genesis is not None and genesis.height == 0 and genesis.digest() == genesis_hash
    assert reads == [0]
    assert svc.application.header(b"\x01" * 32) is None
