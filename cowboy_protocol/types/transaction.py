"""Transactions: canonical encoding, signing hash, ``tx_bytes`` framing.

Wire form (DESIGN.md §4, CIP-11 §10.3): ``tx_bytes = u32_be(len(body)) ‖ body``
where ``body`` is the deterministic-CBOR map

    {0: chain_id (text), 1: nonce (u64), 2: sender (20 bytes),
     3: instruction (map), 4: cycles_limit (u64), 5: cells_limit (u64),
     6: max_fee_per_cycle (u64), 7: max_priority_fee_per_cycle (u64),
     8: max_fee_per_cell (u64), 9: max_priority_fee_per_cell (u64),
     10: signature (65 bytes r‖s‖v)}

The signing hash is ``keccak256(TX_SIGNING_DOMAIN ‖ payload)`` where
``payload`` is the same map without key 10 (``payload_bytes``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from typing import Any

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import InvalidSignature, recover_address, sign_recoverable
from cowboy_protocol.types.fields import (
    ADDRESS_LEN,
    expect_bytes,
    expect_map,
    expect_text,
    expect_uint,
)
from cowboy_protocol.types.instructions import Instruction, instruction_from_cbor, instruction_to_cbor
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

TX_SIGNING_DOMAIN = b"cowboy-tx-v1:"
"""Domain tag prefixed to the payload before hashing for the signature."""
SIGNATURE_LEN = 65
_TX_KEYS = frozenset(range(11))
_LEN = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Transaction:
    """A signed account transaction."""

    chain_id: str
    """Chain the transaction is valid on (replay protection across chains)."""
    nonce: int
    """Sender's account nonce; must equal the account's next nonce when executed."""
    sender: bytes
    """Sender address (20 bytes); must equal the address recovered from ``signature``."""
    instruction: Instruction
    """What to do."""
    cycles_limit: int
    """Most compute cycles the sender pays for."""
    cells_limit: int
    """Most cells (bytes written or carried) the sender pays for."""
    max_fee_per_cycle: int
    """Ceiling on basefee + tip per cycle."""
    max_priority_fee_per_cycle: int
    """Ceiling on the proposer tip per cycle."""
    max_fee_per_cell: int
    """Ceiling on basefee + tip per cell."""
    max_priority_fee_per_cell: int
    """Ceiling on the proposer tip per cell."""
    signature: bytes = b""
    """65-byte recoverable secp256k1 signature over :meth:`signing_hash`."""
    _body: bytes | None = field(default=None, compare=False, repr=False)

    # -- encoding -----------------------------------------------------------------
    def payload_map(self) -> dict[int, Any]:
        """Canonical map without the signature (what is signed)."""
        return {
            0: self.chain_id,
            1: self.nonce,
            2: self.sender,
            3: instruction_to_cbor(self.instruction),
            4: self.cycles_limit,
            5: self.cells_limit,
            6: self.max_fee_per_cycle,
            7: self.max_priority_fee_per_cycle,
            8: self.max_fee_per_cell,
            9: self.max_priority_fee_per_cell,
        }

    def payload_bytes(self) -> bytes:
        """Canonical CBOR of the unsigned payload."""
        return encode(self.payload_map())

    def signing_hash(self) -> bytes:
        """``keccak256(TX_SIGNING_DOMAIN ‖ payload_bytes)``."""
        return keccak256(TX_SIGNING_DOMAIN + self.payload_bytes())

    def body(self) -> bytes:
        """Canonical CBOR of the full signed map (cached: decoded bodies keep their bytes)."""
        if self._body is not None:
            return self._body
        m = self.payload_map()
        m[10] = self.signature
        return encode(m)

    def to_bytes(self) -> bytes:
        """``tx_bytes``: u32 big-endian body length ‖ body."""
        b = self.body()
        return _LEN.pack(len(b)) + b

    def tx_hash(self) -> bytes:
        """Transaction id: keccak256 of the signed body."""
        return keccak256(self.body())

    # -- signing ------------------------------------------------------------------
    def signed(self, private_key: bytes) -> Transaction:
        """Return a copy signed with ``private_key`` (sender must be that key's address)."""
        unsigned = replace(self, signature=b"", _body=None)
        sig = sign_recoverable(private_key, unsigned.signing_hash())
        return replace(unsigned, signature=sig)

    def recover_sender(self) -> bytes:
        """Address that produced ``signature``; raises ValidationError(bad_signature)."""
        try:
            return recover_address(self.signing_hash(), self.signature)
        except InvalidSignature as e:
            raise ValidationError("bad_signature", f"signature invalid: {e}", field="signature") from e

    def verify_signature(self) -> None:
        """Raise ValidationError(bad_signature) unless ``signature`` is by ``sender``."""
        if self.recover_sender() != self.sender:
            raise ValidationError("bad_signature", "signature is not by the sender", field="signature")

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""

        return {
            "hash": "0x" + self.tx_hash().hex(),
            "chain_id": self.chain_id,
            "nonce": self.nonce,
            "sender": to_checksum_address(self.sender),
            "instruction": self.instruction.to_json(),
            "cycles_limit": self.cycles_limit,
            "cells_limit": self.cells_limit,
            "max_fee_per_cycle": self.max_fee_per_cycle,
            "max_priority_fee_per_cycle": self.max_priority_fee_per_cycle,
            "max_fee_per_cell": self.max_fee_per_cell,
            "max_priority_fee_per_cell": self.max_priority_fee_per_cell,
            "signature": "0x" + self.signature.hex(),
        }

    # -- decoding -----------------------------------------------------------------
    @classmethod
    def from_body(cls, body: bytes) -> Transaction:
        """Strictly decode a canonical body; raises DecodeError naming the problem."""
        try:
            value = decode(body)
        except CodecError as e:
            raise DecodeError(f"transaction is not canonical CBOR: {e}", code="malformed") from e
        m = expect_map(value, _TX_KEYS, "transaction")
        return cls(
            chain_id=expect_text(m[0], "chain_id", 64),
            nonce=expect_uint(m[1], "nonce"),
            sender=expect_bytes(m[2], "sender", ADDRESS_LEN),
            instruction=instruction_from_cbor(m[3]),
            cycles_limit=expect_uint(m[4], "cycles_limit"),
            cells_limit=expect_uint(m[5], "cells_limit"),
            max_fee_per_cycle=expect_uint(m[6], "max_fee_per_cycle"),
            max_priority_fee_per_cycle=expect_uint(m[7], "max_priority_fee_per_cycle"),
            max_fee_per_cell=expect_uint(m[8], "max_fee_per_cell"),
            max_priority_fee_per_cell=expect_uint(m[9], "max_priority_fee_per_cell"),
            signature=expect_bytes(m[10], "signature", SIGNATURE_LEN),
            _body=bytes(body),
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, max_body: int | None = None) -> Transaction:
        """Decode ``tx_bytes`` (length prefix ‖ body); the prefix must match exactly."""
        if len(data) < 4:
            raise DecodeError("tx_bytes shorter than its 4-byte length prefix", code="malformed")
        (n,) = _LEN.unpack_from(data)
        if max_body is not None and n > max_body:
            raise DecodeError(f"transaction body of {n} bytes exceeds the {max_body}-byte limit",
                              code="tx_too_large")
        if n != len(data) - 4:
            raise DecodeError(f"length prefix says {n} bytes but {len(data) - 4} follow", code="malformed")
        return cls.from_body(bytes(data[4:]))

    def max_fee(self) -> int:
        """Worst-case fee: both limits at their max fee per unit."""
        return self.cycles_limit * self.max_fee_per_cycle + self.cells_limit * self.max_fee_per_cell
