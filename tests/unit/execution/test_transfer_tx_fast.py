"""``execution/transfer_tx.py`` against :class:`Transaction`'s canonical path.

``decode_transfer`` returns exactly what ``Transaction.from_bytes`` returns (fields and cached body) or declines;
on every one-byte mutation, truncation and extension of transfers it never accepts what ``from_bytes`` refuses
nor decodes anything differently. ``signing_hash`` / ``recover_signer`` equal ``signing_hash()`` /
``recover_sender()`` (address, or error code and message). A :class:`Prepared` survives pickling unchanged.
"""

from __future__ import annotations

import pickle
import random
import struct
from dataclasses import replace

from cowboy_node.chain.signature_pool import Prepared, prepare_one
from cowboy_node.execution.transfer_tx import decode_transfer, recover_signer, signing_hash
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import CallActor, Transfer, TransferActorOwnership
from cowboy_protocol.types.transaction import TX_SIGNING_DOMAIN, Transaction
from cowboy_protocol.types.validation_errors import ValidationError

U64_MAX = (1 << 64) - 1
_INTS = [0, 1, 23, 24, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, U64_MAX]
_KEYS = [(i + 101).to_bytes(32, "big") for i in range(4)]


def _outcome(f: object, *args: object, **kw: object) -> tuple[str, object]:
    try:
        return "ok", f(*args, **kw)  # type: ignore[operator]
    except Exception as e:
        return type(e).__name__, str(e)


def _chain_id(rng: random.Random) -> str:
    """Up to 64 UTF-8 bytes (the decoder's limit), across the 23/24 text-head boundary."""
    s = "".join(rng.choice("ab-1ü€𝄞") for _ in range(rng.choice((0, 1, 5, 23, 24, 30, 40, 64))))
    while len(s.encode()) > 64:
        s = s[:-1]
    return s


def _int(rng: random.Random) -> int:
    return rng.choice(_INTS) if rng.random() < 0.4 else rng.randrange(1 << rng.choice((5, 8, 16, 32, 64)))


def _transfer(rng: random.Random, instruction: object = None) -> Transaction:
    k = rng.choice(_KEYS)
    ins = instruction or Transfer(to=rng.randbytes(20), amount=rng.randrange(1 << rng.choice((1, 64, 128))))
    return Transaction(chain_id=_chain_id(rng), nonce=_int(rng), sender=private_key_to_address(k),
                       instruction=ins, cycles_limit=_int(rng), cells_limit=_int(rng),  # type: ignore[arg-type]
                       max_fee_per_cycle=_int(rng), max_priority_fee_per_cycle=_int(rng),
                       max_fee_per_cell=_int(rng), max_priority_fee_per_cell=_int(rng)).signed(k)


def _same(fast: Transaction | None, raw: bytes, max_body: int | None = None) -> None:
    slow = _outcome(Transaction.from_bytes, raw, max_body=max_body)
    if fast is None:
        return  # declined: the caller runs from_bytes itself
    assert slow[0] == "ok", (raw.hex(), slow)
    tx = slow[1]
    assert fast == tx and fast.body() == tx.body() and type(fast.instruction) is Transfer  # type: ignore[union-attr]
    assert fast.instruction == tx.instruction  # type: ignore[union-attr]


def test_decode_transfer_is_from_bytes_on_a_random_corpus() -> None:
    rng = random.Random(20)
    for _ in range(1_500):
        raw = _transfer(rng).to_bytes()
        fast = decode_transfer(raw)
        assert fast is not None
        _same(fast, raw)
        assert fast.tx_hash() == keccak256(raw[4:])


def test_decode_transfer_hand_built_body() -> None:
    # The layout by hand: ab; 00 "c"; 01 nonce 24; 02 sender; 03 {0: 0, 1: to, 2: amount}; 04..09 limits; 0a sig.
    sender, to, sig = b"\x11" * 20, b"\x22" * 20, b"\x33" * 65
    body = (b"\xab" b"\x00\x61c" b"\x01\x18\x18" b"\x02\x54" + sender + b"\x03\xa3\x00\x00\x01\x54" + to
            + b"\x02\x50" + (7).to_bytes(16, "big") + b"\x04\x01\x05\x02\x06\x03\x07\x04\x08\x05\x09\x06"
            + b"\x0a\x58\x41" + sig)
    tx = decode_transfer(struct.pack(">I", len(body)) + body)
    assert tx == Transaction("c", 24, sender, Transfer(to, 7), 1, 2, 3, 4, 5, 6, sig)
    assert tx is not None and tx.body() == body
    assert signing_hash(tx) == keccak256(TX_SIGNING_DOMAIN + b"\xaa" + body[1:-68]) == tx.signing_hash()


