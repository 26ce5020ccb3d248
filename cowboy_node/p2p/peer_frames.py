"""Validator peer layer, sans-I/O part: frames, the framing reader, the signed Hello preimage, token buckets.

No asyncio, no sockets and no clock here (DESIGN.md §3 rule 3): the QUIC adapter (``peer_quic``) moves bytes,
``peers.PeerNetwork`` drives the handshake and the limits with these functions. The wire format is documented in
``docs/protocol.md`` "Validator peer layer" and pinned byte for byte by ``tests/unit/p2p/test_peer_frames.py``.

**Framing.** One bidirectional QUIC stream per connection (the dialer's stream 0) carries
``u32_be length ‖ body``, ``body`` the deterministic CBOR (strict decoder) of a map with small integer keys,
key 0 the kind:

* ``Hello``    ``{0: 0, 1: version, 2: network_id, 3: index, 4: signature, 5: software}`` — dialer → listener,
  first frame;
* ``HelloAck`` ``{0: 1, 1: version, 2: network_id, 3: index, 4: signature, 5: software}`` — listener → dialer;
* ``Data``     ``{0: 2, 1: channel, 2: payload}`` — dialer → listener only, after the handshake;
* ``Goodbye``  ``{0: 3, 1: reason}`` — either way, then the connection closes.

A length of 0 or above the cap is refused as soon as its 4-byte prefix is read, before any body byte is kept.

**Handshake signature** (both directions, ``role`` 0 for the dialer's Hello, 1 for the listener's HelloAck)::

    Ed25519(seed, b"cowboy-p2p-hello-v1:" ‖ network_id(32) ‖ role(1) ‖ u16_be(index) ‖ tls_exporter(32))

``tls_exporter`` is ``TLS-Exporter("EXPORTER-cowboy-p2p-channel-binding", "", 32)`` of the QUIC connection, so a
signature proves possession of the validator key *on this TLS channel*: a relay terminating TLS twice sees two
different exporters and cannot forward a valid Hello.

**Versions** (issue 34 §3). ``version`` is the peer protocol version; a peer whose version is outside
``MIN_PROTOCOL_VERSION..PROTOCOL_VERSION`` is refused with the typed reason ``incompatible_version`` (checked before
anything else, and whatever other keys a Hello of another version carries, so a future version's Hello is still
refused by name, not as ``bad_frame``). ``software`` is the sender's software version (``cowboy-node/0.1.0``),
informational: logged with a refusal so operators see which binary a peer runs. It is not in the signed preimage
(unchanged, so the signature rules are those of version 1); the TLS channel the signature is bound to carries it
unaltered. A Hello without key 5 (a node from before this field) is accepted with ``software`` empty.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto import ed25519

__all__ = [
    "BINDING_BYTES",
    "EXPORTER_LABEL",
    "FRAME_OVERHEAD",
    "HANDSHAKE_FAILURES",
    "HELLO_DOMAIN",
    "KIND_DATA",
    "KIND_GOODBYE",
    "KIND_HELLO",
    "KIND_HELLO_ACK",
    "MAX_REASON_CHARS",
    "MAX_SOFTWARE_CHARS",
    "MIN_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "ROLE_DIALER",
    "ROLE_LISTENER",
    "SOFTWARE_VERSION",
    "Data",
    "Frame",
    "FrameReader",
    "Goodbye",
    "HandshakeError",
    "Hello",
    "PeerFrameError",
    "TokenBucket",
    "decode_body",
    "encode_data",
    "encode_frame",
    "hello_preimage",
    "make_hello",
    "verify_hello",
]

HELLO_DOMAIN: Final = b"cowboy-p2p-hello-v1:"
"""Domain prefix of the signed handshake preimage."""
EXPORTER_LABEL: Final = b"EXPORTER-cowboy-p2p-channel-binding"
"""TLS exporter label of the peer-layer channel binding (distinct from the CIP-11 runner one)."""
BINDING_BYTES: Final = 32
"""Bytes of exporter output in the preimage."""
PROTOCOL_VERSION: Final = 1
"""The peer protocol version this node sends (the newest it speaks)."""
MIN_PROTOCOL_VERSION: Final = 1
"""The oldest peer protocol version this node accepts."""
MAX_SOFTWARE_CHARS: Final = 64
"""Longest ``software`` text accepted."""


def _software_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # read once, at import

    try:
        return f"cowboy-node/{version('cowboy-node')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "cowboy-node/unknown"


SOFTWARE_VERSION: Final = _software_version()
"""What this node puts in its Hello's ``software`` key."""
ROLE_DIALER: Final = 0
ROLE_LISTENER: Final = 1
KIND_HELLO: Final = 0
KIND_HELLO_ACK: Final = 1
KIND_DATA: Final = 2
KIND_GOODBYE: Final = 3
FRAME_OVERHEAD: Final = 64
"""A frame body may exceed ``max_message_bytes`` by this much (the Data map around the payload)."""
MAX_REASON_CHARS: Final = 256
"""Longest Goodbye reason accepted."""
NETWORK_ID_BYTES: Final = 32
PUBLIC_KEY_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
MAX_INDEX: Final = 0xFFFF

