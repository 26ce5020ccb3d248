"""The actor record (canonical encoding) and the actor address.

Canonical encoding of :class:`ActorRecord` (deterministic CBOR map, integer keys)::

    {0: source_hash (bytes 32), 1: creator (bytes 20), 2: deployed_at (uint),
     3: handlers (array of text, in source order), 4: source_len (uint)}
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes, expect_map, expect_text, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

HASH_LEN = 32
"""Length of a keccak256 digest (the source hash)."""
MAX_HANDLER_NAME_BYTES = 256
"""Longest handler name stored in a record (UTF-8 bytes), as for CallActor."""
MAX_HANDLERS = 4096
"""Most handlers one record may list (bounds decoding)."""

_KEYS = frozenset(range(5))


@dataclass(frozen=True, slots=True)
class ActorRecord:
    """Protocol metadata of a deployed actor, stored at ``actor/<addr>/meta``."""

    source_hash: bytes
    """keccak256 of the UTF-8 source; the source itself is stored once at ``code/<source_hash>``."""
    creator: bytes
    """The deploying transaction's sender: the protocol owner (``pvm_host.actor_owner()``)."""
    deployed_at: int
    """Height of the block that deployed the actor."""
    handlers: tuple[str, ...]
    """Module-level functions of the source, in source order (what ``CallActor`` may name)."""
    source_len: int = 0
    """Length of the UTF-8 source in bytes (prices loading the code without reading it; always encoded)."""

    def to_cbor(self) -> dict[int, object]:
        """Canonical map form (see the module docstring)."""
        return {0: self.source_hash, 1: self.creator, 2: self.deployed_at, 3: list(self.handlers),
                4: self.source_len}

    def encode(self) -> bytes:
        """Canonical CBOR bytes of the record."""
        return encode(self.to_cbor())

    @classmethod
    def from_cbor(cls, value: object) -> ActorRecord:
        """Strict decode of the canonical map."""
        m = expect_map(value, _KEYS, "actor")
        handlers = m[3]
        if not isinstance(handlers, list) or len(handlers) > MAX_HANDLERS:
            raise DecodeError("actor.handlers: expected an array", field="actor.handlers")
        return cls(
            source_hash=expect_bytes(m[0], "actor.source_hash", HASH_LEN),
            creator=expect_bytes(m[1], "actor.creator", ADDRESS_LEN),
            deployed_at=expect_uint(m[2], "actor.deployed_at"),
            handlers=tuple(expect_text(h, "actor.handlers", MAX_HANDLER_NAME_BYTES) for h in handlers),
            source_len=expect_uint(m[4], "actor.source_len"),
        )

    @classmethod
    def decode(cls, raw: bytes) -> ActorRecord:
        """Strict decode of stored bytes."""
        return cls.from_cbor(decode(raw))


def source_hash(source: str) -> bytes:
    """keccak256 of the UTF-8 source (the same digest ``compile_actor`` reports)."""
    return keccak256(source.encode("utf-8", "surrogatepass"))


def derive_actor_address(creator: bytes, salt: bytes, source: str) -> bytes:
    """``keccak256(creator ‖ salt ‖ keccak256(source_utf8))[12:]`` — the last 20 bytes."""
    if len(creator) != ADDRESS_LEN:
        raise ValueError("creator must be a 20-byte address")
    return keccak256(creator + salt + source_hash(source))[12:]
