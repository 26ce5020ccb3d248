"""OverlayStore: the committed store seen through the writes of uncommitted blocks (oldest layer first, later
writes winning, None deleting), and the property consensus relies on: executing a block over its parent's
overlay gives exactly what executing it after committing the parent gives."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.consensus.overlay import OverlayStore, overlay_world
from cowboy_node.crypto import bls
from cowboy_node.execution.block import execute_block
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.kv_store import StateStore, StoreError, WriteOp
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE_SK, BOB, FEE_RECIPIENT, transfer

ALPHABET = (b"\x00", b"\x01", b"\x7f", b"\xff")
"""Key bytes chosen to hit the edges of prefix bounds (0x00 and 0xff tails)."""


def _keys() -> list[bytes]:
    return [b"".join(t) for n in (1, 2, 3) for t in itertools.product(ALPHABET, repeat=n)]


def _random_ops(rng: random.Random, keys: list[bytes], count: int, deletes: bool) -> list[WriteOp]:
    return [(rng.choice(keys), None if deletes and rng.random() < 0.3 else rng.randbytes(rng.randint(0, 3)))
            for _ in range(count)]


def _scans(store: StateStore, keys: list[bytes]) -> dict[tuple[bytes, bytes | None, bool], list[tuple[bytes, bytes]]]:
    starts: list[bytes | None] = [None, b"", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", *keys[::7]]
    out = {}
    for prefix in (b"", *ALPHABET, b"\x01\xff", b"\xff\xff", b"\x7f\x00\x01"):
        for start in starts:
            for reverse in (False, True):
                out[(prefix, start, reverse)] = list(store.iterate(prefix, start=start, reverse=reverse))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overlay_reads_like_a_store_the_same_ops_were_written_to(seed: int) -> None:
    rng = random.Random(seed)
    keys = _keys()
    base = MemoryStore()
    base.write_batch(_random_ops(rng, keys, 60, deletes=False))
    layers = [_random_ops(rng, keys, rng.randint(0, 120), deletes=True) for _ in range(4)]
    expected = MemoryStore()
    expected.write_batch(list(base.iterate()))
    for ops in layers:
        expected.write_batch(ops)
    before = list(base.iterate())

    overlay = OverlayStore(base, layers)

    for key in [*keys, b"", b"\x02", b"\x00\x00\x00\x00"]:
        assert overlay.get(key) == expected.get(key), key
    assert _scans(overlay, keys) == _scans(expected, keys)
    assert list(base.iterate()) == before  # the base is never written


def test_delete_in_a_layer_hides_the_base_key_and_a_later_layer_wins() -> None:
    base = MemoryStore()
    base.write_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    overlay = OverlayStore(base, [[(b"b", None), (b"d", b"x")], [(b"d", None), (b"c", b"new"), (b"b", b"back")],
                                  [(b"a", None)]])
    assert overlay.get(b"a") is None
    assert overlay.get(b"b") == b"back"  # deleted by layer 0, written again by layer 1
    assert overlay.get(b"d") is None  # written by layer 0, deleted by layer 1
    assert list(overlay.iterate()) == [(b"b", b"back"), (b"c", b"new")]
    assert list(overlay.iterate(reverse=True)) == [(b"c", b"new"), (b"b", b"back")]
    assert list(overlay.iterate(start=b"bb")) == [(b"c", b"new")]
    assert list(overlay.iterate(start=b"bb", reverse=True)) == [(b"b", b"back")]


def test_overlay_refuses_writes() -> None:
    base = MemoryStore()
    overlay = OverlayStore(base, [[(b"k", b"v")]])
    with pytest.raises(StoreError):
        overlay.write_batch([(b"k", b"w")])
    assert overlay.get(b"k") == b"v" and base.get(b"k") is None


def _build_next(chain: Chain, dev: DevGenesis, txs: list[Transaction], *, world: WorldState | None = None,
                parent: Block | None = None) -> PreparedBlock:
    """Block at (parent or head).height + 1, view = height, on ``world`` (default the head's)."""
    key = dev.validator_key
    secret = bls.secret_key_from_bytes(key.bls_secret)
    p = parent if parent is not None else chain.head
    ph = p.header
    rnd = Round(0, ph.height + 1)
    env = chain.env_at(height=ph.height + 1, timestamp_ms=ph.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                       beacon=sign_beacon(secret, ph.round), presence_input=b"\x01\x00", round_=rnd,
                       consumed_seeds=(), parent=ph)
    return chain.build(txs, env=env, round_=rnd, proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                       sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False,
                       world=world, parent_hash=p.hash())


def test_block_over_parent_overlay_executes_exactly_as_after_committing_the_parent(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    chain = new_chain()
    a = _build_next(chain, dev_genesis, [transfer(ALICE_SK, 0, BOB, 5), transfer(ALICE_SK, 1, BOB, 6)])
    # B is built on A while A is not committed: over the store plus A's state writes.
    b = _build_next(chain, dev_genesis, [transfer(ALICE_SK, 2, BOB, 7)],
                    world=overlay_world(chain.store, [a.result.state_ops]), parent=a.block)
    assert [r.status for r in b.result.receipts] == [0]  # sees A's nonces
    assert chain.height == 0 and chain.store.get(a.result.state_ops[0][0]) != a.result.state_ops[0][1]

    chain.commit(a)
    after = verify_and_prepare(chain, b.block)  # B executed on the head after A's commit
    assert after.result.state_root == b.result.state_root == b.block.header.state_root
    assert after.result.state_ops == b.result.state_ops

    # The same block executed over A's overlay on a fresh store (A never committed there): same root and ops.
    other = new_chain()
    h = b.block.header
    env = other.env_at(height=2, timestamp_ms=h.timestamp_ms, fee_recipient=FEE_RECIPIENT, beacon=h.beacon,
                       presence_input=h.presence_input, round_=h.round, consumed_seeds=(), parent=a.block.header)
    res = execute_block(overlay_world(other.store, [a.result.state_ops]), env, h, b.block.transactions)
    assert res.state_root == after.result.state_root and res.state_ops == after.result.state_ops

    chain.commit(after)
    assert chain.tree.root() == h.state_root