HANDSHAKE_FAILURES: Final = ("wrong_network", "unknown_validator", "bad_signature", "unexpected_identity",
                             "handshake_timeout", "bad_frame", "incompatible_version")
"""Every reason a handshake is refused with (metric label values)."""

_LEN = struct.Struct(">I")


class PeerFrameError(ValueError):
    """A frame or byte stream the peer layer refuses; ``code`` is ``frame_too_large`` or ``bad_frame``."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


class HandshakeError(Exception):
    """A Hello/HelloAck refused; ``reason`` is one of :data:`HANDSHAKE_FAILURES`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Hello:
    """Hello (``role`` 0, sent by the dialer) or HelloAck (``role`` 1, the listener's answer); kind = role."""

    role: int
    """0 dialer (Hello), 1 listener (HelloAck)."""
    network_id: bytes
    """32 bytes: the genesis hash of the sender's chain."""
    index: int
    """The sender's validator index (position in the genesis validator list)."""
    signature: bytes
    """64-byte Ed25519 signature over :func:`hello_preimage` with the sender's role, index and exporter."""
    version: int = PROTOCOL_VERSION
    """Peer protocol version (1)."""
    software: str = ""
    """The sender's software version, e.g. ``cowboy-node/0.1.0`` (informational; "" from a node that sent none)."""


@dataclass(frozen=True, slots=True)
class Data:
    """One opaque message on ``channel`` (0 consensus, 1 blocks, 2 transactions, 3 sync)."""

    channel: int
    """0..255."""
    payload: bytes
    """Opaque to this layer."""


@dataclass(frozen=True, slots=True)
class Goodbye:
    """The sender closes the connection for ``reason`` (e.g. a handshake failure reason)."""

    reason: str
    """Short text, at most :data:`MAX_REASON_CHARS` characters."""


Frame = Hello | Data | Goodbye


def _framed(body: bytes) -> bytes:
    return _LEN.pack(len(body)) + body


def encode_frame(frame: Frame) -> bytes:
    """``u32_be length ‖ canonical CBOR`` of ``frame``."""
    if isinstance(frame, Hello):
        body: dict[int, object] = {0: frame.role, 1: frame.version, 2: frame.network_id, 3: frame.index,
                                   4: frame.signature}
        if frame.software:
            body[5] = frame.software[:MAX_SOFTWARE_CHARS]
        return _framed(encode(body))
    if isinstance(frame, Data):
        return encode_data(frame.channel, frame.payload)
    return _framed(encode({0: KIND_GOODBYE, 1: frame.reason[:MAX_REASON_CHARS]}))


def encode_data(channel: int, payload: bytes) -> bytes:
    """The framed Data frame (the send hot path: built once per broadcast)."""
    if not 0 <= channel <= 255:
        raise ValueError(f"channel {channel} is not in 0..255")
    return _framed(encode({0: KIND_DATA, 1: channel, 2: bytes(payload)}))


def _uint(body: dict[object, object], key: int, limit: int) -> int:
    v = body.get(key)
    if type(v) is not int or not 0 <= v <= limit:
        raise PeerFrameError("bad_frame", f"key {key} must be an integer in 0..{limit}")
    return v


def _bytes(body: dict[object, object], key: int, size: int | None) -> bytes:
    v = body.get(key)
    if type(v) is not bytes or (size is not None and len(v) != size):
        raise PeerFrameError("bad_frame", f"key {key} must be {size if size is not None else 'a'} bytes")
    return v


