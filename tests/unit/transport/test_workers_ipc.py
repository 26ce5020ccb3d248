"""The QUIC-worker channel codec (``transport/workers/ipc``) and the per-worker share of the server caps."""

from __future__ import annotations

import pytest

from cowboy_node.transport.workers import ipc
from cowboy_node.transport.workers.pool import worker_limits
from cowboy_protocol.quic.limits import ServerLimits


def test_message_layout_golden() -> None:
    # u32 length (5 + payload: kind byte + u32 conn + 2 bytes) ‖ kind 2 (FRAME) ‖ conn 7 ‖ payload.
    assert ipc.encode(ipc.Kind.FRAME, 7, b"\x01\x02") == bytes.fromhex("00000007" "02" "00000007" "0102")
    assert ipc.encode(ipc.Kind.AUTHENTICATED, 0x01020304) == bytes.fromhex("00000005" "0d" "01020304")


def test_decoder_reassembles_messages_split_anywhere() -> None:
    data = (ipc.encode(ipc.Kind.OPEN, 1, b"x" * 40) + ipc.encode(ipc.Kind.SEND, 2, b"")
            + ipc.encode(ipc.Kind.CLOSED, 1, b"idle_timeout"))
    for cut in range(len(data) + 1):
        d = ipc.Decoder()
        got = d.feed(data[:cut]) + d.feed(data[cut:])
        assert got == [ipc.Message(ipc.Kind.OPEN, 1, b"x" * 40), ipc.Message(ipc.Kind.SEND, 2, b""),
                       ipc.Message(ipc.Kind.CLOSED, 1, b"idle_timeout")]


@pytest.mark.parametrize("raw", [bytes.fromhex("00000004" "02" "00000000"),   # length below the header
                                 bytes.fromhex("01000001" "02" "00000000"),   # above MAX_MESSAGE
                                 bytes.fromhex("00000005" "63" "00000000")])  # kind 99
def test_torn_stream_is_an_error(raw: bytes) -> None:
    with pytest.raises(ipc.IpcError):
        ipc.Decoder().feed(raw)


def test_caps_are_split_over_workers_rounding_up() -> None:
    lim = worker_limits(ServerLimits(max_connections=10_000, max_half_open=513, retry_threshold=64), 2)
    assert (lim.max_connections, lim.max_half_open, lim.retry_threshold) == (5_000, 257, 32)
    assert worker_limits(ServerLimits(retry_threshold=0), 3).retry_threshold == 0  # 0 = always Retry, kept
    one = ServerLimits()
    assert worker_limits(one, 1) == one
