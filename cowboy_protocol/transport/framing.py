"""Streaming, sans-I/O frame decoder for one QUIC stream (CIP-11 §12.1).

Feed it whatever bytes the stream delivered; it returns every complete frame. The
4-byte length is checked the moment it is complete — ``length == 0`` or ``length >
max_frame_bytes`` is rejected before any payload byte is kept, so a peer cannot make
this side buffer more than one maximal frame. Bytes left over when the stream ends
(:meth:`FrameDecoder.close`) are a truncated frame. Every failure is a
:class:`RemoteProtocolError` with reason ``ProtocolError``; after one, the decoder stays
failed (the connection is being closed).
"""

from __future__ import annotations

from cowboy_protocol.transport.frames import HEADER_LEN, MAX_FRAME_BYTES, Frame, decode_payload
from cowboy_protocol.transport.protocol_errors import RemoteProtocolError

__all__ = ["FrameDecoder", "decode_frame"]


def _check_length(length: int, max_frame_bytes: int) -> None:
    if length == 0:
        raise RemoteProtocolError("frame_length_zero", "frame length 0")
    if length > max_frame_bytes:
        raise RemoteProtocolError("frame_too_large", f"frame length {length} > {max_frame_bytes}")


def decode_frame(data: bytes, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> Frame:
    """Decode ``data`` that must be exactly one complete frame (prefix included)."""
    if len(data) < HEADER_LEN:
        raise RemoteProtocolError("frame_truncated", "shorter than the length prefix")
    length = int.from_bytes(data[:HEADER_LEN], "big")
    _check_length(length, max_frame_bytes)
    if len(data) != HEADER_LEN + length:
        code = "frame_truncated" if len(data) < HEADER_LEN + length else "trailing_bytes"
        raise RemoteProtocolError(code, f"frame length {length} but {len(data) - HEADER_LEN} bytes follow")
    return decode_payload(data[HEADER_LEN], bytes(data[HEADER_LEN + 1:]))


class FrameDecoder:
    """Incremental decoder: ``feed(bytes) -> list[Frame]``, then ``close()`` at end of stream."""

    def __init__(self, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        """``max_frame_bytes`` bounds ``length`` (type byte + payload); default §13 MAX_FRAME_BYTES."""
        self._max = max_frame_bytes
        self._buf = bytearray()
        self._length: int | None = None  # length of the frame being assembled, once its prefix is complete
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data``; return the frames it completed, in order. Raises on the first bad frame."""
        if self._error is not None:
            raise self._error
        try:
            return self._feed(data)
        except RemoteProtocolError as e:
            self._error = e
            self._buf.clear()
            raise

    def _feed(self, data: bytes) -> list[Frame]:
        out: list[Frame] = []
        pos = 0
        if self._length is None and not self._buf:
            # Usual case: the chunk starts on a frame boundary. Whole frames are decoded straight from ``data``
            # (no copy through the buffer); the same checks apply in the same order as below.
            n = len(data)
            while n - pos >= HEADER_LEN:
                length = int.from_bytes(data[pos:pos + HEADER_LEN], "big")
                _check_length(length, self._max)
                end = pos + HEADER_LEN + length
                if end > n:
                    break
                out.append(decode_payload(data[pos + HEADER_LEN], bytes(data[pos + HEADER_LEN + 1:end])))
                pos = end
        view = memoryview(data)
        while pos < len(view):
            if self._length is None:
                take = min(HEADER_LEN - len(self._buf), len(view) - pos)
                self._buf += view[pos:pos + take]
                pos += take
                if len(self._buf) < HEADER_LEN:
                    break
                length = int.from_bytes(self._buf, "big")
                _check_length(length, self._max)  # before any payload byte is kept
                self._length = length
                self._buf.clear()
            need = self._length - len(self._buf)
            take = min(need, len(view) - pos)
            self._buf += view[pos:pos + take]
            pos += take
            if len(self._buf) < self._length:
                break
            frame_bytes = bytes(self._buf)
            self._buf.clear()
            self._length = None
            out.append(decode_payload(frame_bytes[0], frame_bytes[1:]))
        return out

    def close(self) -> None:
        """End of stream: raise if a partial frame (prefix or payload) is pending."""
        if self._error is not None:
            raise self._error
        if self._buf or self._length is not None:
            self._error = RemoteProtocolError("frame_truncated", "stream ended inside a frame")
            raise self._error
