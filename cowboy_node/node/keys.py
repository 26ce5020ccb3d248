"""The validator key file (Ed25519 identity seed and BLS threshold share), stored as JSON.

Written and read with the same rules as every secret file (:mod:`cowboy_protocol.keys`: atomic 0600 write,
refused when group or others may access it)::

    {"type": "cowboy-validator", "ed25519_seed": "0x<64 hex>", "bls_secret": "0x<64 hex>",
     "bls_share_index": 1}
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.crypto.bls import secret_key_from_bytes
from cowboy_protocol.keys import KeyFileError, StrPath, hex_field, read_key_json, write_secret_json

VALIDATOR_KEY_TYPE = "cowboy-validator"
"""``type`` of a validator key file."""


@dataclass(frozen=True)
class ValidatorKey:
    """The validator's secrets: ed25519 identity seed and its BLS threshold share."""

    ed25519_seed: bytes
    """32-byte ed25519 seed (signs proposals and transport identity)."""
    bls_secret: bytes
    """32-byte big-endian BLS12-381 secret share (signs the beacon)."""
    bls_share_index: int
    """1-based index of the share in the threshold dealing."""

    def __post_init__(self) -> None:
        if len(self.ed25519_seed) != 32:
            raise ValueError("ed25519_seed must be 32 bytes")
        if len(self.bls_secret) != 32:
            raise ValueError("bls_secret must be 32 bytes")
        if isinstance(self.bls_share_index, bool) or not isinstance(self.bls_share_index, int) \
                or self.bls_share_index < 1:
            raise ValueError("bls_share_index must be a positive integer")

    def __repr__(self) -> str:  # never leak secrets into logs
        return f"ValidatorKey(ed25519_seed=<redacted>, bls_secret=<redacted>, bls_share_index={self.bls_share_index})"


# -- validator key --------------------------------------------------------------------
def write_validator_key(path: StrPath, key: ValidatorKey, *, overwrite: bool = False) -> None:
    """Write the validator key file (mode 0600)."""
    doc = {"type": VALIDATOR_KEY_TYPE, "ed25519_seed": "0x" + key.ed25519_seed.hex(),
           "bls_secret": "0x" + key.bls_secret.hex(), "bls_share_index": key.bls_share_index}
    write_secret_json(path, doc, overwrite=overwrite)


def load_validator_key(path: StrPath) -> ValidatorKey:
    """Read and validate a validator key file; raises KeyFileError."""
    doc = read_key_json(path, VALIDATOR_KEY_TYPE)
    seed = hex_field(path, doc, "ed25519_seed", 32)
    bls_secret = hex_field(path, doc, "bls_secret", 32)
    try:
        secret_key_from_bytes(bls_secret)
    except ValueError as e:
        raise KeyFileError(path, f"bls_secret is not a valid BLS secret key: {e}") from None
    index = doc.get("bls_share_index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 1:
        raise KeyFileError(path, "bls_share_index must be a positive integer")
    return ValidatorKey(ed25519_seed=seed, bls_secret=bls_secret, bls_share_index=index)
