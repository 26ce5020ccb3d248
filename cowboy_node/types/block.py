"""Blocks and headers.

Header map (deterministic CBOR, every field covered by the block digest):

    {0: chain_id, 1: height, 2: parent_hash, 3: round {0: epoch, 1: view},
     4: timestamp_ms, 5: proposer (32-byte Ed25519 key), 6: tx_root,
     7: state_root, 8: receipts_root, 9: beacon (48-byte BLS G1 seed of the parent's round),
     10: presence_input (null | PresenceInputV1 bytes, CIP-11 §7.2),
     11: consumed_seeds (array of ConsumedSeed maps, CIP-11 §9.2),
     12: cycles_used, 13: cells_used, 14: cycle_basefee, 15: cell_basefee}

``digest = keccak256(BLOCK_DIGEST_DOMAIN ‖ header_bytes)``. A block is
``{0: header, 1: [tx body, ...], 2: proposer Ed25519 signature over digest}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import (
    HASH_LEN,
    expect_bytes,
    expect_map,
    expect_optional_bytes,
    expect_text,
    expect_uint,
)
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError

BLOCK_DIGEST_DOMAIN = b"cowboy-block-v1:"
"""Domain tag of the block digest."""
BLS_SIG_LEN = 48
ED25519_KEY_LEN = 32
ED25519_SIG_LEN = 64
MAX_PRESENCE_INPUT_BYTES = 1 << 20


@dataclass(frozen=True, slots=True, order=True)
class Round:
    """Absolute consensus round (epoch, view): views grow along a chain and skip nullified views."""

    epoch: int
    """Consensus epoch."""
    view: int
    """View within the epoch."""

    def to_cbor(self) -> dict[int, int]:
        """Canonical map form."""
        return {0: self.epoch, 1: self.view}

    @classmethod
    def from_cbor(cls, value: object) -> Round:
        """Strict decode."""
        m = expect_map(value, frozenset({0, 1}), "round")
        return cls(expect_uint(m[0], "round.epoch"), expect_uint(m[1], "round.view"))


@dataclass(frozen=True, slots=True)
class ConsumedSeed:
    """One ConsumedSeedsV1 entry: a threshold seed consumed by a pending selection."""

    seed_epoch: int
    """Epoch of the seed's round."""
    seed_view: int
    """View of the seed's round."""
    seed_signature: bytes
    """48-byte compressed G1 threshold signature over the round."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map form."""
        return {0: self.seed_epoch, 1: self.seed_view, 2: self.seed_signature}

    @classmethod
    def from_cbor(cls, value: object) -> ConsumedSeed:
        """Strict decode."""
        m = expect_map(value, frozenset({0, 1, 2}), "consumed_seed")
        return cls(expect_uint(m[0], "consumed_seed.epoch"), expect_uint(m[1], "consumed_seed.view"),
                   expect_bytes(m[2], "consumed_seed.signature", BLS_SIG_LEN))


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """Everything a block commits to; see the module docstring for the encoding."""

    chain_id: str
    """Chain this block belongs to."""
    height: int
    """Block number; genesis is 0."""
    parent_hash: bytes
    """Digest of the parent header (32 zero bytes for genesis)."""
    round: Round
    """Consensus round in which the block was proposed."""
    timestamp_ms: int
    """Proposer's wall clock (ms since epoch); strictly greater than the parent's."""
    proposer: bytes
    """Proposer's Ed25519 public key."""
    tx_root: bytes
    """Merkle root of transaction hashes."""
    state_root: bytes
    """State commitment after executing this block."""
    receipts_root: bytes
    """Merkle root of receipt hashes."""
    beacon: bytes
    """Seed of the parent's round, R_{S−1} (CIP-11 §9.2): the threshold group signature over the parent's
    ``round`` (for block 1 the genesis beacon). The block's own round seed exists only once it is certified."""
    presence_input: bytes | None
    """PresenceInputV1 bytes exactly as proposed, or None when absent."""
    consumed_seeds: tuple[ConsumedSeed, ...]
    """Seeds consumed by pending selections in this block, sorted by round."""
    cycles_used: int
    """Total cycles charged in this block."""
    cells_used: int
    """Total cells charged in this block."""
    cycle_basefee: int
    """Basefee per cycle applied in this block."""
    cell_basefee: int
    """Basefee per cell applied in this block."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map form."""
        return {
            0: self.chain_id, 1: self.height, 2: self.parent_hash, 3: self.round.to_cbor(),
            4: self.timestamp_ms, 5: self.proposer, 6: self.tx_root, 7: self.state_root,
            8: self.receipts_root, 9: self.beacon, 10: self.presence_input,
            11: [s.to_cbor() for s in self.consumed_seeds], 12: self.cycles_used,
            13: self.cells_used, 14: self.cycle_basefee, 15: self.cell_basefee,
        }

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    def digest(self) -> bytes:
        """Block hash: keccak256(BLOCK_DIGEST_DOMAIN ‖ header bytes)."""
        return keccak256(BLOCK_DIGEST_DOMAIN + self.encode())

    @classmethod
    def from_cbor(cls, value: object) -> BlockHeader:
        """Strict decode."""
        m = expect_map(value, frozenset(range(16)), "header")
        if not isinstance(m[11], list):
            raise DecodeError("header.consumed_seeds: expected an array", field="consumed_seeds")
        return cls(
            chain_id=expect_text(m[0], "header.chain_id", 64),
            height=expect_uint(m[1], "header.height"),
            parent_hash=expect_bytes(m[2], "header.parent_hash", HASH_LEN),
            round=Round.from_cbor(m[3]),
            timestamp_ms=expect_uint(m[4], "header.timestamp_ms"),
            proposer=expect_bytes(m[5], "header.proposer", ED25519_KEY_LEN),
            tx_root=expect_bytes(m[6], "header.tx_root", HASH_LEN),
            state_root=expect_bytes(m[7], "header.state_root", HASH_LEN),
            receipts_root=expect_bytes(m[8], "header.receipts_root", HASH_LEN),
            beacon=expect_bytes(m[9], "header.beacon", BLS_SIG_LEN),
            presence_input=expect_optional_bytes(m[10], "header.presence_input", MAX_PRESENCE_INPUT_BYTES),
            consumed_seeds=tuple(ConsumedSeed.from_cbor(s) for s in m[11]),
            cycles_used=expect_uint(m[12], "header.cycles_used"),
            cells_used=expect_uint(m[13], "header.cells_used"),
            cycle_basefee=expect_uint(m[14], "header.cycle_basefee"),
            cell_basefee=expect_uint(m[15], "header.cell_basefee"),
        )

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {
            "chain_id": self.chain_id, "height": self.height, "hash": "0x" + self.digest().hex(),
            "parent_hash": "0x" + self.parent_hash.hex(),
            "round": {"epoch": self.round.epoch, "view": self.round.view},
            "timestamp_ms": self.timestamp_ms, "proposer": "0x" + self.proposer.hex(),
            "tx_root": "0x" + self.tx_root.hex(), "state_root": "0x" + self.state_root.hex(),
            "receipts_root": "0x" + self.receipts_root.hex(), "beacon": "0x" + self.beacon.hex(),
            "presence_input": None if self.presence_input is None else "0x" + self.presence_input.hex(),
            "consumed_seeds": [{"epoch": s.seed_epoch, "view": s.seed_view,
                                "signature": "0x" + s.seed_signature.hex()} for s in self.consumed_seeds],
            "cycles_used": self.cycles_used, "cells_used": self.cells_used,
            "cycle_basefee": self.cycle_basefee, "cell_basefee": self.cell_basefee,
        }


