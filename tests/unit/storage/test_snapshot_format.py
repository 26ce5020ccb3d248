"""Golden bytes of the snapshot manifest and chunk encodings (docs/protocol.md "State snapshots")."""

from __future__ import annotations

import pytest

from cowboy_node.snapshot.manifest import (
    ChunkInfo,
    Manifest,
    SnapshotError,
    decode_chunk,
    decode_manifest,
    encode_chunk,
    encode_manifest,
)
from cowboy_node.state.slots import EMPTY_SLOT, SLOTS, Slot
from cowboy_node.state.tree import keccak256

CHUNK = [(b"k1", b"v"), (b"k", b"")]
# [[h'6b31', h'76'], [h'6b', h'']]: 82 = array of 2; each entry 82 ‖ byte strings (42 6b31, 41 76 / 41 6b, 40)
CHUNK_GOLDEN = "82" "82426b314176" "82416b40"

MANIFEST = Manifest("c", b"\x11" * 32, 5, b"B", b"F", (Slot(1, b"\x22" * 32), *([EMPTY_SLOT] * (SLOTS - 1))),
                    (ChunkInfo(0, 255, 7, b"\x33" * 32),), 1)
# {0: 1, 1: "c", 2: h'11'*32, 3: 5, 4: h'42', 5: h'46', 6: [[1, h'22'*32], [0, h''] * 255], 7: [[0, 255, 7, h'33'*32]],
#  8: 1}
MANIFEST_GOLDEN = ("a9" "0001" "016163" "025820" + "11" * 32 + "0305" "044142" "054146"
                   + "06" "990100" "82015820" + "22" * 32 + "820040" * 255 + "07" "81" "840018ff07" "5820" + "33" * 32
                   + "0801")


def test_chunk_golden_bytes() -> None:
    assert encode_chunk(CHUNK).hex() == CHUNK_GOLDEN
    assert decode_chunk(bytes.fromhex(CHUNK_GOLDEN)) == CHUNK


def test_manifest_golden_bytes() -> None:
    raw = encode_manifest(MANIFEST)
    assert raw.hex() == MANIFEST_GOLDEN
    assert decode_manifest(raw) == MANIFEST
    assert keccak256(raw).hex() == DOC_MANIFEST_KECCAK


DOC_MANIFEST_KECCAK = "b67fdd320533f706b5a488d9e97af2f529a7d5de7ff46955bb4dcc300227be7b"
"""Pinned in docs/protocol.md too."""


@pytest.mark.parametrize("mutate,code", [
    (lambda m: {**m, 0: 2}, "unsupported_format"),
    (lambda m: {k: v for k, v in m.items() if k != 8}, "bad_manifest"),
    (lambda m: {**m, 6: m[6][:255]}, "bad_manifest"),
    (lambda m: {**m, 7: [[1, 255, 7, b"\x33" * 32]]}, "bad_manifest"),  # a gap before the first chunk
    (lambda m: {**m, 7: [[0, 254, 7, b"\x33" * 32]]}, "bad_manifest"),  # the last slot uncovered
    (lambda m: {**m, 6: [[3, b""], *m[6][1:]]}, "bad_manifest"),
])
def test_malformed_manifests_are_refused_typed(mutate, code) -> None:  # type: ignore[no-untyped-def]
    from cowboy_protocol.codec import decode, encode

    body = decode(encode_manifest(MANIFEST))
    with pytest.raises(SnapshotError) as e:
        decode_manifest(encode(mutate(body)))
    assert e.value.code == code
