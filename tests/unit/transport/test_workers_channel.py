"""The worker channel's write coalescing (``transport/workers/channel``): what the handlers of one read send
leaves in one write when that read has been handled, in order; sends made elsewhere leave together at the next
loop iteration."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cowboy_node.transport.workers import ipc
from cowboy_node.transport.workers.channel import ChannelProtocol


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))


class _Echo(ChannelProtocol):
    """Answers every FRAME with a SEND of the same payload on the same connection."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ipc.Message] = []

    def on_message(self, m: ipc.Message) -> None:
        self.seen.append(m)
        if m.kind is ipc.Kind.FRAME:
            self.send(ipc.Kind.SEND, m.conn, m.payload)

    def torn(self) -> None:
        raise AssertionError("not torn")


def test_replies_to_one_read_leave_in_one_write_at_its_end() -> None:
    ch, tr = _Echo(), _Transport()
    ch.connection_made(tr)  # type: ignore[arg-type]
    data = b"".join(ipc.encode(ipc.Kind.FRAME, c, bytes([c]) * c) for c in (1, 2, 3))
    ch.data_received(data)  # no event loop runs here: nothing may be deferred to one
    assert tr.writes == [b"".join(ipc.encode(ipc.Kind.SEND, c, bytes([c]) * c) for c in (1, 2, 3))]
    ch.data_received(ipc.encode(ipc.Kind.STATS, 0, b"{}"))  # no reply: no write
    assert len(tr.writes) == 1


def test_a_read_cut_inside_a_message_replies_once_it_completes() -> None:
    ch, tr = _Echo(), _Transport()
    ch.connection_made(tr)  # type: ignore[arg-type]
    data = ipc.encode(ipc.Kind.FRAME, 9, b"abc") + ipc.encode(ipc.Kind.FRAME, 10, b"de")
    ch.data_received(data[:12])
    assert tr.writes == [ipc.encode(ipc.Kind.SEND, 9, b"abc")]
    ch.data_received(data[12:])
    assert tr.writes[1:] == [ipc.encode(ipc.Kind.SEND, 10, b"de")]


def test_sends_outside_a_read_share_one_write_at_the_next_iteration() -> None:
    async def scenario() -> list[bytes]:
        ch, tr = _Echo(), _Transport()
        ch.connection_made(tr)  # type: ignore[arg-type]
        ch.send(ipc.Kind.AUTHENTICATED, 4)
        ch.send(ipc.Kind.CLOSE, 5, b"")
        assert tr.writes == []  # not yet
        await asyncio.sleep(0)
        return tr.writes

    assert asyncio.run(scenario()) == [ipc.encode(ipc.Kind.AUTHENTICATED, 4) + ipc.encode(ipc.Kind.CLOSE, 5, b"")]


def test_a_flush_delay_holds_sends_then_writes_them_together() -> None:
    async def scenario() -> tuple[list[bytes], list[float], list[bytes]]:
        loop = asyncio.get_running_loop()
        delays: list[float] = []
        real_call_later = loop.call_later

        def call_later(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
            delays.append(delay)
            return real_call_later(delay, callback, *args)  # never due within the test: it runs it itself

        loop.call_later = call_later  # type: ignore[method-assign, assignment]
        ch, tr = _Echo(), _Transport()
        ch.flush_delay_s = 3600.0  # "recent" covers the whole test
        ch.connection_made(tr)  # type: ignore[arg-type]
        ch.send(ipc.Kind.FRAME, 0, b"z")  # no write for a long time: no reason to wait
        await asyncio.sleep(0)
        assert tr.writes == [ipc.encode(ipc.Kind.FRAME, 0, b"z")] and delays == []
        ch.send(ipc.Kind.FRAME, 1, b"a")  # right after a write: wait for company
        await asyncio.sleep(0)
        ch.send(ipc.Kind.FRAME, 2, b"b")  # a later iteration, inside the delay: same write, no second timer
        await asyncio.sleep(0)
        early = tr.writes[1:]
        ch._scheduled_flush()  # what the timer runs
        return early, delays, tr.writes[1:]

    early, delays, writes = asyncio.run(scenario())
    assert early == [] and delays == [3600.0]
    assert writes == [ipc.encode(ipc.Kind.FRAME, 1, b"a") + ipc.encode(ipc.Kind.FRAME, 2, b"b")]


def test_replies_inside_a_read_are_not_delayed() -> None:
    ch, tr = _Echo(), _Transport()
    ch.flush_delay_s = 10.0
    ch.connection_made(tr)  # type: ignore[arg-type]
    ch.data_received(ipc.encode(ipc.Kind.FRAME, 3, b"x"))
    assert tr.writes == [ipc.encode(ipc.Kind.SEND, 3, b"x")]


def test_the_flush_delay_override_is_milliseconds_and_a_bad_value_keeps_the_default(
        caplog: pytest.LogCaptureFixture) -> None:
    from cowboy_node.transport.workers.worker import FLUSH_DELAY_S, _flush_delay_s

    assert _flush_delay_s(None) == FLUSH_DELAY_S
    assert _flush_delay_s("2.5") == 0.0025
    assert _flush_delay_s("-3") == 0.0  # never negative: 0 means the next loop iteration
    with caplog.at_level("WARNING"):
        assert _flush_delay_s("fast") == FLUSH_DELAY_S
    assert "COWBOY_WORKER_FLUSH_DELAY_MS" in caplog.text
