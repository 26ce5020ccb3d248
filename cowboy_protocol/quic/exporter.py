"""TLS 1.3 exporters (RFC 8446 §7.1, §7.5) and the CIP-11 channel binding of an aioquic connection.

The key-schedule functions are pure (stdlib ``hmac``/``hashlib``)::

    HKDF-Expand-Label(Secret, Label, Context, Length) = HKDF-Expand(Secret, HkdfLabel, Length),
        HkdfLabel = u16 Length ‖ u8 len("tls13 " + Label) ‖ "tls13 " + Label ‖ u8 len(Context) ‖ Context
    Derive-Secret(Secret, Label, Messages) = HKDF-Expand-Label(Secret, Label, Transcript-Hash(Messages), Hash.length)
    exporter_master_secret = Derive-Secret(Master Secret, "exp master", ClientHello...server Finished)
    TLS-Exporter(label, context, length) =
        HKDF-Expand-Label(Derive-Secret(exporter_master_secret, label, ""), "exporter", Hash(context), length)

aioquic (1.x) has no exporter API. Its ``tls.Context.key_schedule`` holds the master secret
after the handshake, but its running transcript hash moves past the server Finished once
the client Finished is processed. :func:`enable_channel_binding` therefore hooks the
connection's traffic-key callback: the first 1-RTT key installation happens, on both client
and server, right after the master secret is extracted and the transcript covers exactly
ClientHello…server Finished — the moment RFC 8446 defines ``exporter_master_secret``.

CIP-11 ``channel_binding`` (project choice for the lost definition) is
``TLS-Exporter("EXPORTER-cowboy-cip11-channel-binding", "", 32)``.
"""

from __future__ import annotations

import hashlib
import hmac
import weakref
from typing import Any

__all__ = [
    "CHANNEL_BINDING_LABEL",
    "CHANNEL_BINDING_LENGTH",
    "channel_binding",
    "derive_secret",
    "enable_channel_binding",
    "exporter_master_secret",
    "hkdf_expand",
    "hkdf_expand_label",
    "hkdf_extract",
    "tls_exporter",
]

CHANNEL_BINDING_LABEL = b"EXPORTER-cowboy-cip11-channel-binding"
"""Exporter label of the CIP-11 channel binding (RFC 5705 reserves the ``EXPORTER-`` prefix for such uses)."""
CHANNEL_BINDING_LENGTH = 32
"""Bytes of channel binding."""


def _hash_len(hash_name: str) -> int:
    return hashlib.new(hash_name).digest_size


def hkdf_extract(hash_name: str, salt: bytes, ikm: bytes) -> bytes:
    """RFC 5869 HKDF-Extract; an empty salt means ``Hash.length`` zero bytes."""
    return hmac.new(salt or bytes(_hash_len(hash_name)), ikm, hash_name).digest()


def hkdf_expand(hash_name: str, prk: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF-Expand (``length`` ≤ 255·Hash.length)."""
    if not 0 <= length <= 255 * _hash_len(hash_name):
        raise ValueError(f"HKDF-Expand length {length} out of range")
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hash_name).digest()
        out += block
        counter += 1
    return out[:length]


def hkdf_expand_label(hash_name: str, secret: bytes, label: bytes, context: bytes, length: int) -> bytes:
    """RFC 8446 §7.1 HKDF-Expand-Label (``HkdfLabel`` with the ``"tls13 "`` prefix)."""
    full = b"tls13 " + label
    if len(full) > 255 or len(context) > 255:
        raise ValueError("label or context longer than 255 bytes")
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context
    return hkdf_expand(hash_name, secret, info, length)


def derive_secret(hash_name: str, secret: bytes, label: bytes, transcript_hash: bytes) -> bytes:
    """RFC 8446 §7.1 Derive-Secret, given the already computed ``Transcript-Hash(Messages)``."""
    return hkdf_expand_label(hash_name, secret, label, transcript_hash, _hash_len(hash_name))


def exporter_master_secret(hash_name: str, master_secret: bytes, transcript_hash_server_finished: bytes) -> bytes:
    """``Derive-Secret(Master Secret, "exp master", ClientHello...server Finished)``."""
    return derive_secret(hash_name, master_secret, b"exp master", transcript_hash_server_finished)


def tls_exporter(hash_name: str, exporter_master: bytes, label: bytes, context: bytes, length: int) -> bytes:
    """RFC 8446 §7.5 ``TLS-Exporter(label, context_value, key_length)``.

    An absent context and an empty context give the same output in TLS 1.3.
    """
    empty_hash = hashlib.new(hash_name, b"").digest()
    per_label = derive_secret(hash_name, exporter_master, label, empty_hash)
    return hkdf_expand_label(hash_name, per_label, b"exporter", hashlib.new(hash_name, context).digest(), length)


# --- aioquic binding ----------------------------------------------------------------------------------------

# connection → (hash name, exporter_master_secret); weak so closed connections are not kept alive.
_EXPORTER_SECRETS: weakref.WeakKeyDictionary[Any, tuple[str, bytes]] = weakref.WeakKeyDictionary()


def enable_channel_binding(conn: Any) -> None:
    """Arrange for ``conn`` (an ``aioquic.quic.connection.QuicConnection``) to record its exporter master secret.

    Must be called before the handshake starts: before ``conn.connect()`` on a client, and
    before the first ``receive_datagram`` on a server (e.g. in the protocol's constructor).
    Only duck-typed attributes are used, so this module does not import aioquic.
    """
    if getattr(conn, "tls", None) is not None:
        raise RuntimeError("enable_channel_binding must be called before the TLS handshake starts")
    original = conn._update_traffic_key
    conn_ref = weakref.ref(conn)

    def update_traffic_key(direction: Any, epoch: Any, cipher_suite: Any, secret: bytes) -> None:
        c = conn_ref()
        if c is not None and c not in _EXPORTER_SECRETS and getattr(epoch, "name", "") == "ONE_RTT":
            ks = c.tls.key_schedule
            # First 1-RTT key: master secret just extracted (generation 3), transcript ends at server Finished.
            if ks.generation != 3:
                raise RuntimeError("unexpected TLS key schedule state at the first 1-RTT key")
            hash_name = ks.algorithm.name
            _EXPORTER_SECRETS[c] = (hash_name, exporter_master_secret(hash_name, ks.secret,
                                                                      ks.hash.copy().finalize()))
        original(direction, epoch, cipher_suite, secret)

    # QuicConnection._initialize reads self._update_traffic_key when it creates the TLS context.
    conn._update_traffic_key = update_traffic_key


def exporter(conn: Any, label: bytes, context: bytes, length: int) -> bytes:
    """RFC 8446 §7.5 exporter of an aioquic connection prepared with :func:`enable_channel_binding`."""
    try:
        hash_name, secret = _EXPORTER_SECRETS[conn]
    except KeyError:
        raise RuntimeError("no exporter secret: handshake not complete or enable_channel_binding not called") from None
    return tls_exporter(hash_name, secret, label, context, length)


def channel_binding(conn: Any) -> bytes:
    """CIP-11 channel_binding: ``TLS-Exporter("EXPORTER-cowboy-cip11-channel-binding", "", 32)``."""
    return exporter(conn, CHANNEL_BINDING_LABEL, b"", CHANNEL_BINDING_LENGTH)
