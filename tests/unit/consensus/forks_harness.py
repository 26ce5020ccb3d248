"""Helpers of the Forks tests: a Forks over a fresh chain, the dev validator's keys and seeds, a built block."""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.crypto import bls
from cowboy_node.execution.context import BlockEnv
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import FEE_RECIPIENT


def make_forks(new_chain: Callable[[], Chain]) -> Forks:
    """Forks over a fresh chain and its own consensus records."""
    chain = new_chain()
    return Forks(chain, ConsensusRecords(chain.store))


def leader_key(dev: DevGenesis) -> bytes:
    """The dev validator's Ed25519 public key (the leader of every view here)."""
    return ed25519.public_key_from_seed(dev.validator_key.ed25519_seed)


def seed_for(dev: DevGenesis, view: int) -> bytes:
    """The seed (beacon signature) of round (0, ``view``) under the dev validator's BLS key."""
    return sign_beacon(bls.secret_key_from_bytes(dev.validator_key.bls_secret), Round(0, view))


def build_on(f: Forks, dev: DevGenesis, parent: bytes, view: int, txs: list[Transaction], ts: int) -> Block:
    """The dev validator's block for view ``view`` on ``parent``, built (and kept as a candidate) by ``f``."""
    seed = dev.validator_key.ed25519_seed
    c = f.build(parent, Round(0, view), txs, timestamp_ms=ts, proposer=leader_key(dev),
                sign=lambda d: ed25519.sign(seed, d), fee_recipient=FEE_RECIPIENT, presence=lambda w: b"\x01\x00")
    return c.prepared.block


def keep_prepared(p: PreparedBlock, e: BlockEnv) -> PreparedBlock:
    """An ``inspect`` callback of ``Forks.commit`` that keeps the prepared block as it is."""
    return p
