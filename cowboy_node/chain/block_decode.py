"""Decoding a block received from another validator, reusing the transactions this validator already decoded.

A follower receives the leader's block and used to decode every transaction of it again
(``Transaction.from_body``, ≈ 15 µs for a transfer), though its own admission decoded the same bytes when they
arrived by gossip or RPC, and its pool still holds them. :func:`decode_block` is :meth:`Block.decode` — the same
checks in the same order, the same errors, an equal block — except that a transaction body that is byte for byte
the full signed body of a transaction ``known`` returns is not decoded again: that transaction is used. Canonical
decoding maps one byte string to one transaction, and the pooled one was decoded from exactly these bytes (it
keeps them: ``Transaction.body()``), so it equals what decoding would give. A body ``known`` does not return is
decoded as before, and a malformed one raises what it raised.
"""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.types.block import ED25519_SIG_LEN, Block, BlockHeader
from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.types.errors import DecodeError
from cowboy_protocol.types.fields import expect_bytes, expect_map
from cowboy_protocol.types.transaction import Transaction

__all__ = ["KnownTransaction", "decode_block"]

KnownTransaction = Callable[[bytes], Transaction | None]
"""A transaction already decoded here whose full signed body is exactly the given bytes, or None
(``Mempool.by_body``)."""


def decode_block(raw: bytes, known: KnownTransaction, *, max_tx_bytes: int = 1 << 20) -> Block:
    """``Block.decode(raw, max_tx_bytes=max_tx_bytes)``, taking the transactions ``known`` holds instead of
    decoding their bodies (see the module docstring)."""
    try:
        value = decode(raw)
    except CodecError as e:
        raise DecodeError(f"block is not canonical CBOR: {e}") from e
    m = expect_map(value, frozenset({0, 1, 2}), "block")
    header = BlockHeader.from_cbor(m[0])
    if not isinstance(m[1], list):
        raise DecodeError("block.transactions: expected an array", field="transactions")
    txs = []
    for item in m[1]:
        body = expect_bytes(item, "block.tx", max_len=max_tx_bytes)
        tx = known(body)
        # The identity check is the guarantee, not an assumption about ``known``: reused only for these bytes.
        txs.append(tx if tx is not None and tx.body() == body else Transaction.from_body(body))
    sig = expect_bytes(m[2], "block.signature")
    if len(sig) not in (0, ED25519_SIG_LEN):
        raise DecodeError("block.signature: expected 64 bytes", field="signature")
    return Block(header, tuple(txs), sig)
