"""Messages between the validator process and a QUIC worker over a Unix stream socket (sans-I/O).

One message is ``u32_be length ‖ u8 kind ‖ u32_be conn ‖ payload`` where ``length`` counts everything after
itself (so ≥ 5) and ``conn`` is the worker-local connection number (0 for whole-worker messages). The channel
is a socketpair between a parent and the child it started, so both ends are trusted code of this repository;
the checks here catch bugs (and a torn stream after a crash), not an adversary.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

HEADER = struct.Struct(">IBI")
"""length, kind, conn."""
MAX_MESSAGE = 1 << 24
"""Largest ``length`` accepted (a frame is at most MAX_FRAME_BYTES, far below)."""


class Kind(enum.IntEnum):
    """Message kinds: 1-9 worker → validator, 10-19 validator → worker."""

    OPEN = 1
    """TLS done: payload = 32-byte channel binding ‖ ``host:port`` of the peer (UTF-8)."""
    FRAME = 2
    """One frame from the runner, encoded as on the wire (``encode_frame``)."""
    CLOSED = 3
    """The connection closed (the adapter's ``on_close`` reason, UTF-8); nothing follows for ``conn``."""
    STATS = 4
    """The worker's ``ServerStats`` as JSON (conn 0), sent every second and before exiting."""
    CONFIG = 10
    """First message to a worker (conn 0): JSON with the PEM certificate/key, reset secret and limits."""
    SEND = 11
    """Send this encoded frame on the connection's stream 0."""
    CLOSE = 12
    """Close the connection with the encoded Goodbye in the payload (empty: no Goodbye)."""
    AUTHENTICATED = 13
    """The session authenticated the runner: the connection stops counting as half-open."""


class IpcError(Exception):
    """The byte stream is not a sequence of messages (a bug or a torn channel): drop the channel."""


@dataclass(frozen=True, slots=True)
class Message:
    """One decoded message."""

    kind: Kind
    """What it is."""
    conn: int
    """Worker-local connection number (0: the worker itself)."""
    payload: bytes
    """Kind-specific bytes."""


def encode(kind: Kind, conn: int, payload: bytes = b"") -> bytes:
    """The message's bytes."""
    return HEADER.pack(HEADER.size - 4 + len(payload), kind, conn) + payload


class Decoder:
    """Incremental: ``feed(bytes) -> list[Message]``."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        """Consume ``data``; the messages it completed, in order. Raises :class:`IpcError` on a bad header."""
        buf = self._buf
        buf += data
        out: list[Message] = []
        pos = 0
        while len(buf) - pos >= HEADER.size:
            length, kind, conn = HEADER.unpack_from(buf, pos)
            if length < HEADER.size - 4 or length > MAX_MESSAGE:
                raise IpcError(f"message length {length}")
            end = pos + 4 + length
            if end > len(buf):
                break
            try:
                k = Kind(kind)
            except ValueError:
                raise IpcError(f"unknown message kind {kind}") from None
            out.append(Message(k, conn, bytes(buf[pos + HEADER.size:end])))
            pos = end
        del buf[:pos]
        return out
