"""Fast paths for a Transfer transaction: decoding its ``tx_bytes`` and its signing-hash preimage.

A transfer's body has one shape, so its canonical bytes are a fixed template (``ab`` map of 11 entries; chain
id; nonce; sender; the instruction ``a3 00 00 01 54 <to> 02 50 <amount>``; six limits; ``0a 58 41``
signature). :func:`decode_transfer` reads exactly that template and returns what
:meth:`Transaction.from_bytes` would return for it, or ``None`` for any other input (another instruction, a
non-canonical or damaged body, a wrong prefix), after which the caller runs ``from_bytes`` itself and gets its
result or its error unchanged.

:func:`signing_hash` uses that the payload (the body without key 10) is the body's own bytes minus its last
entry, with an ``aa`` head: for a Transfer whose body ends in ``0a 58 41 <its 65-byte signature>``, that is
byte for byte what :meth:`Transaction.payload_bytes` encodes (the decoded fields round-trip), without encoding
it again. :func:`recover_signer` is :meth:`Transaction.recover_sender` over that hash (same address, same
error). ``tests/unit/execution/test_transfer_tx_fast.py`` checks all three against the canonical path.
"""

from __future__ import annotations

import struct

from cowboy_protocol.codec.fixed import read_uint
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import InvalidSignature, recover_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import SIGNATURE_LEN, TX_SIGNING_DOMAIN, Transaction
from cowboy_protocol.types.validation_errors import ValidationError

_LEN = struct.Struct(">I").unpack_from
_MAX_CHAIN_ID = 64
"""``expect_text(chain_id, 64)`` in :meth:`Transaction.from_body`."""
_SENDER_KEY = b"\x02\x54"
_INSTRUCTION = b"\x03\xa3\x00\x00\x01\x54"
"""Key 3, map of 3 entries, kind 0 (Transfer), key 1, byte string of 20 bytes (``to`` follows)."""
_AMOUNT_KEY = b"\x02\x50"
_SIGNATURE_ENTRY = b"\x0a\x58\x41"
"""Key 10, byte string of 65 bytes: the body's last entry (its largest key)."""
_SIG_TAIL = len(_SIGNATURE_ENTRY) + SIGNATURE_LEN
_PAYLOAD_HEAD = TX_SIGNING_DOMAIN + b"\xaa"
"""The signing domain, then the head of a map of 10 entries (the body's 11 without the signature)."""


def decode_transfer(tx_bytes: bytes, max_body: int | None = None) -> Transaction | None:
    """``Transaction.from_bytes(tx_bytes, max_body=max_body)`` if ``tx_bytes`` is a canonical Transfer within
    ``max_body``; ``None`` for anything else (never raises)."""
    if type(tx_bytes) is not bytes:
        return None
    n = len(tx_bytes)
    if n < 4 + 1 + _SIG_TAIL or _LEN(tx_bytes, 0)[0] != n - 4 or (max_body is not None and n - 4 > max_body):
        return None
    try:
        return _decode_body(tx_bytes, n)
    except IndexError:  # the body ends inside an item
        return None


def _decode_body(data: bytes, n: int) -> Transaction | None:
    if data[4] != 0xAB or data[5] != 0x00:
        return None
    ib = data[6]
    if 0x60 <= ib < 0x78:
        size, pos = ib - 0x60, 7
    elif ib == 0x78:
        size, pos = data[7], 8
        if size < 24 or size > _MAX_CHAIN_ID:
            return None
    else:
        return None
    end = pos + size
    if end > n:
        return None
    try:
        chain_id = data[pos:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if data[end] != 0x01:
        return None
    item = read_uint(data, end + 1)
    if item is None:
        return None
    nonce, pos = item
    if data[pos:pos + 2] != _SENDER_KEY:
        return None
    sender = data[pos + 2:pos + 22]
    pos += 22
    if data[pos:pos + 6] != _INSTRUCTION:
        return None
    to = data[pos + 6:pos + 26]
    pos += 26
    if data[pos:pos + 2] != _AMOUNT_KEY:
        return None
    amount = data[pos + 2:pos + 18]
    pos += 18
    limits: list[int] = []
    for key in range(4, 10):
        if data[pos] != key:
            return None
        item = read_uint(data, pos + 1)
        if item is None:
            return None
        limits.append(item[0])
        pos = item[1]
    if pos + _SIG_TAIL != n or data[pos:pos + 3] != _SIGNATURE_ENTRY:
        return None
    # Every fixed-length slice above lies before ``pos`` <= n - 68, so none of them was cut short.
    return Transaction(chain_id, nonce, sender, Transfer(to, int.from_bytes(amount, "big")), limits[0], limits[1],
                       limits[2], limits[3], limits[4], limits[5], data[pos + 3:], data[4:])


def signing_hash(tx: Transaction) -> bytes:
    """``tx.signing_hash()``; for a Transfer, hashed from its body's bytes instead of encoding the payload."""
    if type(tx.instruction) is Transfer:
        body = tx.body()
        sig = tx.signature
        if (type(sig) is bytes and len(sig) == SIGNATURE_LEN and body[0] == 0xAB
                and body[-_SIG_TAIL:-SIGNATURE_LEN] == _SIGNATURE_ENTRY and body[-SIGNATURE_LEN:] == sig):
            return keccak256(_PAYLOAD_HEAD + body[1:-_SIG_TAIL])
    return tx.signing_hash()


def recover_signer(tx: Transaction) -> bytes:
    """``tx.recover_sender()``: the signer's address, or the same ``ValidationError(bad_signature)``."""
    try:
        return recover_address(signing_hash(tx), tx.signature)
    except InvalidSignature as e:
        raise ValidationError("bad_signature", f"signature invalid: {e}", field="signature") from e
