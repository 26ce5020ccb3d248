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

from cowboy_node.types.block import Block
from cowboy_protocol.types.transaction import Transaction

__all__ = ["KnownTransaction", "decode_block"]

KnownTransaction = Callable[[bytes], Transaction | None]
"""A transaction already decoded here whose full signed body is exactly the given bytes, or None
(``Mempool.by_body``)."""


def decode_block(raw: bytes, known: KnownTransaction, *, max_tx_bytes: int = 1 << 20) -> Block:
    """``Block.decode(raw, max_tx_bytes=max_tx_bytes)``, taking the transactions ``known`` holds instead of
    decoding their bodies (see the module docstring)."""
    return Block.decode(raw, max_tx_bytes=max_tx_bytes, known=known)
