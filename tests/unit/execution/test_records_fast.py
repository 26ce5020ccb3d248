"""``execution/records.py`` against the canonical path it stands in for.

Accounts: byte-equal encodings over a random corpus and the nonce head boundaries; decoding gives the same
account or raises the same error type and message for every one-byte mutation, truncation and extension of
stored records. Transfer event data, receipts and event-index entries: byte-equal over random corpora,
including the inputs the fast paths decline (which must still give the canonical bytes or error).
"""

from __future__ import annotations

import random

import pytest

from cowboy_node.chain.blockstore import block_ops
from cowboy_node.chain.event_index import index_ops
from cowboy_node.execution.records import (
    decode_account,
    encode_account,
    encode_receipt,
    transfer_event_data,
)
from cowboy_node.types.account import Account
from cowboy_node.types.block import Block, BlockHeader, Round
from cowboy_node.types.receipt import MAX_ERROR_MESSAGE_BYTES, Event, Receipt
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import U128_MAX, encode_u128

U64_MAX = (1 << 64) - 1
_NONCES = [0, 1, 23, 24, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, U64_MAX]


def _outcome(f: object, *args: object) -> tuple[str, object]:
    try:
        return "ok", f(*args)  # type: ignore[operator]
    except Exception as e:
        return type(e).__name__, str(e)


def _accounts(rng: random.Random, n: int) -> list[Account]:
    out = [Account(b, nonce) for b in (0, 1, U128_MAX) for nonce in _NONCES]
    for _ in range(n):
        nonce = rng.choice([*_NONCES, rng.randrange(1 << rng.choice((5, 8, 16, 32, 64)))])
        out.append(Account(rng.randrange(1 << rng.choice((8, 64, 100, 128))), nonce))
    return out


def test_account_golden_bytes_by_hand() -> None:
    # {0: balance as 16 big-endian bytes, 1: nonce}: map(2) a2, key 0, bytes(16) 50, ..., key 1, uint 24 = 18 18.
    assert encode_account(1, 24) == bytes.fromhex("a2" "00" "50" + "00" * 15 + "01" "01" "1818")


def test_encode_account_is_the_canonical_encoding() -> None:
    for a in _accounts(random.Random(10), 3_000):
        assert encode_account(a.balance, a.nonce) == a.encode(), a


@pytest.mark.parametrize(("balance", "nonce"), [(-1, 0), (U128_MAX + 1, 0), (0, -1), (0, U64_MAX + 1), (True, 0),
                                                (0, True), (1.5, 0)])
def test_encode_account_outside_the_fast_path_gives_the_canonical_result_or_error(balance: object,
                                                                                   nonce: object) -> None:
    assert _outcome(encode_account, balance, nonce) == _outcome(lambda: Account(balance, nonce).encode())  # type: ignore[arg-type]


def test_decode_account_every_one_byte_mutation_decodes_identically_or_raises_the_same_error() -> None:
    rng = random.Random(11)
    for a in _accounts(rng, 40):
        raw = a.encode()
        assert decode_account(raw) == a
        variants = [raw[:i] for i in range(len(raw))] + [raw + b"\x00", raw + raw[-1:]]
        for i in range(len(raw)):
            for x in range(256):
                variants.append(raw[:i] + bytes((x,)) + raw[i + 1:])
        for v in variants:
            assert _outcome(decode_account, v) == _outcome(Account.decode, v), v.hex()


def test_decode_account_of_other_buffer_types_is_the_canonical_decode() -> None:
    raw = Account(5, 7).encode()
    for v in (bytearray(raw), memoryview(raw), "x", None):
        assert _outcome(decode_account, v) == _outcome(Account.decode, v)


def test_transfer_event_data_is_the_canonical_map() -> None:
    rng = random.Random(12)
    for _ in range(2_000):
        to, amount = rng.randbytes(rng.choice((20, 20, 0, 32))), rng.randrange(1 << rng.choice((1, 64, 128)))
        assert transfer_event_data(to, amount) == encode({0: to, 1: encode_u128(amount)})
    for to, amount in ((b"\x01" * 20, -1), (b"\x01" * 20, U128_MAX + 1), (bytearray(20), 5), (b"\x01" * 20, True)):
        assert _outcome(transfer_event_data, to, amount) == _outcome(
            lambda: encode({0: to, 1: encode_u128(amount)}))  # noqa: B023


