"""FrameDecoder paths that mutation testing (``make mutate-framing``, docs/testing.md) checks
(``cowboy_protocol/transport/framing.py``, CIP-11 §12.1): the same frames whatever the chunking (a chunk may start
inside a length prefix or inside a payload, where the whole-frame fast path must not be taken), the typed code of
each :func:`decode_frame` failure, and the length checks on every frame of a chunk, not only the first."""

from __future__ import annotations

import pytest

from cowboy_protocol.transport.framing import FrameDecoder, decode_frame
from cowboy_protocol.transport.protocol_errors import RemoteProtocolError
from tests.unit.protocol.test_transport_frames import GOLDEN
from tests.unit.protocol.test_transport_framing import FRAMES, STREAM


def _frames(chunks: list[bytes]) -> list[object]:
    decoder = FrameDecoder()
    out: list[object] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    decoder.close()  # nothing left over
    assert decoder.buffered == 0
    return out


def test_every_split_of_the_stream_into_two_chunks_yields_the_same_frames() -> None:
    for cut in range(len(STREAM) + 1):
        assert _frames([STREAM[:cut], STREAM[cut:]]) == FRAMES, cut


def test_a_chunk_starting_inside_a_prefix_or_a_payload_then_holding_whole_frames() -> None:
    first = len(GOLDEN[0][2])
    for cut in (1, 2, 3, 4, 5, first - 1):  # inside the first frame's prefix, just after it, inside its payload
        assert _frames([STREAM[:cut], STREAM[cut:first + 2], STREAM[first + 2:]]) == FRAMES, cut


def test_decode_frame_names_each_failure() -> None:
    wire = GOLDEN[0][2]

    def code(data: bytes) -> str:
        with pytest.raises(RemoteProtocolError) as e:
            decode_frame(data)
        return e.value.code

    assert code(wire + b"\x00") == "trailing_bytes"
    assert code(wire[:-1]) == "frame_truncated"
    assert code(wire[:3]) == "frame_truncated"  # shorter than the prefix
    assert code(b"\x00\x00\x00\x00") == "frame_length_zero"  # a complete prefix of length 0
    assert code((17).to_bytes(4, "big") + bytes(17)) != "frame_too_large"  # 17 is allowed by default ...
    with pytest.raises(RemoteProtocolError) as e:
        decode_frame((17).to_bytes(4, "big") + bytes(17), max_frame_bytes=16)
    assert e.value.code == "frame_too_large"  # ... but not under a bound of 16
    assert decode_frame(wire) == FRAMES[0]


def test_a_bad_length_after_whole_frames_in_the_same_chunk_is_refused() -> None:
    first = GOLDEN[0][2]
    bound = len(first) - 4  # the first frame's own length: allowed, one more is not
    for bad, code in ((b"\x00\x00\x00\x00", "frame_length_zero"), ((bound + 1).to_bytes(4, "big"), "frame_too_large")):
        decoder = FrameDecoder(max_frame_bytes=bound)
        with pytest.raises(RemoteProtocolError) as e:
            decoder.feed(first + bad + bytes(20))
        assert e.value.code == code
        assert decoder.buffered == 0  # the failed decoder holds nothing


def test_decode_frame_failure_says_how_many_bytes_follow_the_prefix() -> None:
    # The diagnostic (logged with the Goodbye) names the declared length and the bytes after the 4-byte prefix, so
    # an operator can tell a truncated frame from trailing bytes at a glance.
    wire = GOLDEN[0][2]
    length = len(wire) - 4
    for data, follow in ((wire[:-1], length - 1), (wire + b"\x00\x00", length + 2)):
        with pytest.raises(RemoteProtocolError) as e:
            decode_frame(data)
        assert e.value.message == f"frame length {length} but {follow} bytes follow"
