"""Account state: balance and nonce, stored at ``ACCOUNT_PREFIX ‖ address``."""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import decode_u128, encode_u128, expect_map, expect_uint

ACCOUNT_PREFIX = b"acct/"
"""State key prefix of accounts."""


def account_key(address: bytes) -> bytes:
    """State key of the account at ``address``."""
    return ACCOUNT_PREFIX + address


@dataclass(frozen=True, slots=True)
class Account:
    """A native-token account."""

    balance: int = 0
    """Spendable balance (u128)."""
    nonce: int = 0
    """Number of transactions this account has had executed (next expected nonce)."""

    def encode(self) -> bytes:
        """Canonical CBOR ``{0: balance (u128 bytes), 1: nonce}``."""
        return encode({0: encode_u128(self.balance), 1: self.nonce})

    @classmethod
    def decode(cls, raw: bytes) -> Account:
        """Strict decode of stored bytes."""
        m = expect_map(decode(raw), frozenset({0, 1}), "account")
        return cls(decode_u128(m[0], "account.balance"), expect_uint(m[1], "account.nonce"))