def _text(rng: random.Random, max_len: int) -> str:
    return "".join(rng.choice("abc_ ü€𝄞\u0000") for _ in range(rng.randrange(max_len)))


def _receipt(rng: random.Random) -> Receipt:
    events = tuple(Event(rng.randbytes(rng.choice((20, 20, 0, 33))), _text(rng, 40), rng.randbytes(rng.choice(
        (0, 5, 23, 24, 56, 300)))) for _ in range(rng.choice((0, 1, 1, 2, 5, 23, 24, 30))))
    failed = rng.random() < 0.3
    code = _text(rng, 30) if failed else None
    message = None
    if failed and rng.random() < 0.7:
        message = _text(rng, 60)[:MAX_ERROR_MESSAGE_BYTES // 4]
    return Receipt(rng.choice((0, 1)), rng.randrange(1 << rng.choice((5, 16, 64))),
                   rng.randrange(1 << rng.choice((5, 16, 64))), rng.randrange(1 << rng.choice((1, 64, 128))),
                   code, () if failed else events, message)


def test_encode_receipt_is_the_canonical_encoding_on_a_random_corpus() -> None:
    rng = random.Random(13)
    for _ in range(3_000):
        r = _receipt(rng)
        assert encode_receipt(r) == r.encode(), r


def test_encode_receipt_outside_the_fast_path_gives_the_canonical_result_or_error() -> None:
    ev = Event(b"\x01" * 20, "transfer", b"\x02")
    odd = [
        Receipt(0, 1, 1, 1, None, [ev]),  # type: ignore[arg-type]  # a list, not a tuple
        Receipt(0, 1, 1, 1, None, (ev, Event(bytearray(b"\x01" * 20), "t", b"")),),  # type: ignore[arg-type]
        Receipt(0, 1, 1, 1, None, (Event(b"\x01" * 20, "\ud800", b""),)),
        Receipt(1, 1, 1, 1, "\ud800", ()),
        Receipt(True, 1, 1, 1, None, ()),  # type: ignore[arg-type]
        Receipt(0, U64_MAX + 1, 1, 1, None, ()),
        Receipt(0, 1, 1, U128_MAX + 1, None, ()),
        Receipt(0, 1, 1, -1, None, ()),
    ]
    for r in odd:
        assert _outcome(encode_receipt, r) == _outcome(r.encode), r


def test_commit_writes_the_receipts_array_and_tx_index_whether_or_not_execution_passed_them() -> None:
    rng = random.Random(14)
    receipts = [_receipt(rng) for _ in range(30)]
    header = BlockHeader(chain_id="c", height=7, parent_hash=bytes(32), round=Round(0, 7), timestamp_ms=1,
                         proposer=bytes(32), tx_root=bytes(32), state_root=bytes(32), receipts_root=bytes(32),
                         beacon=bytes(48), presence_input=None, consumed_seeds=(), cycles_used=0, cells_used=0,
                         cycle_basefee=1, cell_basefee=1)
    block = Block(header, (), b"")
    plain = block_ops(block, receipts)
    given = block_ops(block, receipts, receipt_bytes=[r.encode() for r in receipts], tx_hashes=[])
    assert plain == given
    assert dict(plain)[b"R/" + (7).to_bytes(8, "big")] == encode([r.to_cbor() for r in receipts])
    assert keccak256(encode_receipt(receipts[0])) == receipts[0].hash()


def test_event_index_entries_are_the_canonical_arrays() -> None:
    rng = random.Random(15)
    receipts = [_receipt(rng) for _ in range(50)]
    block_events = [Event(rng.randbytes(20), _text(rng, 20), rng.randbytes(rng.randrange(40))) for _ in range(20)]
    ops = index_ops(3, receipts, block_events)
    events = [(e, i) for i, r in enumerate(receipts) for e in r.events] + [(e, None) for e in block_events]
    values = [v for k, v in ops if k.startswith(b"X/")]
    assert values == [encode([e.topic, e.data, i]) for e, i in events]
