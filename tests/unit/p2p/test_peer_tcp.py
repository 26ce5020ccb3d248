"""The TCP link of the validator peer layer (``p2p/peer_tcp.py``, ``docs/protocol.md`` "Validator peer layer over
TCP"): golden bytes of the key schedule and of the records, every refusal of the record layer, and real sockets
on 127.0.0.1 (large frames, backpressure, end of stream, Goodbye, and a man in the middle refused by the Hello).

The golden values were computed by ``tests/vectors/p2p/tcp_link_golden.py``, which uses none of ``cowboy_node``: the
X25519 keys and shared secret are RFC 7748 §6.1's, HKDF is written out from RFC 5869 with ``hmac``, and the AEAD is
``cryptography``'s ChaCha20-Poly1305 (RFC 8439). Every test is bounded by ``pytest.mark.timeout``.
"""

from __future__ import annotations

import asyncio
import fcntl
import re
import struct
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from cowboy_node.p2p import peer_tcp
from cowboy_node.p2p.peer_frames import Goodbye, decode_body
from cowboy_node.p2p.peer_link import PeerLink
from cowboy_node.p2p.peer_tcp import RECORD_MAX, TcpPeerProtocol, derive_keys, seal_record
from cowboy_node.p2p.peers import PeerNetwork
from tests.unit.p2p import test_peer_network as base
from tests.unit.p2p.test_peer_network import cleanup

pytestmark = pytest.mark.timeout(120)

__all__ = ["cleanup"]  # the fixture, imported for its name

# RFC 7748 §6.1: Alice (here the dialer) and Bob (the listener).
A_PRIV = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
A_PUB = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
B_PRIV = bytes.fromhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
B_PUB = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
SHARED = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")