_KEYS: Final = {KIND_HELLO: {0, 1, 2, 3, 4, 5}, KIND_HELLO_ACK: {0, 1, 2, 3, 4, 5}, KIND_DATA: {0, 1, 2},
                KIND_GOODBYE: {0, 1}}
_HELLO_V1_KEYS: Final = {0, 1, 2, 3, 4}
"""A Hello without ``software`` (nodes from before issue 34)."""


def decode_body(body: bytes) -> Frame:
    """Decode one frame body (without its length prefix); :class:`PeerFrameError` ``bad_frame`` if invalid."""
    try:
        value = decode(body, max_depth=1)
    except CodecError as e:
        raise PeerFrameError("bad_frame", f"cbor {e.code}") from None
    if not isinstance(value, dict):
        raise PeerFrameError("bad_frame", "frame body is not a map")
    m: dict[object, object] = {k: v for k, v in value.items()}
    kind = m.get(0)
    if type(kind) is not int or kind not in _KEYS:
        raise PeerFrameError("bad_frame", f"unknown frame kind {kind!r}")
    if kind in (KIND_HELLO, KIND_HELLO_ACK):
        version = m.get(1)
        if type(version) is int and not MIN_PROTOCOL_VERSION <= version <= PROTOCOL_VERSION:
            # Another version's Hello may have other keys: keep only what names it, so verify_hello refuses it
            # as incompatible_version (its other fields are never used).
            software = m.get(5)
            return Hello(role=kind, version=version, network_id=bytes(NETWORK_ID_BYTES), index=0,
                         signature=bytes(SIGNATURE_BYTES),
                         software=software[:MAX_SOFTWARE_CHARS] if isinstance(software, str) else "")
        if set(m) not in (_KEYS[kind], _HELLO_V1_KEYS):
            raise PeerFrameError("bad_frame", f"frame kind {kind} has keys {sorted(map(repr, m))}")
        sent = m.get(5, "")
        if not isinstance(sent, str) or (5 in m and not 0 < len(sent) <= MAX_SOFTWARE_CHARS):
            raise PeerFrameError("bad_frame", f"key 5 must be a text of 1..{MAX_SOFTWARE_CHARS} characters")
        return Hello(role=kind, version=_uint(m, 1, 0xFFFF), network_id=_bytes(m, 2, NETWORK_ID_BYTES),
                     index=_uint(m, 3, MAX_INDEX), signature=_bytes(m, 4, SIGNATURE_BYTES), software=sent)
    if set(m) != _KEYS[kind]:
        raise PeerFrameError("bad_frame", f"frame kind {kind} has keys {sorted(map(repr, m))}")
    if kind == KIND_DATA:
        return Data(channel=_uint(m, 1, 255), payload=_bytes(m, 2, None))
    reason = m[1]
    if type(reason) is not str or len(reason) > MAX_REASON_CHARS:
        raise PeerFrameError("bad_frame", "Goodbye reason must be a short text")
    return Goodbye(reason)


class FrameReader:
    """Splits one direction of the stream into frames; refuses a bad length from its 4-byte prefix alone.

    After a refused prefix the reader is failed (:attr:`error` set): it keeps nothing and returns nothing more, so
    the caller delivers the frames that preceded the bad prefix, then closes the connection."""

    __slots__ = ("_buf", "_need", "error", "max_body")

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        """Largest accepted body length (``max_message_bytes + FRAME_OVERHEAD``)."""
        self.error: PeerFrameError | None = None
        """``frame_too_large`` (or ``bad_frame`` for a length of 0) once a prefix was refused."""
        self._buf = bytearray()
        self._need = -1  # body length of the frame being read, -1 while reading its prefix

    @property
    def buffered(self) -> int:
        """Bytes held (an incomplete frame)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Append ``data``; return the complete frame bodies, in order, up to a refused prefix (see :attr:`error`;
        checked as soon as the 4 prefix bytes are in, the body that follows is never kept)."""
        out: list[bytes] = []
        if self.error is not None:
            return out
        view = memoryview(data)
        pos, n = 0, len(data)
        while pos < n:
            if self._need < 0:
                take = min(4 - len(self._buf), n - pos)
                self._buf += view[pos:pos + take]
                pos += take
                if len(self._buf) < 4:
                    break
                (length,) = _LEN.unpack(self._buf)
                self._buf.clear()
                if length == 0 or length > self.max_body:
                    self.error = (PeerFrameError("bad_frame", "empty frame") if length == 0
                                  else PeerFrameError("frame_too_large", f"{length} > {self.max_body}"))
                    return out
                self._need = length
            take = min(self._need - len(self._buf), n - pos)
            if not self._buf and take == self._need:
                out.append(bytes(view[pos:pos + take]))  # the whole body in this chunk: one copy
            else:
                self._buf += view[pos:pos + take]
                if len(self._buf) < self._need:
                    pos += take
                    break
                out.append(bytes(self._buf))
                self._buf.clear()
            pos += take
            self._need = -1
        return out


