"""The asyncio end of a worker channel, shared by both sides: decodes :mod:`ipc` messages and coalesces sends.

Writes made in one event-loop iteration go out as one ``transport.write`` (a burst of frames to many runners
costs one system call); a torn stream (:class:`ipc.IpcError`) is handed to :meth:`ChannelProtocol.torn`.
What the handlers of one read send (the pongs answering the pings it carried) leaves in one write at the end of
that read, without a further loop iteration and callback per read.
"""

from __future__ import annotations

import asyncio
from typing import cast

from cowboy_node.transport.workers import ipc


class ChannelProtocol(asyncio.Protocol):
    """Base of :class:`relay.RelayChannel` (validator side) and :class:`worker._Channel` (worker side)."""

    flush_delay_s: float = 0.0
    """How long a send made outside a read may wait for others to share its write (0: the next loop iteration).
    Each write wakes the other process once: the worker waits a little (``worker.FLUSH_DELAY_S``) so that under
    load several runners' frames reach the validator process per wake-up. Only under load: when the previous
    write is older than the delay, the send leaves at the next loop iteration (a lone frame gains nothing by
    waiting, and the wait would cost a timer wake-up of its own)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        """The Unix stream socket, once connected."""
        self.decoder = ipc.Decoder()
        self._out = bytearray()
        self._flush_scheduled = False
        self._receiving = False  # inside data_received: sends are written when it returns
        self._last_flush = float("-inf")  # loop time of the last scheduled flush

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            messages = self.decoder.feed(data)
        except ipc.IpcError:
            self.torn()
            return
        self._receiving = True
        try:
            for m in messages:
                self.on_message(m)
        finally:
            self._receiving = False
            if self._out and not self._flush_scheduled:
                self._flush()

    def on_message(self, m: ipc.Message) -> None:
        """One decoded message (subclasses)."""
        raise NotImplementedError

    def torn(self) -> None:
        """The stream does not decode (a crash mid-write); subclasses log and drop the channel."""
        raise NotImplementedError

    def send(self, kind: ipc.Kind, conn: int, payload: bytes = b"") -> None:
        """Queue one message; flushed with the others of this loop iteration."""
        self._out += ipc.encode(kind, conn, payload)
        if not self._flush_scheduled and not self._receiving:
            self._flush_scheduled = True
            loop = asyncio.get_running_loop()
            delay = self.flush_delay_s
            if delay > 0 and loop.time() - self._last_flush < delay:
                loop.call_later(delay, self._scheduled_flush)
            else:
                loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._last_flush = asyncio.get_running_loop().time()
        self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.transport is not None and not self.transport.is_closing() and self._out:
            self.transport.write(bytes(self._out))
        self._out.clear()
