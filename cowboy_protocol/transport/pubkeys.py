"""Scheme-tagged wire public keys (CIP-11 §12.6 "Scheme-tagged keys").

On the wire every ``*_pubkey`` is ``scheme_id(1) ‖ key``: ``0x01 ‖ 33-byte compressed
secp256k1`` (34 bytes) or ``0x02 ‖ 32-byte Ed25519`` (33 bytes). Authoritative state keys
are raw: a validator's snapshot ``peer_pubkey`` is the 32 raw bytes, a runner's authority
is the EVM address derived from its secp256k1 key. :meth:`PubKey.from_bytes` rejects an
unknown scheme, a wrong length, or a secp256k1 key that is not a valid curve point.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.crypto import secp256k1
from cowboy_protocol.transport.enums import Role, Scheme
from cowboy_protocol.transport.protocol_errors import SignatureError

__all__ = ["PubKey"]


@dataclass(frozen=True, slots=True)
class PubKey:
    """A scheme-tagged public key; construct through :meth:`from_bytes`, :meth:`runner` or :meth:`validator`."""

    scheme: Scheme
    """Signature scheme of the key."""
    key: bytes
    """Raw key bytes (33 for secp256k1 compressed, 32 for Ed25519), without the tag."""

    def __post_init__(self) -> None:
        if len(self.key) != self.scheme.key_length:
            raise SignatureError(
                "pubkey_length", f"{self.scheme.name} key must be {self.scheme.key_length} bytes, got {len(self.key)}"
            )
        if self.scheme is Scheme.SECP256K1:
            try:
                secp256k1.public_key_to_address(self.key)
            except secp256k1.InvalidKey:
                raise SignatureError("pubkey_invalid", "secp256k1 key is not a valid compressed point") from None

    @classmethod
    def from_bytes(cls, data: bytes) -> PubKey:
        """Parse ``scheme_id ‖ key``; any unknown scheme or length mismatch is a :class:`SignatureError`."""
        if len(data) < 1:
            raise SignatureError("pubkey_length", "empty PubKey")
        try:
            scheme = Scheme(data[0])
        except ValueError:
            raise SignatureError("pubkey_scheme", f"unknown scheme_id 0x{data[0]:02x}") from None
        return cls(scheme, bytes(data[1:]))

    @classmethod
    def runner(cls, compressed_key: bytes) -> PubKey:
        """A runner key: 33-byte compressed secp256k1."""
        return cls(Scheme.SECP256K1, bytes(compressed_key))

    @classmethod
    def validator(cls, peer_pubkey: bytes) -> PubKey:
        """A validator key: the raw 32-byte Ed25519 ``peer_pubkey``."""
        return cls(Scheme.ED25519, bytes(peer_pubkey))

    def to_bytes(self) -> bytes:
        """Canonical wire bytes ``scheme_id ‖ key`` (also what preimages hash)."""
        return bytes([self.scheme]) + self.key

    def expect_role(self, role: Role) -> PubKey:
        """Return self if its scheme is the one ``role`` must use, else raise (fatal mismatch)."""
        if self.scheme is not Scheme.for_role(role):
            raise SignatureError(
                "role_scheme_mismatch", f"{role.name} key must be {Scheme.for_role(role).name}, got {self.scheme.name}"
            )
        return self

    def address(self) -> bytes:
        """20-byte EVM address of a secp256k1 key (the runner's on-chain authority)."""
        if self.scheme is not Scheme.SECP256K1:
            raise SignatureError("role_scheme_mismatch", "only secp256k1 keys have an address")
        return secp256k1.public_key_to_address(self.key)