def hello_preimage(network_id: bytes, role: int, index: int, binding: bytes) -> bytes:
    """``b"cowboy-p2p-hello-v1:" ‖ network_id ‖ role ‖ u16_be(index) ‖ tls_exporter`` (the signed bytes)."""
    if len(network_id) != NETWORK_ID_BYTES or len(binding) != BINDING_BYTES:
        raise ValueError("network_id and the TLS exporter must be 32 bytes each")
    if role not in (ROLE_DIALER, ROLE_LISTENER) or not 0 <= index <= MAX_INDEX:
        raise ValueError("role must be 0 or 1 and index in 0..65535")
    return HELLO_DOMAIN + network_id + bytes([role]) + index.to_bytes(2, "big") + binding


def make_hello(signer: ed25519.PreparedSigner, *, network_id: bytes, role: int, index: int,
               binding: bytes, software: str = SOFTWARE_VERSION) -> Hello:
    """The signed Hello (role 0) or HelloAck (role 1) of validator ``index`` for this channel."""
    sig = signer.sign(hello_preimage(network_id, role, index, binding))
    return Hello(role=role, network_id=network_id, index=index, signature=sig, software=software)


def verify_hello(frame: Frame, *, role: int, network_id: bytes, me: int, validator_keys: tuple[bytes, ...],
                 binding: bytes, expected_index: int | None) -> int:
    """Check the peer's Hello (``role`` 0) or HelloAck (``role`` 1); return its validator index.

    Raises :class:`HandshakeError`: ``incompatible_version`` (a protocol version outside
    ``MIN_PROTOCOL_VERSION..PROTOCOL_VERSION``), ``bad_frame`` (not a Hello of that role), ``wrong_network``,
    ``unknown_validator`` (index beyond the set), ``unexpected_identity`` (our own index, or not the validator we
    dialed), ``bad_signature`` (not signed by ``validator_keys[index]`` over this channel's exporter)."""
    if not isinstance(frame, Hello) or frame.role != role:
        raise HandshakeError("bad_frame", f"expected {'HelloAck' if role else 'Hello'}, got {type(frame).__name__}")
    if not MIN_PROTOCOL_VERSION <= frame.version <= PROTOCOL_VERSION:
        raise HandshakeError("incompatible_version",
                             f"peer speaks p2p protocol {frame.version} ({frame.software or 'software unknown'}); "
                             f"this node ({SOFTWARE_VERSION}) speaks {MIN_PROTOCOL_VERSION}..{PROTOCOL_VERSION}")
    if frame.network_id != network_id:
        raise HandshakeError("wrong_network", frame.network_id.hex()[:16])
    if frame.index >= len(validator_keys):
        raise HandshakeError("unknown_validator", f"index {frame.index} of {len(validator_keys)}")
    if frame.index == me or (expected_index is not None and frame.index != expected_index):
        raise HandshakeError("unexpected_identity", f"index {frame.index}")
    preimage = hello_preimage(network_id, role, frame.index, binding)
    if not ed25519.verify(validator_keys[frame.index], preimage, frame.signature):
        raise HandshakeError("bad_signature", f"index {frame.index}")
    return frame.index


class TokenBucket:
    """``rate`` tokens per second, at most ``burst``; starts full. The caller passes ``now`` (monotonic seconds)."""

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last = now

    def take(self, amount: float, now: float) -> bool:
        """Take ``amount`` tokens if available (True), else take nothing (False)."""
        if now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
        if self._tokens >= amount:
            self._tokens -= amount
            return True
        return False
