"""Streaming FrameDecoder (CIP-11 §12.1, §13 MAX_FRAME_BYTES): prefix checks before buffering, truncation, fuzz."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import MAX_FRAME_BYTES
from cowboy_protocol.transport.framing import FrameDecoder, decode_frame
from cowboy_protocol.transport.protocol_errors import RemoteProtocolError
from tests.unit.protocol.test_transport_frames import GOLDEN

STREAM = b"".join(wire for _, _, wire in GOLDEN)
FRAMES = [frame for _, frame, _ in GOLDEN]


def _code(decoder: FrameDecoder, data: bytes) -> str:
    with pytest.raises(RemoteProtocolError) as info:
        decoder.feed(data)
    assert info.value.reason is GoodbyeReason.PROTOCOL_ERROR
    return info.value.code


def test_whole_stream_in_one_chunk_yields_every_frame_in_order() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(STREAM) == FRAMES
    decoder.close()


def test_byte_by_byte_feeding_yields_the_same_frames() -> None:
    decoder = FrameDecoder()
    out = []
    for i in range(len(STREAM)):
        out.extend(decoder.feed(STREAM[i:i + 1]))
    assert out == FRAMES
    decoder.close()


def test_length_zero_is_rejected_as_soon_as_the_prefix_is_complete() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"\x00\x00") == []
    assert _code(decoder, b"\x00\x00") == "frame_length_zero"


def test_length_above_max_is_rejected_before_any_payload_arrives() -> None:
    decoder = FrameDecoder()
    assert _code(decoder, (MAX_FRAME_BYTES + 1).to_bytes(4, "big")) == "frame_too_large"
    assert decoder.buffered == 0
    small = FrameDecoder(max_frame_bytes=16)
    assert _code(small, (17).to_bytes(4, "big")) == "frame_too_large"


def test_length_equal_to_max_is_accepted_and_waits_for_the_payload() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(MAX_FRAME_BYTES.to_bytes(4, "big") + b"\x23") == []
    assert decoder.buffered == 1  # only what arrived is held; nothing preallocated


def test_truncated_frame_at_end_of_stream_is_rejected() -> None:
    for cut in (2, 4, 5, len(GOLDEN[0][2]) - 1):
        decoder = FrameDecoder()
        assert decoder.feed(GOLDEN[0][2][:cut]) == []
        with pytest.raises(RemoteProtocolError) as info:
            decoder.close()
        assert info.value.code == "frame_truncated"


def test_decoder_stays_failed_after_an_error() -> None:
    decoder = FrameDecoder()
    _code(decoder, b"\x00\x00\x00\x00")
    assert _code(decoder, GOLDEN[0][2]) == "frame_length_zero"
    with pytest.raises(RemoteProtocolError):
        decoder.close()


def test_unknown_type_inside_a_stream_is_rejected() -> None:
    decoder = FrameDecoder()
    assert _code(decoder, GOLDEN[0][2] + bytes.fromhex("0000000203f6")) == "unknown_frame_type"


def test_decode_frame_rejects_trailing_bytes_and_short_input() -> None:
    with pytest.raises(RemoteProtocolError):
        decode_frame(GOLDEN[0][2] + b"\x00")
    with pytest.raises(RemoteProtocolError):
        decode_frame(b"\x00\x00")


def _feed_all(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    pos = 0
    try:
        for cut in sorted(c % (len(data) + 1) for c in cuts):
            decoder.feed(data[pos:cut])
            pos = max(pos, cut)
        decoder.feed(data[pos:])
        decoder.close()
    except RemoteProtocolError:
        pass  # the only acceptable failure


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512), st.lists(st.integers(min_value=0, max_value=600), max_size=5))
def test_fuzz_random_bytes_raise_only_typed_errors(data: bytes, cuts: list[int]) -> None:
    _feed_all(data, cuts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=len(STREAM) - 1), st.integers(0, 255)), max_size=4),
       st.integers(min_value=0, max_value=len(STREAM)), st.lists(st.integers(0, len(STREAM)), max_size=4))
def test_fuzz_mutated_valid_frames_raise_only_typed_errors(flips: list[tuple[int, int]], cut: int,
                                                           cuts: list[int]) -> None:
    data = bytearray(STREAM)
    for pos, value in flips:
        data[pos] = value
    _feed_all(bytes(data[:cut]) if cut % 3 == 0 else bytes(data), cuts)
