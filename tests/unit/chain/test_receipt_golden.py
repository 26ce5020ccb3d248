"""Receipt canonical encoding against the hand-derived golden bytes of docs/protocol.md §3.1, and the rules of
the bounded, deterministic ``error_message`` (receipt key 6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cowboy_node.types.receipt import (
    MAX_ERROR_MESSAGE_BYTES,
    STATUS_FAILED,
    STATUS_SUCCESS,
    Event,
    Receipt,
    bounded_message,
)
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.validation_errors import DecodeError

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
_BLOCK = re.compile(r"^```receipt-golden ([\w./-]+)\n(.*?)^```", re.M | re.S)


def _golden() -> dict[str, bytes]:
    return {name: bytes.fromhex("".join(body.split()))
            for name, body in _BLOCK.findall(DOC.read_text(encoding="utf-8"))}


GOLDEN = _golden()
SUCCESS = Receipt(STATUS_SUCCESS, 12_000, 300, 4_200_000_000, None,
                  (Event(b"\xaa" * 20, "transfer", b"\x01\x02"),))
FAILED = Receipt(STATUS_FAILED, 50_500, 180, 5_050_000_000, "handler_error", (),
                 "NameError: name 'foo' is not defined at line 3")


def test_the_document_has_every_receipt_vector() -> None:
    assert set(GOLDEN) == {"receipt/success", "receipt/failed", "receipt/failed-hash"}


@pytest.mark.parametrize(("name", "receipt"), [("receipt/success", SUCCESS), ("receipt/failed", FAILED)])
def test_receipt_encodes_to_the_golden_bytes_and_decodes_back(name: str, receipt: Receipt) -> None:
    assert receipt.encode() == GOLDEN[name]
    assert Receipt.from_cbor(decode(GOLDEN[name])) == receipt


def test_the_error_message_is_part_of_the_receipt_hash() -> None:
    assert FAILED.hash() == GOLDEN["receipt/failed-hash"]
    other = Receipt(FAILED.status, FAILED.cycles_used, FAILED.cells_used, FAILED.fee_paid, FAILED.error_code,
                    FAILED.events, "NameError: name 'bar' is not defined at line 3")
    assert other.hash() != FAILED.hash()


def test_a_receipt_without_key_6_is_refused() -> None:
    old = FAILED.to_cbor()
    del old[6]
    with pytest.raises(DecodeError):
        Receipt.from_cbor(decode(encode(old)))


def test_an_over_long_message_is_refused_by_the_decoder() -> None:
    doc = FAILED.to_cbor()
    doc[6] = "x" * (MAX_ERROR_MESSAGE_BYTES + 1)
    with pytest.raises(DecodeError):
        Receipt.from_cbor(decode(encode(doc)))


def test_a_message_without_an_error_code_is_refused() -> None:
    doc = SUCCESS.to_cbor()
    doc[6] = "why"
    with pytest.raises(DecodeError):
        Receipt.from_cbor(decode(encode(doc)))
    with pytest.raises(ValueError):
        Receipt(STATUS_SUCCESS, 1, 1, 1, None, (), "why")


def test_bounded_message_keeps_short_text_and_cuts_long_text_at_a_character_boundary() -> None:
    assert bounded_message("out_of_cycles") == "out_of_cycles"
    exact = "a" * MAX_ERROR_MESSAGE_BYTES
    assert bounded_message(exact) == exact
    # 'é' is 2 UTF-8 bytes: 253 bytes would split one, so the cut keeps 252 bytes of them (126 characters).
    cut = bounded_message("é" * 300)
    assert cut == "é" * 126 + "..."
    assert len(cut.encode("utf-8")) <= MAX_ERROR_MESSAGE_BYTES


def test_bounded_message_escapes_lone_surrogates() -> None:
    assert bounded_message("bad \ud800 char") == "bad \\ud800 char"
    Receipt(STATUS_FAILED, 1, 1, 1, "handler_error", (), bounded_message("\udfff" * 200)).encode()
