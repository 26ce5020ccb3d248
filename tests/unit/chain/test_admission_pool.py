"""Admission with signatures recovered elsewhere (``chain/signature_pool.py``) decides exactly as recovering in-process.

A mixed corpus (valid transfers, a duplicate, forged, high-s, bad-v and zero-r signatures, a signature by
another key, malformed and oversized bytes, wrong chain, unfunded sender, nonce gap, underpriced replacement)
is admitted on two chains from the same genesis: once with :func:`admit` decoding and recovering itself, once
with the result of :func:`prepare_batch` (what a worker process runs) passed in. Every decision, error type, code,
message and field, the pooled transactions and the block built from them are the same. The same with real
worker processes is in ``tests/e2e/test_admission_pool_processes.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from cowboy_node.chain.admission import admit, head_context
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.signature_pool import Prepared, SignaturePool, prepare_batch
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.crypto import bls
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.secp256k1 import N
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, FEE_RECIPIENT, hand_seeds_due, transfer

Outcome = tuple[str, ...]


def _resign(tx: Transaction, signature: bytes) -> bytes:
    return replace(tx, signature=signature, _body=None).to_bytes()


def corpus() -> list[tuple[bytes, str]]:
    """(tx_bytes, expected outcome: "ok" or the error code)."""
    t0, t1, t2 = (transfer(ALICE_SK, n, BOB, 1 + n) for n in range(3))
    sig = t2.signature
    r, s, v = sig[:32], int.from_bytes(sig[32:64], "big"), sig[64]
    high_s = r + (N - s).to_bytes(32, "big") + bytes([v ^ 1])  # the same signature, mutated to high-s
    flipped = sig[:5] + bytes([sig[5] ^ 1]) + sig[6:]
    by_bob = transfer(BOB_SK, 2, BOB, 3)  # signed by BOB over a different payload: recovers to someone else
    unsigned = replace(t2, signature=b"", _body=None)
    return [
        (t0.to_bytes(), "ok"),
        (t1.to_bytes(), "ok"),
        (t1.to_bytes(), "already_known"),
        (_resign(t2, flipped), "bad_signature"),
        (_resign(t2, high_s), "bad_signature"),
        (_resign(t2, sig[:64] + b"\x02"), "bad_signature"),
        (_resign(t2, bytes(32) + sig[32:]), "bad_signature"),
        (_resign(t2, by_bob.signature), "bad_signature"),
        (_resign(unsigned, unsigned.signed(BOB_SK).signature), "bad_signature"),
        (b"\x00\x00\x00\x05abc", "malformed"),
        (b"", "malformed"),
        ((200_000).to_bytes(4, "big") + bytes(200_000), "tx_too_large"),
        (transfer(ALICE_SK, 2, BOB, 1, chain_id="other").to_bytes(), "wrong_chain_id"),  # type: ignore[arg-type]
        (transfer(BOB_SK, 0, ALICE, 0).to_bytes(), "insufficient_funds"),
        (transfer(ALICE_SK, 500, BOB, 1).to_bytes(), "nonce_gap_too_large"),
        (transfer(ALICE_SK, 1, BOB, 99).to_bytes(), "replacement_underpriced"),
        (t2.to_bytes(), "ok"),
        (transfer(ALICE_SK, 3, BOB, 4, max_fee=300_000, tip=2_000).to_bytes(), "ok"),
    ]


def _run(chain: Chain, items: list[bytes], recovered: list[object] | None) -> tuple[list[Outcome], Mempool]:
    pool = Mempool(MempoolConfig(max_nonce_gap=8))
    out: list[Outcome] = []
    for i, raw in enumerate(items):
        before = (len(pool), pool.size_bytes, chain.tree.root())
        try:
            rec = None if recovered is None else recovered[i]
            tx = admit(raw, chain, pool, prepared=rec)  # type: ignore[arg-type]
        except ValidationError as e:  # TxInvalid, MempoolError and DecodeError are all ValidationErrors
            assert (len(pool), pool.size_bytes, chain.tree.root()) == before  # bad input changes nothing
            out.append((type(e).__name__, e.code, e.message, str(e.field)))
        else:
            out.append(("ok", tx.tx_hash().hex()))
    return out, pool


def _build(chain: Chain, dev: DevGenesis, pool: Mempool, limit: int = 100) -> bytes:
    key = dev.validator_key
    secret = bls.secret_key_from_bytes(key.bls_secret)
    world = chain.world()
    from cowboy_node.execution.system_state import get_account
    ready = pool.ready(lambda a: get_account(world, a).nonce, limit)
    env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                        beacon=sign_beacon(secret, chain.head.header.round), presence_input=None,
                        consumed_seeds=hand_seeds_due(chain, secret))
    prepared = chain.build(ready, env=env, round_=Round(0, chain.height + 1),
                           proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                           sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=True)
    chain.commit(prepared)
    return prepared.block.hash()


def test_recovered_elsewhere_decides_exactly_as_in_process(new_chain: Callable[[], Chain],
                                                           dev_genesis: DevGenesis) -> None:
    items = [raw for raw, _ in corpus()]
    expected = [code for _, code in corpus()]
    a, b = new_chain(), new_chain()
    inproc, pool_a = _run(a, items, None)
    elsewhere, pool_b = _run(b, items, prepare_batch(items))  # type: ignore[arg-type]
    assert elsewhere == inproc
    assert [o[0] if o[0] == "ok" else o[1] for o in inproc] == expected
    assert [t.tx_hash() for t in pool_b.transactions()] == [t.tx_hash() for t in pool_a.transactions()]
    assert len(pool_a) == 4
    assert _build(b, dev_genesis, pool_b) == _build(a, dev_genesis, pool_a)
    assert len(b.head.transactions) == 4 and b.tree.root() == a.tree.root()


def test_worker_results_are_addresses_or_the_recovery_error() -> None:
    items = [raw for raw, _ in corpus()]
    got = prepare_batch(items)
    rec = [None if p is None else p.recovered for p in got]
    assert rec[0] == ALICE and rec[1] == ALICE
    assert rec[4] == ("bad_signature", "signature invalid: s out of range [1, n/2] (high-s signatures are rejected)")
    assert rec[5] == ("bad_signature", "signature invalid: recovery id v must be 0 or 1, got 2")
    assert rec[6] == ("bad_signature", "signature invalid: r out of range [1, n)")
    assert rec[8] == BOB
    assert got[9] is None and got[10] is None  # undecodable: admission's own decode refuses them
    assert prepare_batch(items[11:12], max_body=131_072) == [None]
    first = got[0]
    assert first is not None and first.tx == Transaction.from_bytes(items[0]) and first.tx_hash == first.tx.tx_hash()


def _chain() -> Chain:
    from cowboy_node.state.memory import MemoryStore
    from tests.helpers import make_dev_genesis

    return Chain(MemoryStore(), make_dev_genesis().genesis)


def test_a_recovered_address_other_than_the_sender_is_refused() -> None:
    raw = transfer(ALICE_SK, 0, BOB, 1).to_bytes()
    tx = Transaction.from_bytes(raw)
    chain, pool = _chain(), Mempool(MempoolConfig())
    with pytest.raises(ValidationError) as e:
        admit(raw, chain, pool, prepared=Prepared(tx, tx.tx_hash(), BOB))
    assert (e.value.code, e.value.message, e.value.field) == ("bad_signature", "signature is not by the sender",
                                                              "signature")
    assert len(pool) == 0
    assert admit(raw, chain, pool, prepared=Prepared(tx, tx.tx_hash(), ALICE)).sender == ALICE


def test_a_prepared_result_for_other_bytes_is_not_used() -> None:
    a, b = transfer(ALICE_SK, 0, BOB, 1), transfer(ALICE_SK, 0, BOB, 2)
    chain, pool = _chain(), Mempool(MempoolConfig())
    # A result computed for ``a`` handed in with the bytes of ``b``: ``b`` is decoded and recovered here.
    got = admit(b.to_bytes(), chain, pool, prepared=Prepared(a, a.tx_hash(), ALICE))
    assert got == b and pool.get(b.tx_hash()) == b and a.tx_hash() not in pool
    # Nor can it vouch for a transaction whose own signature is bad: ``bad`` is decoded and recovered here.
    bad = replace(b, nonce=1, signature=a.signature, _body=None)
    with pytest.raises(ValidationError) as e:
        admit(bad.to_bytes(), chain, pool, prepared=Prepared(a, a.tx_hash(), ALICE))
    assert e.value.code == "bad_signature"


def test_in_process_pool_has_no_workers_and_same_results() -> None:
    items = [raw for raw, _ in corpus()]
    pool = SignaturePool(0)
    try:
        assert pool.recover(items) == prepare_batch(items)
        assert pool.worker_pids() == [] and pool.inflight == 0
    finally:
        pool.close()
    with pytest.raises(RuntimeError):
        pool.submit(items)


@pytest.mark.parametrize("workers", [-1, 65])
def test_pool_size_out_of_range(workers: int) -> None:
    with pytest.raises(ValueError, match=r"workers must be in 0\.\.64"):
        SignaturePool(workers)


def test_head_context_is_read_again_when_the_head_moves(chain: Chain, dev_genesis: DevGenesis) -> None:
    first = head_context(chain)
    assert head_context(chain) is first and first.ctx.env.height == 1
    _build(chain, dev_genesis, Mempool(MempoolConfig()))
    second = head_context(chain)
    assert second is not first and second.ctx.env.height == 2 and second.head is chain.head