KnownTransaction = Callable[[bytes], Transaction | None]
"""A transaction already decoded here whose full signed body is exactly the given bytes, or None
(``Mempool.by_body``; see :meth:`Block.decode`)."""


def _transaction(body: bytes, known: KnownTransaction | None) -> Transaction:
    """The transaction of one block element: ``known``'s for exactly these bytes, else decoded."""
    if known is not None:
        tx = known(body)
        # The identity check is the guarantee, not an assumption about ``known``: reused only for these bytes.
        if tx is not None and tx.body() == body:
            return tx
    return Transaction.from_body(body)


@dataclass(frozen=True, slots=True)
class Block:
    """A header, its transactions and the proposer's finalizing signature."""

    header: BlockHeader
    """The committed header."""
    transactions: tuple[Transaction, ...]
    """Transactions in execution order."""
    signature: bytes
    """Proposer's Ed25519 signature over ``header.digest()`` (empty for genesis)."""
    _hash: bytes | None = field(default=None, compare=False, repr=False)

    def hash(self) -> bytes:
        """The header digest."""
        return self._hash if self._hash is not None else self.header.digest()

    def encode(self) -> bytes:
        """Canonical CBOR of the whole block."""
        return encode({0: self.header.to_cbor(), 1: [t.body() for t in self.transactions], 2: self.signature})

    @classmethod
    def decode(cls, raw: bytes, *, max_tx_bytes: int = 1 << 20,
               known: KnownTransaction | None = None) -> Block:
        """Strict decode of canonical block bytes.

        ``known`` (optional) returns a transaction already decoded from exactly the given body bytes, or None;
        such a transaction is used instead of decoding those bytes again, and only if its own ``body()`` is byte
        for byte that element. A follower passes its pool's (``Mempool.by_body``): its admission decoded the
        leader's transactions when they arrived by gossip or RPC (≈ 15 µs for a transfer). The block is equal
        either way: canonical decoding maps one byte string to one transaction, and the pooled one was decoded
        from exactly these bytes; a body ``known`` does not return is decoded, and a malformed one raises what
        it raises without ``known``.
        """
        try:
            value = decode(raw)
        except CodecError as e:
            raise DecodeError(f"block is not canonical CBOR: {e}") from e
        m = expect_map(value, frozenset({0, 1, 2}), "block")
        header = BlockHeader.from_cbor(m[0])
        if not isinstance(m[1], list):
            raise DecodeError("block.transactions: expected an array", field="transactions")
        txs = tuple(_transaction(expect_bytes(b, "block.tx", max_len=max_tx_bytes), known) for b in m[1])
        sig = expect_bytes(m[2], "block.signature")
        if len(sig) not in (0, ED25519_SIG_LEN):
            raise DecodeError("block.signature: expected 64 bytes", field="signature")
        return cls(header, txs, sig)
