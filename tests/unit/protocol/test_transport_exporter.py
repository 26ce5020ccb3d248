"""RFC 8446 §7.5 exporters: RFC 8448 known answers, independent cross-checks, and a real aioquic loopback."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import HandshakeCompleted
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
from cryptography.x509.oid import NameOID

from cowboy_protocol.quic.exporter import (
    CHANNEL_BINDING_LABEL,
    channel_binding,
    derive_secret,
    enable_channel_binding,
    exporter,
    exporter_master_secret,
    hkdf_expand_label,
    hkdf_extract,
    tls_exporter,
)

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "transport" / "rfc8448_simple_1rtt.json"
SHA256_EMPTY = hashlib.sha256(b"").digest()


def _rfc8448() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VECTORS.read_text())
    return data


def test_rfc8448_key_schedule_from_ecdhe_to_master_secret() -> None:
    v = _rfc8448()
    early = hkdf_extract("sha256", b"", bytes(32))
    assert early.hex() == v["early_secret"]
    hs = hkdf_extract("sha256", derive_secret("sha256", early, b"derived", SHA256_EMPTY),
                      bytes.fromhex(v["ecdhe_shared_secret"]))
    assert hs.hex() == v["handshake_secret"]
    master = hkdf_extract("sha256", derive_secret("sha256", hs, b"derived", SHA256_EMPTY), bytes(32))
    assert master.hex() == v["master_secret"]


def test_rfc8448_exporter_master_secret_uses_transcript_through_server_finished() -> None:
    v = _rfc8448()
    master = bytes.fromhex(v["master_secret"])
    msgs = [bytes.fromhex(m) for m in v["messages_through_server_finished"]]
    transcript = hashlib.sha256(b"".join(msgs)).digest()
    # The same transcript yields the RFC's application traffic secrets, so it is the right one ...
    assert derive_secret("sha256", master, b"c ap traffic", transcript).hex() == v["client_application_traffic_secret"]
    assert derive_secret("sha256", master, b"s ap traffic", transcript).hex() == v["server_application_traffic_secret"]
    # ... and the exporter master secret over it is the RFC's value.
    assert exporter_master_secret("sha256", master, transcript).hex() == v["exporter_master_secret"]
    # One message short (no server Finished) gives something else.
    short = hashlib.sha256(b"".join(msgs[:-1])).digest()
    assert exporter_master_secret("sha256", master, short).hex() != v["exporter_master_secret"]


def test_rfc8448_server_finished_via_hkdf_expand_label() -> None:
    v = _rfc8448()
    msgs = [bytes.fromhex(m) for m in v["messages_through_server_finished"]]
    s_hs_traffic = bytes.fromhex(v["server_handshake_traffic_secret"])
    finished_key = hkdf_expand_label("sha256", s_hs_traffic, b"finished", b"", 32)
    verify = hmac.new(finished_key, hashlib.sha256(b"".join(msgs[:-1])).digest(), "sha256").digest()
    assert verify.hex() == v["server_finished_verify_data"]


def _reference_exporter(algorithm: hashes.HashAlgorithm, secret: bytes, label: bytes, context: bytes,
                        length: int) -> bytes:
    """RFC 8446 §7.5 written independently with the `cryptography` package's HKDF-Expand."""

    def expand_label(s: bytes, lab: bytes, ctx: bytes, n: int) -> bytes:
        full = b"tls13 " + lab
        info = n.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(ctx)]) + ctx
        return HKDFExpand(algorithm=algorithm, length=n, info=info).derive(s)

    def digest(data: bytes) -> bytes:
        h = hashes.Hash(algorithm)
        h.update(data)
        return h.finalize()

    per_label = expand_label(secret, label, digest(b""), algorithm.digest_size)
    return expand_label(per_label, b"exporter", digest(context), length)


@pytest.mark.parametrize(("hash_name", "algorithm"), [("sha256", hashes.SHA256()), ("sha384", hashes.SHA384())])
@pytest.mark.parametrize(("label", "context", "length"), [
    (CHANNEL_BINDING_LABEL, b"", 32), (b"EXPORTER-x", b"ctx", 16), (b"EXPORTER-y", b"\x00" * 100, 100),
])
def test_tls_exporter_matches_independent_hkdf(hash_name: str, algorithm: hashes.HashAlgorithm, label: bytes,
                                               context: bytes, length: int) -> None:
    secret = bytes(range(algorithm.digest_size))
    assert tls_exporter(hash_name, secret, label, context, length) == _reference_exporter(
        algorithm, secret, label, context, length)


def _self_signed() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cowboy-test")])
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(start).not_valid_after(start + datetime.timedelta(days=36500))
            .sign(key, hashes.SHA256()))
    return cert, key