GOLDEN_PREAMBLE_DIALER = b"CWBYTCP1" + bytes.fromhex(
    "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
GOLDEN_K_D2L = bytes.fromhex("b7e35c258b6fe70e17012a64b6776b2844534b6ce4223e9e4742072a701cc536")
GOLDEN_K_L2D = bytes.fromhex("9bfde4dd1aeb3cf25952d9d23aef83bda99e42f0bf34fa2c91648eeb5293aabe")
GOLDEN_BINDING = bytes.fromhex("d494f312e18f1258fe4585e8a78d5249d6efbc0c2460ace584753a3bcd2de442")
FRAME = (5).to_bytes(4, "big") + b"hello"
"""A stream of one frame whose body is ``hello`` (the link does not decode bodies)."""
GOLDEN_D2L_DATA_0 = bytes.fromhex("0000001900ee74eff3d9f4772d0f6312eed4e4843f63f88a3a0e42901d73")
GOLDEN_D2L_PING_1 = bytes.fromhex("0000001001b803cd028d14475086900ff010a1e144")
GOLDEN_L2D_PONG_0 = bytes.fromhex("000000100269147d954d1ba5d170a66d83de140eba")


class FakeTransport:
    """Captures what a protocol writes; nothing reaches a socket."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.written += data

    def take(self) -> bytes:
        out = bytes(self.written)
        self.written.clear()
        return out

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def get_write_buffer_size(self) -> int:
        return 0


class Recorder:
    """A link handler that records what it is told."""

    def __init__(self) -> None:
        self.opened = 0
        self.bodies: list[bytes] = []
        self.writable = 0
        self.reasons: list[str] = []
        self.closed = asyncio.Event()

    def on_open(self, proto: PeerLink) -> None:
        self.opened += 1

    def on_body(self, proto: PeerLink, body: bytes) -> None:
        self.bodies.append(body)

    def on_writable(self, proto: PeerLink) -> None:
        self.writable += 1

    def on_close(self, proto: PeerLink, reason: str) -> None:
        self.reasons.append(reason)
        self.closed.set()


def _kernel_send_queue(fd: int) -> int:
    """Bytes in the socket's send queue, unsent or unacknowledged (``TIOCOUTQ``), read here independently."""
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0\0\0\0"))[0])


def _key(raw: bytes) -> X25519PrivateKey:
    return X25519PrivateKey.from_private_bytes(raw)


def _side(is_client: bool, handler: Recorder, *, priv: bytes | None = None,
          idle_timeout_s: float = 60.0, max_body: int = 1 << 20) -> tuple[TcpPeerProtocol, FakeTransport]:
    proto = TcpPeerProtocol(is_client=is_client, max_body=max_body, idle_timeout_s=idle_timeout_s, handler=handler,
                            ephemeral=_key(priv or (A_PRIV if is_client else B_PRIV)))
    transport = FakeTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    return proto, transport


async def _turn() -> None:
    """Let the callbacks scheduled with call_soon run (flushes, on_close)."""
    for _ in range(3):
        await asyncio.sleep(0)


def _listener_after_preamble(handler: Recorder, **kw: Any) -> tuple[TcpPeerProtocol, FakeTransport]:
    proto, transport = _side(False, handler, **kw)
    transport.take()
    proto.data_received(GOLDEN_PREAMBLE_DIALER)
    return proto, transport


# --- golden bytes ---------------------------------------------------------------------------------------------


def test_the_rfc_7748_keys_give_the_rfc_shared_secret() -> None:
    """The vectors themselves (so a wrong transcription of them cannot pass as golden)."""
    assert _key(A_PRIV).exchange(_key(B_PRIV).public_key()) == SHARED
    assert peer_tcp._raw(_key(A_PRIV).public_key()) == A_PUB and peer_tcp._raw(_key(B_PRIV).public_key()) == B_PUB


_DOC_BLOCK = re.compile(r"^```p2p-tcp-golden ([\w./-]+)\n(.*?)^```", re.M | re.S)


def test_the_protocol_doc_shows_the_golden_bytes() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    blocks = {name: bytes.fromhex("".join(body.split())) for name, body in _DOC_BLOCK.findall(text)}
    assert blocks == {"preamble/dialer": GOLDEN_PREAMBLE_DIALER, "key/dialer_to_listener": GOLDEN_K_D2L,
                      "key/listener_to_dialer": GOLDEN_K_L2D, "binding": GOLDEN_BINDING,
                      "record/dialer_0_data": GOLDEN_D2L_DATA_0, "record/dialer_1_ping": GOLDEN_D2L_PING_1,
                      "record/listener_0_pong": GOLDEN_L2D_PONG_0}


def test_key_schedule_golden() -> None:
    assert derive_keys(SHARED, A_PUB, B_PUB) == (GOLDEN_K_D2L, GOLDEN_K_L2D, GOLDEN_BINDING)
    # The info is dialer key then listener key: swapping the roles gives other keys.
    assert derive_keys(SHARED, B_PUB, A_PUB)[0] != GOLDEN_K_D2L


def test_record_golden() -> None:
    assert seal_record(ChaCha20Poly1305(GOLDEN_K_D2L), 0, 0, FRAME) == GOLDEN_D2L_DATA_0
    assert seal_record(ChaCha20Poly1305(GOLDEN_K_D2L), 1, 1, b"") == GOLDEN_D2L_PING_1
    assert seal_record(ChaCha20Poly1305(GOLDEN_K_L2D), 0, 2, b"") == GOLDEN_L2D_PONG_0


async def test_the_dialer_puts_the_golden_bytes_on_the_wire() -> None:
    handler = Recorder()
    proto, transport = _side(True, handler)
    assert transport.take() == GOLDEN_PREAMBLE_DIALER  # sent at once, before anything is received
    proto.write(FRAME)  # before the keys: held, not sent in the clear
    await _turn()
    assert transport.take() == b""
    proto.data_received(b"CWBYTCP1" + B_PUB)
    assert proto.opened.result() is True and handler.opened == 1
    assert proto.binding == GOLDEN_BINDING
    assert transport.take() == GOLDEN_D2L_DATA_0  # what was written before the keys, as record 0
    proto.send_ping()
    assert transport.take() == GOLDEN_D2L_PING_1


async def test_the_listener_reads_golden_records_and_answers_a_ping_with_the_golden_pong() -> None:
    handler = Recorder()
    proto, transport = _side(False, handler)
    assert transport.take() == b"CWBYTCP1" + B_PUB
    stream = GOLDEN_PREAMBLE_DIALER + GOLDEN_D2L_DATA_0 + GOLDEN_D2L_PING_1
    for i in range(len(stream)):  # one byte at a time: records are reassembled from any cut
        proto.data_received(stream[i:i + 1])
    assert proto.binding == GOLDEN_BINDING
    assert handler.bodies == [b"hello"]
    assert transport.take() == GOLDEN_L2D_PONG_0
    await _turn()
    assert handler.reasons == [] and not transport.closed


async def test_two_frames_written_in_one_turn_share_one_record() -> None:
    proto, transport = _side(True, Recorder())
    proto.data_received(b"CWBYTCP1" + B_PUB)
    transport.take()
    proto.write(FRAME)
    proto.write(FRAME)
    await _turn()
    assert transport.take() == seal_record(ChaCha20Poly1305(GOLDEN_K_D2L), 0, 0, FRAME + FRAME)


# --- refusals ---------------------------------------------------------------------------------------------------


async def _refused(stream: bytes, code: str) -> tuple[Recorder, FakeTransport]:
    handler = Recorder()
    proto, transport = _side(False, handler)
    transport.take()
    proto.data_received(stream)
    await _turn()
    assert handler.reasons == [f"protocol_error:{code}"]
    assert transport.closed
    assert proto.closing
    return handler, transport


async def test_a_wrong_magic_is_bad_preamble() -> None:
    handler, transport = await _refused(b"CWBYTCP2" + A_PUB, "bad_preamble")
    assert transport.take() == b""  # no keys: no Goodbye can be sealed
    assert handler.opened == 0


async def test_a_low_order_public_key_is_bad_preamble() -> None:
    # The all-zero point: X25519 with it gives the all-zero secret, which the peer would know.
    await _refused(b"CWBYTCP1" + bytes(32), "bad_preamble")


async def test_a_tampered_record_is_bad_record_and_delivers_nothing() -> None:
    for i in range(len(GOLDEN_D2L_DATA_0)):
        if i < 4:
            continue  # a changed length is its own case (below)
        bad = bytearray(GOLDEN_D2L_DATA_0)
        bad[i] ^= 0x01
        handler, _ = await _refused(GOLDEN_PREAMBLE_DIALER + bytes(bad), "bad_record")
        assert handler.bodies == []


async def test_the_goodbye_of_a_refused_record_is_sealed_under_the_listener_key() -> None:
    bad = bytearray(GOLDEN_D2L_DATA_0)
    bad[-1] ^= 0x80
    _, transport = await _refused(GOLDEN_PREAMBLE_DIALER + bytes(bad), "bad_record")
    record = transport.take()
    header = record[:5]
    length, rtype = struct.unpack(">IB", header)
    assert rtype == 0 and len(record) == 5 + length
    plain = ChaCha20Poly1305(GOLDEN_K_L2D).decrypt(peer_tcp.record_nonce(0), record[5:], header)
    assert decode_body(plain[4:]) == Goodbye("bad_record")


async def test_a_replayed_record_is_bad_record() -> None:
    """Each direction's records are numbered: the same record twice fails the second time (nonce 1, not 0)."""
    handler, _ = await _refused(GOLDEN_PREAMBLE_DIALER + GOLDEN_D2L_DATA_0 + GOLDEN_D2L_DATA_0, "bad_record")
    assert handler.bodies == [b"hello"]


async def test_records_out_of_order_are_bad_record() -> None:
    handler, _ = await _refused(GOLDEN_PREAMBLE_DIALER + GOLDEN_D2L_PING_1, "bad_record")
    assert handler.bodies == []


async def test_a_record_of_the_other_direction_is_bad_record() -> None:
    """The dialer's and the listener's keys differ: a reflected record does not open."""
    reflected = seal_record(ChaCha20Poly1305(GOLDEN_K_L2D), 0, 0, FRAME)
    await _refused(GOLDEN_PREAMBLE_DIALER + reflected, "bad_record")


@pytest.mark.parametrize("length", [0, 15, RECORD_MAX + 17, 0xFFFFFFFF],
                         ids=["zero", "below_tag", "above_max", "max_u32"])
async def test_a_length_outside_the_bounds_is_bad_record_before_its_body_arrives(length: int) -> None:
    await _refused(GOLDEN_PREAMBLE_DIALER + struct.pack(">IB", length, 0), "bad_record")


async def test_the_largest_record_is_accepted() -> None:
    handler = Recorder()
    proto, _ = _listener_after_preamble(handler)
    body = b"\xab" * (RECORD_MAX - 4)
    proto.data_received(seal_record(ChaCha20Poly1305(GOLDEN_K_D2L), 0, 0, len(body).to_bytes(4, "big") + body))
    await _turn()
    assert handler.bodies == [body] and handler.reasons == []


@pytest.mark.parametrize(("rtype", "plaintext"), [(3, b""), (255, FRAME), (1, b"x"), (2, b"x"), (0, b"")],
                         ids=["unknown_type", "unknown_type_255", "non_empty_ping", "non_empty_pong", "empty_data"])
async def test_unknown_types_and_non_empty_pings_are_bad_record(rtype: int, plaintext: bytes) -> None:
    await _refused(GOLDEN_PREAMBLE_DIALER + seal_record(ChaCha20Poly1305(GOLDEN_K_D2L), 0, rtype, plaintext),
                   "bad_record")


async def test_a_pong_is_accepted_and_delivers_nothing() -> None:
    handler = Recorder()
    proto, transport = _listener_after_preamble(handler)
    aead = ChaCha20Poly1305(GOLDEN_K_D2L)
    proto.data_received(seal_record(aead, 0, 2, b"") + seal_record(aead, 1, 0, FRAME))
    await _turn()
    assert handler.bodies == [b"hello"] and handler.reasons == [] and not transport.closed


async def test_a_frame_the_reader_refuses_closes_with_its_code() -> None:
    handler = Recorder()
    proto, _ = _listener_after_preamble(handler, max_body=1024)
    proto.data_received(seal_record(ChaCha20Poly1305(GOLDEN_K_D2L), 0, 0, (1 << 20).to_bytes(4, "big")))
    await _turn()
    assert handler.reasons == ["protocol_error:frame_too_large"]


async def test_nothing_is_read_after_a_close() -> None:
    handler = Recorder()
    proto, _ = _listener_after_preamble(handler)
    proto.close_with("shutdown")
    proto.data_received(GOLDEN_D2L_DATA_0)
    await _turn()
    assert handler.bodies == [] and handler.reasons == ["local:shutdown"]


# --- real sockets ---------------------------------------------------------------------------------------------


async def _pair(*, listener_idle_s: float = 60.0, dialer_idle_s: float = 60.0,
                max_body: int = 1 << 22) -> tuple[peer_tcp.TcpListener, TcpPeerProtocol, Recorder,
                                                  Callable[[], TcpPeerProtocol], Recorder]:
    """A listener on a free port and a dialer connected to it; the accepted link is ``accepted()``."""
    server_side = Recorder()
    listener = await peer_tcp.listen("127.0.0.1", 0, idle_timeout_s=listener_idle_s, max_body=max_body,
                                     make_handler=lambda proto: server_side)
    client_side = Recorder()
    dialer = await peer_tcp.dial("127.0.0.1", listener.port, idle_timeout_s=dialer_idle_s, max_body=max_body,
                                 timeout_s=10.0, handler=client_side)
    await base.wait_until(lambda: len(listener.protocols()) == 1 and listener.protocols()[0].opened.done())

    def accepted() -> TcpPeerProtocol:
        return listener.protocols()[0]
    return listener, dialer, client_side, accepted, server_side


async def _close(listener: peer_tcp.TcpListener, *links: TcpPeerProtocol) -> None:
    for link in (*links, *listener.protocols()):
        link.abort()
    listener.close()
    await _turn()


async def test_both_ends_agree_on_the_binding_and_a_frame_above_the_record_size_arrives_whole() -> None:
    listener, dialer, client_side, accepted, server_side = await _pair()
    try:
        assert dialer.binding == accepted().binding and len(dialer.binding) == 32
        big = bytes(range(256)) * (3 * RECORD_MAX // 256 + 7)  # four records
        dialer.write(len(big).to_bytes(4, "big") + big)
        accepted().write(FRAME)
        await base.wait_until(lambda: server_side.bodies == [big] and client_side.bodies == [b"hello"])
        await base.wait_until(lambda: dialer.unacked_bytes() == 0)
    finally:
        await _close(listener, dialer)


async def test_unacknowledged_bytes_are_reported_and_the_sender_is_woken_until_they_drain() -> None:
    listener, dialer, client_side, accepted, server_side = await _pair()
    try:
        accepted()._transport.pause_reading()  # type: ignore[union-attr]  # the peer reads nothing
        chunk = b"\x01" * (1 << 20)
        for _ in range(16):
            dialer.write(len(chunk).to_bytes(4, "big") + chunk)
        await _turn()
        assert dialer.unacked_bytes() > 0
        woken = client_side.writable
        await base.wait_until(lambda: client_side.writable > woken)  # on_writable comes while bytes are out
        # The peer's receive window is full and held so (it reads nothing): the kernel keeps bytes in our send
        # queue, and they count. Without them, peers.py's windows would let megabytes sit in the socket buffer
        # ahead of a vote written later.
        fd = dialer._transport.get_extra_info("socket").fileno()  # type: ignore[union-attr]
        await base.wait_until(lambda: _kernel_send_queue(fd) > 0)
        assert dialer.unacked_bytes() > dialer._transport.get_write_buffer_size()  # type: ignore[union-attr]
        accepted()._transport.resume_reading()  # type: ignore[union-attr]
        await base.wait_until(lambda: len(server_side.bodies) == 16 and dialer.unacked_bytes() == 0)
    finally:
        await _close(listener, dialer)


async def test_close_sends_the_goodbye_before_the_end_of_stream() -> None:
    listener, dialer, client_side, _, server_side = await _pair()
    try:
        dialer.write(FRAME)
        dialer.close_with("shutdown")
        await asyncio.wait_for(server_side.closed.wait(), 10)
        assert server_side.bodies[0] == b"hello"
        assert decode_body(server_side.bodies[1]) == Goodbye("shutdown")
        assert server_side.reasons == ["peer_fin"]  # the handler above acts on the Goodbye; this link saw the FIN
        assert client_side.reasons == ["local:shutdown"]
    finally:
        await _close(listener, dialer)


async def test_a_peer_that_goes_silent_is_closed_as_idle_timeout_and_pings_keep_a_link_open() -> None:
    listener, dialer, _, _, server_side = await _pair(listener_idle_s=0.4)
    try:
        # Pings keep it up: each one is answered and seen by both idle timers.
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            dialer.send_ping()
            await asyncio.sleep(0.05)
        assert server_side.reasons == []
        await asyncio.wait_for(server_side.closed.wait(), 30)  # then silence
        assert server_side.reasons == ["idle_timeout"]
    finally:
        await _close(listener, dialer)


async def test_a_refused_connection_is_reset_at_once() -> None:
    listener = await peer_tcp.listen("127.0.0.1", 0, idle_timeout_s=5.0, max_body=1024, make_handler=lambda p: None)
    try:
        with pytest.raises((ConnectionError, OSError)):
            await peer_tcp.dial("127.0.0.1", listener.port, idle_timeout_s=5.0, max_body=1024, timeout_s=5.0,
                                handler=Recorder())
    finally:
        listener.close()


async def test_a_listener_that_never_sends_its_preamble_fails_the_dial_at_the_timeout() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(1 << 16):  # reads the dialer's preamble, answers nothing, until the end
                pass
        finally:
            writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(TimeoutError):
            await peer_tcp.dial("127.0.0.1", port, idle_timeout_s=5.0, max_body=1024, timeout_s=0.3,
                                handler=Recorder())
    finally:
        server.close()
        await server.wait_closed()


# --- the peer layer on top: a man in the middle, and uvloop ----------------------------------------------------


class _Relay:
    """Accepts the dialer and dials the real listener, each with its own key exchange, and copies the frames both
    ways: it can read and write everything, but the two legs' channel bindings differ."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener: peer_tcp.TcpListener | None = None
        self.legs: list[TcpPeerProtocol] = []
        self.copied = 0

    async def start(self) -> int:
        relay = self

        class Front:
            def __init__(self) -> None:
                self.back: TcpPeerProtocol | None = None
                self.early: list[bytes] = []

            def on_open(self, proto: PeerLink) -> None:
                asyncio.get_running_loop().create_task(self._dial(proto))

            async def _dial(self, front: PeerLink) -> None:
                back = await peer_tcp.dial("127.0.0.1", relay.target_port, idle_timeout_s=30.0, max_body=1 << 20,
                                           timeout_s=5.0, handler=Back(front))
                relay.legs.append(back)
                self.back = back
                for body in self.early:
                    back.write(len(body).to_bytes(4, "big") + body)

            def on_body(self, proto: PeerLink, body: bytes) -> None:
                relay.copied += 1
                if self.back is None:
                    self.early.append(body)
                else:
                    self.back.write(len(body).to_bytes(4, "big") + body)

            def on_writable(self, proto: PeerLink) -> None:
                pass

            def on_close(self, proto: PeerLink, reason: str) -> None:
                if self.back is not None:
                    self.back.abort()

        class Back:
            def __init__(self, front: PeerLink) -> None:
                self.front = front

            def on_open(self, proto: PeerLink) -> None:
                pass

            def on_body(self, proto: PeerLink, body: bytes) -> None:
                relay.copied += 1
                self.front.write(len(body).to_bytes(4, "big") + body)

            def on_writable(self, proto: PeerLink) -> None:
                pass

            def on_close(self, proto: PeerLink, reason: str) -> None:
                self.front.abort()

        self.listener = await peer_tcp.listen("127.0.0.1", 0, idle_timeout_s=30.0, max_body=1 << 20,
                                              make_handler=lambda proto: Front())
        return self.listener.port

    async def stop(self) -> None:
        assert self.listener is not None
        await _close(self.listener, *self.legs)


async def test_a_relay_that_reads_and_copies_every_frame_cannot_pass_the_hello(
        tmp_path: Path, cleanup: list[PeerNetwork], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "TRANSPORT", "tcp")
    ports = [base.free_port() for _ in range(2)]
    relay = _Relay(ports[0])
    relay_port = await relay.start()
    try:
        honest = base.make_node(tmp_path, me=0, ports=ports, n=2)
        dialer = base.make_node(tmp_path, me=1, ports=ports, n=2, dial_to={0: relay_port})
        await base.start(cleanup, honest, dialer)
        await base.wait_until(lambda: honest.metric("handshake_failures_total", reason="bad_signature") >= 1)
        assert relay.copied >= 1  # the Hello went through the relay, whole, and was refused
        assert honest.net.connected() == frozenset() and dialer.net.connected() == frozenset()
        assert honest.inbox == []
    finally:
        await relay.stop()


@pytest.mark.parametrize(("name", "after_preamble"), [
    ("record_under_other_keys", GOLDEN_D2L_DATA_0),
    ("oversized_length", struct.pack(">IB", RECORD_MAX + 17, 0)),
])
async def test_a_bad_record_at_a_validator_is_counted_and_delivers_nothing(
        tmp_path: Path, cleanup: list[PeerNetwork], monkeypatch: pytest.MonkeyPatch, name: str,
        after_preamble: bytes) -> None:
    """At the peer layer: a raw TCP client's bad record closes its connection, is counted as a protocol error
    (and, before any Hello, as a failed handshake), and the validator carries on."""
    monkeypatch.setattr(base, "TRANSPORT", "tcp")
    ports = [base.free_port() for _ in range(2)]
    node = base.make_node(tmp_path, me=0, ports=ports, n=2)
    await base.start(cleanup, node)
    reader, writer = await asyncio.open_connection("127.0.0.1", ports[0])
    try:
        preamble = await asyncio.wait_for(reader.readexactly(peer_tcp.PREAMBLE_BYTES), 10)
        assert preamble[:8] == b"CWBYTCP1"
        # Alice's key with the golden record: the validator's keys come from its own fresh key, so the record
        # (sealed for RFC 7748's Bob) cannot open there.
        writer.write(GOLDEN_PREAMBLE_DIALER + after_preamble)
        await writer.drain()
        rest = await asyncio.wait_for(reader.read(1 << 16), 10)  # its sealed Goodbye, then the end of stream
        while rest and (more := await asyncio.wait_for(reader.read(1 << 16), 10)):
            rest += more
    finally:
        writer.close()
    await base.wait_until(lambda: node.net.stats().get("protocol_errors.bad_record") == 1)
    assert node.metric("handshake_failures_total", reason="bad_frame") == 1
    assert node.inbox == [] and node.net.connected() == frozenset()


def test_two_validators_over_tcp_under_uvloop_exchange_messages(tmp_path: Path) -> None:
    """The node runs on uvloop, whose transports are not subclasses of asyncio's: the link must not depend on that."""

    async def scenario() -> list[base.Msg]:
        base_transport = base.TRANSPORT
        base.TRANSPORT = "tcp"
        try:
            ports = [base.free_port() for _ in range(2)]
            a, b = (base.make_node(tmp_path, me=i, ports=ports, n=2) for i in range(2))
        finally:
            base.TRANSPORT = base_transport
        try:
            await a.net.start()
            await b.net.start()
            await base.wait_until(lambda: a.net.connected() == {1} and b.net.connected() == {0})
            assert a.net.send(1, 3, b"over uvloop")
            assert b.net.send(0, 4, b"x" * (3 * RECORD_MAX))
            await base.wait_until(lambda: len(a.inbox) == 1 and len(b.inbox) == 1)
            return a.inbox + b.inbox
        finally:
            await a.net.stop()
            await b.net.stop()

    inbox = uvloop.run(scenario())
    assert inbox == [(1, 4, b"x" * (3 * RECORD_MAX)), (0, 3, b"over uvloop")]

