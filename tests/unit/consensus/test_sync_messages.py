"""Block-sync messages (cowboy_node/consensus/sync_messages.py): golden bytes derived by hand from the layout
in the module docstring (deterministic CBOR, docs/protocol.md §1) and the strict decoder's refusals."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import pytest

from cowboy_node.consensus.sync_messages import (
    MAX_PACKED_RAW,
    MAX_SYNC_BLOCKS,
    BlockRequest,
    PackedPage,
    Status,
    SyncMessage,
    SyncPage,
    SyncPruned,
    SyncRequest,
    SyncResponse,
    decode_sync,
    encode_sync,
    unpack_page,
)
from cowboy_protocol.types.validation_errors import DecodeError

DIGEST = bytes(range(32))

# Hand derivation (RFC 8949 major types: 0 uint, 2 bytes, 4 array, 5 map; a2/a3 = map of 2/3 pairs):
GOLDEN: list[tuple[str, SyncMessage, str]] = [
    # {0: 0, 1: 1000}: 1000 = 0x03e8 needs the 2-byte form 19 03e8
    ("status", Status(1000), "a2" "0000" "01" "1903e8"),
    # {0: 1, 1: h'00..1f'}: 32-byte string = 58 20 ‖ bytes
    ("block_request", BlockRequest(DIGEST), "a2" "0001" "01" "5820" + DIGEST.hex()),
    # {0: 2, 1: 10, 2: 64}: 10 fits the head byte (0a), 64 needs 18 40
    ("sync_request", SyncRequest(10, 64), "a3" "0002" "010a" "021840"),
    # {0: 3, 1: [h'6162', h'63'], 2: h'66696e'}
    ("sync_response", SyncResponse((b"ab", b"c"), b"fin"),
     "a3" "0003" "01" "82" "426162" "4163" "02" "4366696e"),
    # {0: 4, 1: [h'6162', h'63'], 2: 5, 3: h'66696e'}: a4 = map of 4 pairs
    ("sync_page", SyncPage((b"ab", b"c"), 5, b"fin"),
     "a4" "0004" "01" "82" "426162" "4163" "02" "05" "03" "4366696e"),
    # {0: 5, 1: 300}: 300 = 0x012c needs the 2-byte form 19 012c
    ("sync_pruned", SyncPruned(300), "a2" "0005" "01" "19012c"),
    # {0: 2, 1: 10, 2: 64, 3: 1}: the request accepts a PackedPage (key 3 omitted when it does not)
    ("sync_request_packed", SyncRequest(10, 64, packed=True), "a4" "0002" "010a" "021840" "0301"),
    # {0: 6, 1: 5, 2: 2, 3: 3, 4: h'7a7a'}: a5 = map of 5 pairs (placeholder data: this layer does not inflate it)
    ("packed_page", PackedPage(5, 2, 3, b"zz"), "a5" "0006" "0105" "0202" "0303" "04427a7a"),
]


@pytest.mark.parametrize("name,message,golden", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_bytes(name: str, message: SyncMessage, golden: str) -> None:
    assert encode_sync(message).hex() == golden
    assert decode_sync(bytes.fromhex(golden)) == message


def test_docs_protocol_md_pins_the_same_golden_bytes() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text(encoding="utf-8")
    blocks = {name: "".join(body.split())
              for name, body in re.findall(r"^```sync-golden ([\w./-]+)\n(.*?)^```", doc, re.M | re.S)}
    assert blocks == {name: golden for name, _, golden in GOLDEN}


def test_status_height_zero_and_max_u64_round_trip() -> None:
    assert encode_sync(Status(0)).hex() == "a2000001" "00"
    assert encode_sync(Status(2**64 - 1)).hex() == "a2000001" "1bffffffffffffffff"
    assert decode_sync(bytes.fromhex("a20000011bffffffffffffffff")) == Status(2**64 - 1)


def test_sync_request_bounds_are_inclusive() -> None:
    assert decode_sync(bytes.fromhex("a3000201000201")) == SyncRequest(0, 1)
    assert decode_sync(bytes.fromhex("a300020100021840")) == SyncRequest(0, 64)


def test_sync_response_with_the_most_blocks_round_trips() -> None:
    m = SyncResponse(tuple(b"\x01" for _ in range(MAX_SYNC_BLOCKS)), b"f")
    data = encode_sync(m)
    # 128 items: array head 98 80
    assert data[:6].hex() == "a300030198" "80"
    assert decode_sync(data) == m


BAD = {
    # wrong key sets
    "status_missing_height": "a10000",
    "status_extra_key": "a3" "0000" "0105" "0201",
    "block_request_extra_key": "a3" "0001" "015820" + DIGEST.hex() + "0200",
    "sync_request_missing_max": "a2" "0002" "010a",
    "sync_response_extra_key": "a4" "0003" "01814161" "024166" "0300",
    "no_kind": "a1" "0105",
    # bounds and types
    "max_blocks_zero": "a3" "0002" "010a" "0200",
    "max_blocks_65": "a3" "0002" "010a" "021841",
    "digest_31_bytes": "a2" "0001" "01581f" + DIGEST[:31].hex(),
    "height_negative": "a2" "0000" "0120",
    "empty_block_list": "a3" "0003" "0180" "024166",
    "block_not_bytes": "a3" "0003" "018161" "61" "024166",
    "finalization_not_bytes": "a3" "0003" "01814161" "0205",
    # non-canonical CBOR: 5 in the 1-byte form; keys out of order
    "non_shortest_int": "a2" "0000" "011805",
    "unsorted_keys": "a2" "0105" "0000",
    # unknown kinds and non-maps
    "unknown_kind_7": "a2" "0007" "0100",
    "sync_pruned_extra_key": "a3" "0005" "0100" "0200",
    "sync_page_missing_height": "a3" "0004" "01814161" "024166",
    "sync_page_height_not_uint": "a4" "0004" "01814161" "0220" "034166",
    "sync_page_empty_blocks": "a4" "0004" "0180" "0205" "034166",
    "kind_is_text": "a2" "006161" "0100",
    "not_a_map": "82" "0005",
    "trailing_byte": "a2" "0000" "0105" "00",
    # a SyncRequest's key 3 is 1 or absent
    "sync_request_packed_0": "a4" "0002" "010a" "021840" "0300",
    "sync_request_packed_2": "a4" "0002" "010a" "021840" "0302",
    "sync_request_packed_text": "a4" "0002" "010a" "021840" "036131",
    # PackedPage bounds
    "packed_page_zero_blocks": "a5" "0006" "0105" "0200" "0303" "04427a7a",
    "packed_page_129_blocks": "a5" "0006" "0105" "021881" "0303" "04427a7a",
    "packed_page_raw_size_zero": "a5" "0006" "0105" "0202" "0300" "04427a7a",
    "packed_page_raw_size_above_max": "a5" "0006" "0105" "0202" "031a01000001" "04427a7a",
    "packed_page_empty_data": "a5" "0006" "0105" "0202" "0303" "0440",
    "packed_page_missing_data": "a4" "0006" "0105" "0202" "0303",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_strict_decode_refuses(name: str) -> None:
    with pytest.raises(DecodeError):
        decode_sync(bytes.fromhex(BAD[name]))


def test_oversized_block_list_is_refused() -> None:
    # 129 one-byte strings: array head 98 81, each item 41 01.
    data = bytes.fromhex("a3" "0003" "01" "9881" + "4101" * (MAX_SYNC_BLOCKS + 1) + "024166")
    with pytest.raises(DecodeError):
        decode_sync(data)


def _packed(inner: SyncResponse | SyncPage, **over: object) -> PackedPage:
    raw = encode_sync(inner)
    fields: dict[str, object] = {"first_height": 1, "blocks": len(inner.blocks), "raw_size": len(raw),
                                 "data": zlib.compress(raw, 1)}
    fields.update(over)
    return PackedPage(**fields)  # type: ignore[arg-type]


def test_a_packed_page_unpacks_to_exactly_the_page_it_holds() -> None:
    inner = SyncPage((b"ab" * 1000, b"c"), 5, b"fin")
    packed = _packed(inner)
    assert len(packed.data) < packed.raw_size and decode_sync(encode_sync(packed)) == packed
    assert unpack_page(packed) == inner


@pytest.mark.parametrize("name", ["raw_size_short", "raw_size_long", "blocks_wrong", "not_zlib", "trailing",
                                  "not_a_page"])
def test_a_packed_page_that_is_not_what_it_declares_is_refused(name: str) -> None:
    inner = SyncResponse((b"ab" * 1000, b"c"), b"fin")
    raw = encode_sync(inner)
    bad = {
        "raw_size_short": _packed(inner, raw_size=len(raw) - 1),  # decompression stops there: never more
        "raw_size_long": _packed(inner, raw_size=len(raw) + 1),
        "blocks_wrong": _packed(inner, blocks=3),
        "not_zlib": _packed(inner, data=b"not zlib"),
        "trailing": _packed(inner, data=zlib.compress(raw) + b"x"),
        "not_a_page": _packed(inner, raw_size=len(encode_sync(Status(1))), data=zlib.compress(encode_sync(Status(1)))),
    }[name]
    with pytest.raises(DecodeError):
        unpack_page(bad)


def test_a_packed_page_never_inflates_past_its_declared_size() -> None:
    bomb = zlib.compress(bytes(MAX_PACKED_RAW * 4))  # 64 MiB of zeros in about 64 KiB
    with pytest.raises(DecodeError):
        unpack_page(PackedPage(1, 1, 1000, bomb))
