"""Validator peer layer over real QUIC and over real TCP on 127.0.0.1: connect, broadcast, refuse impostors, raw
protocol errors, restart and reconnect, receive rate limits. Every test runs once per ``[p2p] transport`` (the
``transport`` fixture): the layer above the link must behave the same on both. Every test is bounded by
``pytest.mark.timeout``."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cowboy_node.observability.peer_metrics import PeerMetrics
from cowboy_node.p2p import peer_quic, peer_tcp
from cowboy_node.p2p import peers as peers_module
from cowboy_node.p2p.peer_frames import Data, Goodbye, decode_body, encode_frame, make_hello
from cowboy_node.p2p.peer_link import TRANSPORTS, LinkHandler, PeerLink
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from cowboy_protocol.crypto import ed25519

pytestmark = pytest.mark.timeout(300)

NETWORK_ID = b"\x42" * 32
SEEDS = [bytes([0x10 + i]) * 32 for i in range(4)]
KEYS = [ed25519.public_key_from_seed(s) for s in SEEDS]
FAST = PeerLimits(reconnect_min_s=0.05, reconnect_max_s=0.5, handshake_timeout_s=2.0, idle_timeout_s=10.0)

Msg = tuple[int, int, bytes]


TRANSPORT = "quic"
"""The link transport of the running test (set by the ``transport`` fixture; modules importing these helpers get
QUIC)."""


@pytest.fixture(autouse=True, params=TRANSPORTS)
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys.modules[__name__], "TRANSPORT", request.param)
    return str(request.param)


def _free(kind: socket.SocketKind) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_udp_port() -> int:
    return _free(socket.SOCK_DGRAM)


def free_port() -> int:
    """A free port of the running test's transport."""
    return _free(socket.SOCK_DGRAM if TRANSPORT == "quic" else socket.SOCK_STREAM)


async def dial(host: str, port: int, *, idle_timeout_s: float, max_body: int, timeout_s: float,
               handler: LinkHandler) -> PeerLink:
    """A bare link of the running test's transport."""
    if TRANSPORT == "quic":
        return await peer_quic.dial(host, port, idle_timeout_s=idle_timeout_s, max_body=max_body,
                                    timeout_s=timeout_s, handler=handler)
    return await peer_tcp.dial(host, port, idle_timeout_s=idle_timeout_s, max_body=max_body, timeout_s=timeout_s,
                               handler=handler)


@dataclass
class Node:
    net: PeerNetwork
    inbox: list[Msg] = field(default_factory=list)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(f"cowboy_p2p_{name}", labels) or 0.0


def make_node(tmp: Path, *, me: int, ports: Sequence[int], n: int, seed: bytes | None = None,
              keys: Sequence[bytes] | None = None, network_id: bytes = NETWORK_ID, limits: PeerLimits = FAST,
              dial_to: dict[int, int] | None = None,
              on_message: Callable[[int, int, bytes], None] | None = None) -> Node:
    """Validator ``me`` of a set of ``n`` listening on ``ports[me]``; ``dial_to`` overrides a peer's port."""
    keys = list(keys or KEYS[:n])
    limits = dataclasses.replace(limits, transport=TRANSPORT)
    registry = CollectorRegistry()
    inbox: list[Msg] = []
    peers = [PeerInfo(j, keys[j], "127.0.0.1", (dial_to or {}).get(j, ports[j])) for j in range(n) if j != me]
    net = PeerNetwork(me=me, ed25519_seed=seed or SEEDS[me], listen_host="127.0.0.1", listen_port=ports[me],
                      peers=peers, validator_keys=keys, network_id=network_id,
                      cert_path=tmp / f"node{me}-{ports[me]}.crt", key_path=tmp / f"node{me}-{ports[me]}.key",
                      on_message=on_message or (lambda s, c, p: inbox.append((s, c, p))), limits=limits,
                      metrics=PeerMetrics(registry))
    return Node(net, inbox, registry)


