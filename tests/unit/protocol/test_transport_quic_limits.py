"""QUIC admission over real loopback UDP — connection cap, half-open cap, Retry, per-peer Hello rate limit —
plus the token bucket, ServerLimits validation and the self-signed certificates (CIP-11 §6.2, §6.6)."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from cryptography import x509
from cryptography.x509.oid import NameOID

from cowboy_protocol.quic.adapter import ALPN, ConnectionClosed, _ClientProtocol, connect
from cowboy_protocol.quic.certs import ensure_certificate, generate_self_signed, load_certificate
from cowboy_protocol.quic.limits import PeerRateLimiter, ServerLimits, ServerStats, peer_key
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import Goodbye
from tests.unit.protocol.test_transport_quic import (
    CERT,
    WAIT,
    Hub,
    bounded,
    dial,
    progress,
    recv_until_closed,
    release_clients,  # noqa: F401  (autouse fixture: releases the clients each test opens)
    serve,
    until,
)

# --- caps ---------------------------------------------------------------------------------------------------------


async def test_max_connections_refuses_the_extra_connection_and_counts_it() -> None:
    hub = Hub(authenticate=True)
    server = await serve(hub, max_connections=2)
    try:
        a, b = await dial(server), await dial(server)
        with pytest.raises(ConnectionClosed) as e:
            await dial(server)
        assert "TOO_MANY_CONNECTIONS:max_connections" in e.value.reason
        assert server.stats.refused == {"max_connections": 1}
        assert server.stats.accepted_total == 2 and len(hub.handlers) == 2  # the refused one created no state
        # A slot frees when a connection ends; then a new one is admitted.
        a.close()
        await bounded(a.wait_closed())
        await until(lambda: server.stats.connections_open == 1, "slot freed")
        c = await dial(server)
        c.send(progress(1))
        assert await bounded(c.recv()) == progress(1)
        b.send(progress(2))
        assert await bounded(b.recv()) == progress(2)
    finally:
        server.close()


async def test_half_open_cap_blocks_new_connections_until_one_authenticates() -> None:
    hub = Hub(authenticate=False)
    server = await serve(hub, max_half_open=2, retry_threshold=100)
    try:
        await dial(server)
        await dial(server)
        await until(lambda: len(hub.handlers) == 2, "two handlers")
        assert server.stats.half_open == 2
        with pytest.raises(ConnectionClosed) as e:
            await dial(server)
        assert "TOO_MANY_CONNECTIONS:max_half_open" in e.value.reason
        assert server.stats.refused == {"max_half_open": 1}
        hub.handlers[0].conn.mark_authenticated()  # the session proved this peer's identity
        assert server.stats.half_open == 1 and server.stats.authenticated_total == 1
        third = await dial(server)
        third.send(progress(3))
        assert await bounded(third.recv()) == progress(3)
        assert server.stats.half_open == 2 and server.stats.connections_open == 3
    finally:
        server.close()


async def test_retry_is_required_at_the_half_open_threshold_and_the_client_still_connects() -> None:
    hub = Hub(authenticate=False)
    server = await serve(hub, retry_threshold=1, max_half_open=10)
    try:
        first = await dial(server)  # half-open count 0 < 1: no Retry
        assert server.stats.retries_sent == 0
        second = await dial(server)  # half-open count 1 ≥ 1: address validation first
        assert server.stats.retries_sent == 1
        await until(lambda: len(hub.handlers) == 2, "two handlers")
        assert hub.handlers[1].conn.channel_binding == second.channel_binding != first.channel_binding
        second.send(progress(2))
        assert await bounded(second.recv()) == progress(2)
        # Once the half-open count drops below the threshold, no more Retry.
        for h in hub.handlers:
            h.conn.mark_authenticated()
        third = await dial(server)
        third.send(progress(3))
        assert await bounded(third.recv()) == progress(3)
        assert server.stats.retries_sent == 1
    finally:
        server.close()


async def test_retry_threshold_zero_validates_every_address() -> None:
    server = await serve(Hub(), retry_threshold=0)
    try:
        for i in range(2):
            c = await dial(server)
            c.send(progress(i))
            assert await bounded(c.recv()) == progress(i)
        assert server.stats.retries_sent == 2
    finally:
        server.close()


async def test_initial_with_a_forged_token_is_refused_with_invalid_token() -> None:
    server = await serve(Hub(), retry_threshold=0)
    loop = asyncio.get_running_loop()
    quic = QuicConnection(configuration=QuicConfiguration(is_client=True, alpn_protocols=[ALPN], verify_mode=0))
    quic._peer_token = os.urandom(60)  # a token this server never issued
    transport, proto = await loop.create_datagram_endpoint(
        lambda: _ClientProtocol(quic, max_frame_bytes=1024, goodbye_linger_s=0.1), local_addr=("127.0.0.1", 0))
    try:
        proto.connect(("127.0.0.1", server.port))
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(proto.wait_connected(), WAIT)
        assert server.stats.refused == {"invalid_token": 1}
        assert server.stats.accepted_total == 0 and server.stats.retries_sent == 0
        assert proto.close_reason is not None and proto.close_reason.startswith("peer_closed:11:")  # INVALID_TOKEN
    finally:
        transport.close()
        server.close()


# --- per-peer Hello rate limit ----------------------------------------------------------------------------------


async def test_per_peer_hello_rate_limit_answers_goodbye_rate_limited() -> None:
    """§6.2 "Validators MUST rate-limit unauthenticated Hello per peer": the third connection in a burst of 2."""
    hub = Hub()
    server = await serve(hub, hello_burst_per_peer=2, hello_rate_per_peer=1e-6)
    try:
        for i in range(2):
            c = await dial(server)
            c.send(progress(i))
            assert await bounded(c.recv()) == progress(i)
        limited = await dial(server)  # TLS completes; the answer comes at its first frame (its Hello)
        limited.send(progress(9))
        frames, closed = await recv_until_closed(limited)
        assert frames == [Goodbye(GoodbyeReason.RATE_LIMITED, "hello_rate", None, None)]
        assert closed.reason == "peer_goodbye:RATE_LIMITED"
        assert len(hub.handlers) == 2  # the rate-limited connection never reached the session layer
        assert server.stats.refused == {"rate_limited": 1}
        assert server.stats.opened_total == 2
        await until(lambda: server.stats.connections_open == 2, "rate-limited connection gone")
    finally:
        server.close()


def test_token_bucket_allows_the_burst_then_refills_at_the_rate() -> None:
    rl = PeerRateLimiter(rate_per_s=2.0, burst=3)
    assert [rl.allow("10.0.0.1", 100.0) for _ in range(4)] == [True, True, True, False]
    assert rl.allow("10.0.0.2", 100.0)  # buckets are per peer
    assert not rl.allow("10.0.0.1", 100.4)  # 0.8 token
    assert rl.allow("10.0.0.1", 100.6)  # 1.2 tokens (0.8 from t=100.4 counted once: time of the last update)
    assert rl.tokens("10.0.0.1", 1000.0) == 3.0  # never above the burst
    assert rl.tokens("unknown", 5.0) == 3.0


def test_token_bucket_table_is_bounded_and_forgets_full_buckets_first() -> None:
    rl = PeerRateLimiter(rate_per_s=1.0, burst=2, max_peers=4)
    for i in range(4):
        assert rl.allow(f"10.0.0.{i}", 0.0)
    assert len(rl) == 4
    # At t=10 the four buckets are full again: forgetting them loses nothing, so they go first.
    assert rl.allow("10.0.1.0", 10.0)
    assert len(rl) == 1
    # A flood of distinct sources: the table stays bounded, least recently used forgotten first.
    for i in range(20):
        rl.allow(f"10.0.2.{i}", 10.0)
    assert len(rl) <= 4
    assert rl.tokens("10.0.2.19", 10.0) == 1.0  # the latest peer is still tracked (one token used)


def test_peer_key_folds_ipv4_mapped_ipv6_and_ignores_the_port() -> None:
    assert peer_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert peer_key("192.0.2.7") == "192.0.2.7"
    assert peer_key("2001:db8::1") == "2001:db8::1"
    assert peer_key("fe80::1%eth0") == "fe80::1"


@pytest.mark.parametrize("bad", [
    {"max_connections": 0}, {"max_half_open": 0}, {"retry_threshold": -1}, {"hello_rate_per_peer": 0.0},
    {"hello_burst_per_peer": 0}, {"idle_timeout_s": 0.0}, {"auth_timeout_s": -1.0},
    {"max_frame_bytes": 2 * 1024 * 1024 + 1}, {"goodbye_linger_s": 0.0},
])
def test_server_limits_reject_values_that_disable_a_cap(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ServerLimits(**bad)


def test_server_stats_snapshot_is_json_ready() -> None:
    st = ServerStats()
    ServerStats.bump(st.refused, "rate_limited")
    ServerStats.bump(st.refused, "max_connections")
    ServerStats.bump(st.refused, "rate_limited")
    snap = st.snapshot()
    assert snap["refused"] == {"max_connections": 1, "rate_limited": 2}
    assert list(snap["refused"]) == ["max_connections", "rate_limited"]
    assert snap["connections_open"] == 0 and "decode_errors" in snap


# --- certificates -------------------------------------------------------------------------------------------------


def test_generate_self_signed_gives_a_matching_p256_pair_for_the_name() -> None:
    cert_pem, key_pem = generate_self_signed("node-7.cowboy")
    cert, key = load_certificate(cert_pem, key_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "node-7.cowboy"
    assert cert.issuer == cert.subject
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["node-7.cowboy"]
    assert key.curve.name == "secp256r1"
    other_cert, _ = generate_self_signed("node-7.cowboy")
    with pytest.raises(ValueError):
        load_certificate(other_cert, key_pem)


def test_ensure_certificate_creates_once_with_a_private_key_file_then_reuses(tmp_path: Path) -> None:
    cert_path, key_path = tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem"
    first = ensure_certificate(cert_path, key_path, "validator.local")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert ensure_certificate(cert_path, key_path, "validator.local") == first
    key_path.unlink()
    with pytest.raises(FileExistsError):
        ensure_certificate(cert_path, key_path, "validator.local")


async def test_client_does_not_verify_by_default_but_can_verify_against_the_server_certificate() -> None:
    server = await serve(Hub())
    try:
        c = await dial(server)  # default: CERT_NONE (identity is the CIP-11 HelloAck)
        c.abort()
        verified = await bounded(connect("127.0.0.1", server.port, server_name="validator.test", verify=True,
                                         ca_pem=CERT))
        verified.abort()
        wrong_ca, _ = generate_self_signed("validator.test")
        with pytest.raises(ConnectionClosed):
            await bounded(connect("127.0.0.1", server.port, server_name="validator.test", verify=True,
                                  ca_pem=wrong_ca))
    finally:
        server.close()