def test_tls_exporter_matches_openssl_export_keying_material() -> None:
    """OpenSSL's own RFC 8446 exporter, given the EXPORTER_SECRET it logs, agrees with tls_exporter."""
    from OpenSSL import SSL

    cert, key = _self_signed()
    secrets: list[bytes] = []

    def endpoint(server: bool) -> SSL.Connection:
        ctx = SSL.Context(SSL.TLS_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_3_VERSION)
        ctx.set_keylog_callback(lambda _conn, line: secrets.append(line))
        if server:
            ctx.use_certificate(cert)
            ctx.use_privatekey(key)
        conn = SSL.Connection(ctx, None)
        if server:
            conn.set_accept_state()
        else:
            conn.set_connect_state()
        return conn

    client, server = endpoint(False), endpoint(True)
    for _ in range(10):  # in-memory BIO ping-pong until both finish
        for a, b in ((client, server), (server, client)):
            with contextlib.suppress(SSL.WantReadError):
                a.do_handshake()
            with contextlib.suppress(SSL.WantReadError):
                b.bio_write(a.bio_read(1 << 16))
    exporter_lines = {line.split()[2] for line in secrets if line.startswith(b"EXPORTER_SECRET ")}
    assert len(exporter_lines) == 1
    secret = bytes.fromhex(exporter_lines.pop().decode())
    hash_name = "sha384" if client.get_cipher_name().endswith("SHA384") else "sha256"
    for label, context in ((CHANNEL_BINDING_LABEL, b""), (b"EXPORTER-other", b"some context")):
        expected = client.export_keying_material(label, 32, context)
        assert server.export_keying_material(label, 32, context) == expected
        assert tls_exporter(hash_name, secret, label, context, 32) == expected


def _pair(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[QuicConnection, QuicConnection]:
    """An aioquic client and server, not yet connected."""
    client = QuicConnection(configuration=QuicConfiguration(is_client=True, alpn_protocols=["cowboy-cip11"],
                                                            verify_mode=ssl.CERT_NONE))
    server_cfg = QuicConfiguration(is_client=False, alpn_protocols=["cowboy-cip11"])
    server_cfg.certificate = cert
    server_cfg.private_key = key
    server = QuicConnection(configuration=server_cfg,
                            original_destination_connection_id=client.original_destination_connection_id)
    return client, server


def _run_handshake(client: QuicConnection, server: QuicConnection) -> None:
    """Exchange datagrams in memory (no sockets) until both ends report HandshakeCompleted."""
    client_addr, server_addr, now = ("127.0.0.1", 4000), ("127.0.0.1", 4433), 0.0
    client.connect(server_addr, now=now)
    done = {"client": False, "server": False}
    for _ in range(20):
        for src, dst, src_addr in ((client, server, client_addr), (server, client, server_addr)):
            for data, _addr in src.datagrams_to_send(now=now):
                dst.receive_datagram(data, src_addr, now=now)
        for name, conn in (("client", client), ("server", server)):
            while (event := conn.next_event()) is not None:
                done[name] = done[name] or isinstance(event, HandshakeCompleted)
        if all(done.values()):
            break
        now += 0.01
    assert all(done.values()), done


def _handshake(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[QuicConnection, QuicConnection]:
    """A real aioquic client/server pair with channel binding enabled, handshake completed."""
    client, server = _pair(cert, key)
    enable_channel_binding(client)
    enable_channel_binding(server)
    _run_handshake(client, server)
    return client, server


def test_aioquic_channel_binding_is_equal_on_both_ends_and_differs_between_connections() -> None:
    cert, key = _self_signed()
    c1, s1 = _handshake(cert, key)
    c2, s2 = _handshake(cert, key)
    assert len(channel_binding(c1)) == 32
    assert channel_binding(c1) == channel_binding(s1)
    assert channel_binding(c2) == channel_binding(s2)
    assert channel_binding(c1) != channel_binding(c2)
    # Other labels/contexts are exporters of the same secret too, and differ from the binding.
    assert exporter(c1, b"EXPORTER-other", b"x", 32) == exporter(s1, b"EXPORTER-other", b"x", 32)
    assert exporter(c1, b"EXPORTER-other", b"x", 32) != channel_binding(c1)


def test_aioquic_exporter_secret_is_taken_from_the_server_finished_transcript() -> None:
    """Recompute from aioquic's key schedule at the first 1-RTT key, independently of the hook's code path."""
    cert, key = _self_signed()
    client, server = _pair(cert, key)
    seen: list[bytes] = []
    original = client._update_traffic_key

    def spy(direction: Any, epoch: Any, cipher_suite: Any, secret: bytes) -> None:
        ks = client.tls.key_schedule
        if epoch.name == "ONE_RTT" and not seen:
            # aioquic's own Derive-Secret over its live transcript: the RFC 8446 exporter master secret
            seen.append(ks.derive_secret(b"exp master"))
        original(direction, epoch, cipher_suite, secret)

    client._update_traffic_key = spy  # type: ignore[method-assign]
    enable_channel_binding(client)  # wraps the spy, so both see the same moment
    enable_channel_binding(server)
    _run_handshake(client, server)
    hash_name = client.tls.key_schedule.algorithm.name
    assert seen and channel_binding(client) == tls_exporter(hash_name, seen[0], CHANNEL_BINDING_LABEL, b"", 32)
    assert channel_binding(server) == channel_binding(client)


def test_channel_binding_requires_completed_handshake_and_early_enable() -> None:
    cert, key = _self_signed()
    client = QuicConnection(configuration=QuicConfiguration(is_client=True, verify_mode=ssl.CERT_NONE))
    enable_channel_binding(client)
    with pytest.raises(RuntimeError):
        channel_binding(client)  # no handshake yet
    c1, _ = _handshake(cert, key)
    with pytest.raises(RuntimeError):
        enable_channel_binding(c1)  # too late: TLS context already exists