async def wait_until(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    # Generous: the bound only stops a hung test; on a loaded host a handshake can take seconds.
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


@pytest.fixture
async def cleanup() -> AsyncIterator[list[PeerNetwork]]:
    nets: list[PeerNetwork] = []
    yield nets
    for net in nets:
        await net.stop()


async def start(cleanup: list[PeerNetwork], *nodes: Node) -> None:
    for node in nodes:
        cleanup.append(node.net)
        await node.net.start()


# --- 1. three validators ----------------------------------------------------------------------------------------


async def test_three_validators_connect_pairwise_and_broadcast_reaches_the_other_two(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(3)]
    nodes = [make_node(tmp_path, me=i, ports=ports, n=3) for i in range(3)]
    changes: list[tuple[int, bool]] = []
    nodes[0].net._on_peer_change = lambda i, up: changes.append((i, up))
    await start(cleanup, *nodes)
    await wait_until(lambda: all(len(n.net.connected()) == 2 for n in nodes))
    for i, node in enumerate(nodes):
        assert node.net.connected() == frozenset({0, 1, 2} - {i})
        assert node.metric("peers_connected") == 2
    for i, node in enumerate(nodes):
        assert node.net.broadcast(i, b"from %d" % i) == 2
    await wait_until(lambda: all(len(n.inbox) == 2 for n in nodes))
    for i, node in enumerate(nodes):
        assert sorted(node.inbox) == [(j, j, b"from %d" % j) for j in range(3) if j != i]
    assert sorted(changes) == [(1, True), (2, True)]
    assert nodes[1].metric("messages_received_total", channel="0") == 1
    assert nodes[0].metric("messages_sent_total", channel="0") == 2
    assert nodes[0].metric("bytes_sent_total", channel="0") == 2 * len(b"from 0")
    if TRANSPORT == "quic":  # the TLS key; the TCP link's keys are ephemeral and never written
        assert (tmp_path / f"node0-{ports[0]}.key").stat().st_mode & 0o777 == 0o600
    else:
        assert not (tmp_path / f"node0-{ports[0]}.key").exists()


async def test_send_to_a_peer_that_is_down_returns_false_and_counts_not_connected(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    node = make_node(tmp_path, me=0, ports=ports, n=2)
    await start(cleanup, node)
    assert not node.net.send(1, 0, b"x")
    assert node.net.broadcast(1, b"x") == 0
    assert node.net.stats()["dropped.not_connected"] == 2
    assert node.metric("messages_dropped_total", reason="not_connected") == 2
    assert node.net.connected() == frozenset()


async def test_on_message_exceptions_are_counted_and_the_connection_keeps_delivering(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    seen: list[bytes] = []

    def flaky(sender: int, channel: int, payload: bytes) -> None:
        seen.append(payload)
        if payload == b"boom":
            raise RuntimeError("handler bug")

    a, b = make_node(tmp_path, me=0, ports=ports, n=2), make_node(tmp_path, me=1, ports=ports, n=2, on_message=flaky)
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    assert a.net.send(1, 0, b"boom")
    assert a.net.send(1, 0, b"after")
    await wait_until(lambda: seen == [b"boom", b"after"])
    assert b.net.stats()["handler_errors"] == 1
    assert b.metric("handler_errors_total") == 1
    assert a.net.connected() == {1}


async def test_payload_above_the_cap_is_not_sent(tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    limits = PeerLimits(max_message_bytes=1000, reconnect_min_s=0.05, handshake_timeout_s=2.0)
    a, b = (make_node(tmp_path, me=i, ports=ports, n=2, limits=limits) for i in range(2))
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    assert not a.net.send(1, 0, b"x" * 1001)
    assert a.net.send(1, 0, b"x" * 1000)
    await wait_until(lambda: len(b.inbox) == 1)
    assert a.net.stats()["dropped.too_large"] == 1


# --- 2. refused identities --------------------------------------------------------------------------------------


async def test_wrong_network_impostor_and_unknown_index_are_refused_with_their_reason(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    # The honest validator 0 of a set of 3 (validators 1 and 2 are never started honestly).
    ports = [free_port() for _ in range(3)]
    honest = make_node(tmp_path, me=0, ports=ports, n=3)
    # Validator 1's index with the right network but another key (it believes its own key is validator 1's).
    impostor_seed = b"\x99" * 32
    fake_keys = [KEYS[0], ed25519.public_key_from_seed(impostor_seed), KEYS[2]]
    impostor = make_node(tmp_path, me=1, ports=ports, n=3, seed=impostor_seed, keys=fake_keys)
    # The real validator 2, but of another chain.
    other_chain = make_node(tmp_path, me=2, ports=ports, n=3, network_id=b"\x43" * 32)
    # Index 3: a validator of a 4-validator set the honest node does not know.
    stranger_ports = [ports[0], free_port(), free_port(), free_port()]
    stranger = make_node(tmp_path, me=3, ports=stranger_ports, n=4, dial_to={1: ports[1], 2: ports[2]})
    await start(cleanup, honest, impostor, other_chain, stranger)

    def failures(reason: str) -> float:
        return honest.metric("handshake_failures_total", reason=reason)

    await wait_until(lambda: failures("wrong_network") >= 1 and failures("bad_signature") >= 1
                     and failures("unknown_validator") >= 1)
    await asyncio.sleep(0.3)
    stats = honest.net.stats()
    assert stats["handshake_failures.wrong_network"] >= 1
    assert stats["handshake_failures.bad_signature"] >= 1  # the impostor's Hello and its HelloAck
    assert stats["handshake_failures.unknown_validator"] >= 1
    assert honest.net.connected() == frozenset()
    assert honest.net.broadcast(0, b"x") == 0
    for node in (impostor, other_chain, stranger):
        node.net.broadcast(0, b"should never arrive")
    await asyncio.sleep(0.2)
    assert honest.inbox == []
    assert other_chain.metric("handshake_failures_total", reason="wrong_network") >= 1  # refused both ways
    assert "received" not in honest.net.stats()


async def test_a_listener_that_is_not_the_validator_dialed_is_unexpected_identity(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(3)]
    a = make_node(tmp_path, me=0, ports=ports, n=3, dial_to={1: ports[2]})  # "validator 1" answers as 2
    c = make_node(tmp_path, me=2, ports=ports, n=3)
    await start(cleanup, a, c)
    await wait_until(lambda: a.metric("handshake_failures_total", reason="unexpected_identity") >= 1)
    assert 1 not in a.net.connected()
    assert not a.net.send(1, 0, b"x")


# --- 3. raw protocol errors -------------------------------------------------------------------------------------


class RawClient:
    """A bare client link (QUIC of the peer ALPN, or TCP) that writes whatever the test wants on its stream."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.closed = asyncio.Event()
        self.reason = ""

    def on_open(self, proto: PeerLink) -> None:
        pass

    def on_body(self, proto: PeerLink, body: bytes) -> None:
        self.bodies.append(body)

    def on_writable(self, proto: PeerLink) -> None:
        pass

    def on_close(self, proto: PeerLink, reason: str) -> None:
        self.reason = reason
        self.closed.set()


async def raw_session(port: int, data: bytes) -> RawClient:
    client = RawClient()
    proto = await dial("127.0.0.1", port, idle_timeout_s=5.0, max_body=1 << 20, timeout_s=3.0, handler=client)
    try:
        proto.write(data)
        await asyncio.wait_for(client.closed.wait(), 5.0)
    finally:
        proto.abort()
    return client


LIMITS_1K = PeerLimits(max_message_bytes=1024, handshake_timeout_s=2.0, reconnect_min_s=0.05)


@pytest.mark.parametrize(("name", "data"), [
    ("oversized_prefix_without_body", (1024 + 64 + 1).to_bytes(4, "big")),
    ("huge_prefix_without_body", b"\xff\xff\xff\xff"),
    ("garbage_cbor", b"\x00\x00\x00\x05\xff\x00\x01\x02\x03"),
    ("non_canonical_cbor", b"\x00\x00\x00\x08" + bytes.fromhex("a3180002010a0241aa")[:8]),
    ("data_before_hello", encode_frame(Data(0, b"sneaky"))),
])
async def test_protocol_errors_before_the_handshake_close_the_connection_as_bad_frame(
        tmp_path: Path, cleanup: list[PeerNetwork], name: str, data: bytes) -> None:
    ports = [free_port() for _ in range(2)]
    node = make_node(tmp_path, me=0, ports=ports, n=2, limits=LIMITS_1K)
    await start(cleanup, node)
    client = await raw_session(ports[0], data)
    goodbye = decode_body(client.bodies[-1])
    assert isinstance(goodbye, Goodbye)
    expected = "frame_too_large" if "prefix" in name else "bad_frame"
    assert goodbye.reason == expected
    await wait_until(lambda: node.metric("handshake_failures_total", reason="bad_frame") == 1)
    assert node.inbox == []
    if expected == "frame_too_large":
        assert node.net.stats()["protocol_errors.frame_too_large"] == 1


async def test_an_authenticated_peer_sending_an_oversized_frame_is_disconnected(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    node = make_node(tmp_path, me=0, ports=ports, n=2, limits=LIMITS_1K)
    await start(cleanup, node)
    client = RawClient()
    proto = await dial("127.0.0.1", ports[0], idle_timeout_s=5.0, max_body=1 << 20, timeout_s=3.0, handler=client)
    try:
        hello = make_hello(ed25519.PreparedSigner(SEEDS[1]), network_id=NETWORK_ID, role=0, index=1,
                           binding=proto.binding)
        proto.write(encode_frame(hello) + encode_frame(Data(5, b"ok")) + b"\x00\x00\x00\x04\xa1\x00\x02\x00"
                    + (1 << 20).to_bytes(4, "big"))
        await asyncio.wait_for(client.closed.wait(), 5.0)
    finally:
        proto.abort()
    assert node.inbox == [(1, 5, b"ok")]
    ack = decode_body(client.bodies[0])
    assert not isinstance(ack, Data | Goodbye) and ack.index == 0
    assert decode_body(client.bodies[-1]) == Goodbye("frame_too_large")
    stats = node.net.stats()
    assert stats["dropped.bad_frame"] == 1  # the map without its keys: dropped, the connection stayed
    assert stats["dropped.too_large"] == 1
    assert "handshake_failures.bad_frame" not in stats


async def test_a_silent_client_is_closed_at_the_handshake_timeout(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    limits = PeerLimits(handshake_timeout_s=0.5, reconnect_min_s=0.05)
    node = make_node(tmp_path, me=0, ports=ports, n=2, limits=limits)
    await start(cleanup, node)
    client = RawClient()
    proto = await dial("127.0.0.1", ports[0], idle_timeout_s=5.0, max_body=1 << 20, timeout_s=3.0, handler=client)
    try:
        await asyncio.wait_for(client.closed.wait(), 5.0)
    finally:
        proto.abort()
    assert node.net.stats()["handshake_failures.handshake_timeout"] == 1


# --- 4. restart --------------------------------------------------------------------------------------------------


async def test_a_restarted_validator_is_reconnected_and_messages_flow_again(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(3)]
    nodes = [make_node(tmp_path, me=i, ports=ports, n=3) for i in range(3)]
    await start(cleanup, *nodes)
    await wait_until(lambda: all(len(n.net.connected()) == 2 for n in nodes))
    await nodes[2].net.stop()
    await wait_until(lambda: all(2 not in n.net.connected() for n in nodes[:2]))
    assert not nodes[0].net.send(2, 0, b"lost")
    await asyncio.sleep(0.3)  # the others keep dialing a port nobody answers on
    reborn = make_node(tmp_path, me=2, ports=ports, n=3)
    await start(cleanup, reborn)
    await wait_until(lambda: all(len(n.net.connected()) == 2 for n in (*nodes[:2], reborn)))
    nodes[0].net.send(2, 1, b"again")
    reborn.net.send(1, 1, b"hello from the new 2")
    await wait_until(lambda: reborn.inbox == [(0, 1, b"again")] and (2, 1, b"hello from the new 2") in nodes[1].inbox)
    assert nodes[0].metric("reconnects_total") == 1
    assert nodes[1].net.stats()["reconnects"] == 1


# --- 5. rate limit -----------------------------------------------------------------------------------------------


async def test_a_peer_above_the_message_rate_gets_messages_dropped_and_stays_connected(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    slow = PeerLimits(max_messages_per_s=50.0, reconnect_min_s=0.05, handshake_timeout_s=2.0)
    sender = make_node(tmp_path, me=0, ports=ports, n=2)
    receiver = make_node(tmp_path, me=1, ports=ports, n=2, limits=slow)
    await start(cleanup, sender, receiver)
    await wait_until(lambda: sender.net.connected() == {1})
    t0 = time.monotonic()
    for k in range(500):
        assert sender.net.send(1, 0, k.to_bytes(4, "big"))
    await wait_until(lambda: len(receiver.inbox) + receiver.net.stats().get("dropped.rate_limited", 0) == 500)
    elapsed = time.monotonic() - t0
    delivered = len(receiver.inbox)
    assert 100 <= delivered <= 100 + 50 * elapsed + 1  # the burst (2 × 50) plus the rate
    assert receiver.metric("messages_dropped_total", reason="rate_limited") == 500 - delivered
    assert sender.net.connected() == {1}
    await asyncio.sleep(0.1)  # tokens refill: the same connection delivers again
    assert sender.net.send(1, 0, b"later")
    await wait_until(lambda: receiver.inbox[-1] == (0, 0, b"later"))


async def test_the_send_queue_is_bounded_and_drops_the_newest(tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    small = PeerLimits(send_queue_messages=10, reconnect_min_s=0.05, handshake_timeout_s=2.0)
    a = make_node(tmp_path, me=0, ports=ports, n=2, limits=small)
    b = make_node(tmp_path, me=1, ports=ports, n=2)
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    results = [a.net.send(1, 0, bytes([k])) for k in range(15)]  # nothing flushes before the next loop turn
    assert results == [True] * 10 + [False] * 5
    await wait_until(lambda: len(b.inbox) == 10)
    assert [p for _, _, p in b.inbox] == [bytes([k]) for k in range(10)]
    assert a.metric("messages_dropped_total", reason="queue_full") == 5


async def test_the_send_queue_is_also_bounded_in_bytes(tmp_path: Path, cleanup: list[PeerNetwork],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers_module, "SEND_QUEUE_BYTES", 150)
    ports = [free_port() for _ in range(2)]
    a, b = (make_node(tmp_path, me=i, ports=ports, n=2) for i in range(2))
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    assert [a.net.send(1, 0, b"z" * 100) for _ in range(3)] == [True, False, False]  # an empty queue takes one
    assert [a.net.send(1, 0, b"z" * 10) for _ in range(2)] == [True, False]
    await wait_until(lambda: len(b.inbox) == 2)
    assert a.net.send(1, 0, b"z" * 100)  # drained: room again


def test_constructor_refuses_inconsistent_keys(tmp_path: Path) -> None:
    ports = [1, 2]
    with pytest.raises(ValueError, match="seed"):
        make_node(tmp_path, me=0, ports=ports, n=2, seed=b"\x01" * 32)
    with pytest.raises(ValueError, match="public_key"):
        PeerNetwork(me=0, ed25519_seed=SEEDS[0], listen_host="127.0.0.1", listen_port=0,
                    peers=[PeerInfo(1, KEYS[2], "127.0.0.1", 1)], validator_keys=KEYS[:2], network_id=NETWORK_ID,
                    cert_path=tmp_path / "c", key_path=tmp_path / "k", on_message=lambda s, c, p: None)


async def test_a_peer_that_connects_again_replaces_its_older_inbound_connection(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    node = make_node(tmp_path, me=0, ports=ports, n=2)
    await start(cleanup, node)
    clients: list[tuple[RawClient, PeerLink]] = []
    try:
        for k in range(2):
            client = RawClient()
            proto = await dial("127.0.0.1", ports[0], idle_timeout_s=5.0, max_body=1 << 20, timeout_s=3.0,
                               handler=client)
            clients.append((client, proto))
            hello = make_hello(ed25519.PreparedSigner(SEEDS[1]), network_id=NETWORK_ID, role=0, index=1,
                               binding=proto.binding)
            proto.write(encode_frame(hello) + encode_frame(Data(0, b"conn %d" % k)))
            await wait_until(lambda k=k: len(node.inbox) == k + 1)  # type: ignore[misc]
        first, second = clients
        await asyncio.wait_for(first[0].closed.wait(), 5.0)
        assert decode_body(first[0].bodies[-1]) == Goodbye("replaced")
        assert not second[0].closed.is_set()
        second[1].write(encode_frame(Data(0, b"still here")))
        await wait_until(lambda: node.inbox[-1] == (1, 0, b"still here"))
    finally:
        for _, proto in clients:
            proto.abort()


async def test_start_raises_oserror_when_the_port_is_taken_and_stop_is_idempotent(tmp_path: Path) -> None:
    kind = socket.SOCK_DGRAM if TRANSPORT == "quic" else socket.SOCK_STREAM
    with socket.socket(socket.AF_INET, kind) as taken:
        taken.bind(("127.0.0.1", 0))
        if kind == socket.SOCK_STREAM:
            taken.listen()
        ports = [int(taken.getsockname()[1]), free_port()]
        node = make_node(tmp_path, me=0, ports=ports, n=2)
        with pytest.raises(OSError):
            await node.net.start()
    await node.net.stop()
    ok = make_node(tmp_path, me=0, ports=[free_port(), ports[1]], n=2)
    await ok.net.start()
    await ok.net.stop()
    await ok.net.stop()
    assert ok.net.connected() == frozenset()


# --- 6. shutdown -------------------------------------------------------------------------------------------------


async def test_stop_ends_a_dialer_that_swallowed_its_cancellation(
        tmp_path: Path, cleanup: list[PeerNetwork], monkeypatch: pytest.MonkeyPatch) -> None:
    """On CPython 3.11 ``asyncio.wait_for`` can lose a cancellation that arrives as its future completes; a dialer
    that lost it while its link was up held the link forever and ``stop()`` never returned (a hung teardown on a
    loaded host). Here the connected dialer swallows the first cancellation on purpose: stop must still end."""
    ports = [free_port() for _ in range(2)]
    # A long idle timeout: the held link must not die by itself while stop() waits (it would end the dialer anyway).
    long_idle = PeerLimits(reconnect_min_s=0.05, reconnect_max_s=0.5, handshake_timeout_s=2.0, idle_timeout_s=300.0)
    a, b = (make_node(tmp_path, me=i, ports=ports, n=2, limits=long_idle) for i in range(2))
    hold = PeerNetwork._hold
    swallowed: list[bool] = []

    async def hold_swallowing_once(self: PeerNetwork, proto: Any, handler: Any) -> None:
        while True:
            try:
                return await hold(self, proto, handler)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append(True)  # lost, as wait_for loses it, and go on holding the link

    monkeypatch.setattr(PeerNetwork, "_hold", hold_swallowing_once)
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1} and b.net.connected() == {0})
    stopping = asyncio.ensure_future(a.net.stop())
    # Not wait_for: stop() suppresses its dialers' CancelledError, so a timed-out wait_for could not cancel it.
    await asyncio.wait({stopping}, timeout=20)  # well above the re-cancel interval, even on a loaded host
    assert stopping.done(), "stop() still waits for a dialer that lost its cancellation"
    assert swallowed == [True]