def test_every_one_byte_mutation_of_a_transfer_decodes_identically_or_is_declined() -> None:
    rng = random.Random(21)
    for _ in range(6):
        raw = _transfer(rng).to_bytes()
        variants = [raw[:i] for i in range(len(raw))] + [raw + b"\x00"]
        for i in range(len(raw)):
            for x in range(0, 256, 3):
                variants.append(raw[:i] + bytes((x,)) + raw[i + 1:])
            variants.append(raw[:i] + bytes((raw[i] ^ 1,)) + raw[i + 1:])
        for v in variants:
            _same(decode_transfer(v), v)


def test_max_body_and_other_instructions_are_declined() -> None:
    rng = random.Random(22)
    raw = _transfer(rng).to_bytes()
    n = len(raw) - 4
    assert decode_transfer(raw, n) is not None
    assert decode_transfer(raw, n - 1) is None
    assert _outcome(Transaction.from_bytes, raw, max_body=n - 1)[0] == "DecodeError"
    for ins in (TransferActorOwnership(b"\x01" * 20, b"\x02" * 20), CallActor(b"\x01" * 20, "m", b"")):
        other = _transfer(rng, ins).to_bytes()
        assert decode_transfer(other) is None
    assert decode_transfer(bytearray(raw)) is None  # type: ignore[arg-type]
    long_id = replace(_transfer(rng), chain_id="a" * 65).signed(_KEYS[0]).to_bytes()
    assert decode_transfer(long_id) is None
    assert _outcome(Transaction.from_bytes, long_id)[0] == "DecodeError"


def test_signing_hash_and_recovery_equal_the_transactions_own() -> None:
    rng = random.Random(23)
    for _ in range(200):
        tx = _transfer(rng)
        decoded = Transaction.from_bytes(tx.to_bytes())
        for t in (tx, decoded):
            assert signing_hash(t) == t.signing_hash()
            assert recover_signer(t) == t.recover_sender() == t.sender
    tx = _transfer(rng)
    odd = [replace(tx, signature=b""), replace(tx, signature=tx.signature[:64]),
           replace(tx, signature=bytes(65)), replace(tx, signature=tx.signature[:64] + b"\x05"),
           replace(tx, signature=tx.signature[:10] + b"\xff" + tx.signature[11:]),
           replace(tx, nonce=tx.nonce ^ 1)]
    odd += [replace(_transfer(rng, CallActor(b"\x01" * 20, "m", b"")))]
    for t in odd:
        assert signing_hash(t) == t.signing_hash()
        assert _outcome(recover_signer, t) == _outcome(t.recover_sender)
    assert _outcome(recover_signer, odd[0])[0] == ValidationError.__name__


def test_prepared_round_trips_through_pickle() -> None:
    rng = random.Random(24)
    items = [prepare_one(_transfer(rng).to_bytes()) for _ in range(20)]
    items.append(prepare_one(_transfer(rng, CallActor(b"\x01" * 20, "m", b"")).to_bytes()))
    bad = _transfer(rng)
    items.append(prepare_one(replace(bad, signature=bytes(65)).to_bytes()))
    for p in items:
        assert isinstance(p, Prepared)
        back = pickle.loads(pickle.dumps(p))
        assert back == p and back.tx.body() == p.tx.body() and type(back.tx.instruction) is type(p.tx.instruction)
    assert isinstance(items[-1], Prepared) and isinstance(items[-1].recovered, tuple)


def test_prepare_one_is_the_canonical_decode_hash_and_recovery() -> None:
    rng = random.Random(25)
    for _ in range(50):
        raw = _transfer(rng).to_bytes()
        p = prepare_one(raw)
        tx = Transaction.from_bytes(raw)
        assert p == Prepared(tx, tx.tx_hash(), tx.recover_sender())
