"""Self-signed TLS certificates for the CIP-11 QUIC endpoint.

CIP-11 §6.2: "certificates MAY be self-signed … The TLS certificate key is not the CIP-11
identity." Identity is proved by the role-key signatures of the Hello/HelloAck exchange,
bound to this TLS channel by the exporter channel binding. The runner therefore does not
verify the validator's certificate chain (``verify_mode=ssl.CERT_NONE`` on the client by
default): a man in the middle could terminate TLS, but it could not produce a HelloAck for
the channel binding of the connection the runner actually holds.

The node creates one certificate at first start in its home directory
(:func:`ensure_certificate`) and keeps it; rotating it changes nothing on the protocol level.
The key file is written 0600 and the certificate 0644 whatever the umask, and an existing key file
that group or others may access is refused (``chmod 600 PATH`` fixes it), as for the validator key.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import secrets
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["CERT_VALIDITY_DAYS", "RESET_KEY_BYTES", "check_key_file_mode", "ensure_certificate", "ensure_reset_key",
           "generate_self_signed", "load_certificate"]

CERT_VALIDITY_DAYS = 3650
"""Validity of a generated certificate (ten years; nobody verifies its dates, see the module docstring)."""


def generate_self_signed(common_name: str) -> tuple[bytes, bytes]:
    """A fresh ECDSA P-256 key and a self-signed certificate for ``common_name`` → ``(cert_pem, key_pem)``.

    The certificate also carries ``common_name`` as a DNS subjectAltName, so a client that
    does choose to verify (with this certificate as its CA) can use it as ``server_name``.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))  # tolerate clock skew between peers
        .not_valid_after(now + datetime.timedelta(days=CERT_VALIDITY_DAYS))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert_pem, key_pem


def load_certificate(cert_pem: bytes, key_pem: bytes) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Parse PEM bytes into what aioquic's ``QuicConfiguration.certificate/private_key`` take."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the QUIC certificate key must be an ECDSA key")
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise ValueError("the certificate does not belong to the private key")
    return cert, key


def check_key_file_mode(key_path: Path) -> None:
    """Raise PermissionError when group or others may access the private key file (any bit of 0o077)."""
    mode = stat.S_IMODE(os.stat(key_path).st_mode)
    if mode & 0o077:
        raise PermissionError(f"key file {key_path}: mode {mode:04o} lets group or others access the QUIC TLS "
                              f"private key; run `chmod 600 {key_path}`")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (it must not exist) with exactly ``mode``, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)


RESET_KEY_BYTES = 32
"""Length of the stateless-reset secret (``ensure_reset_key``)."""


def ensure_reset_key(path: Path) -> bytes:
    """The QUIC stateless-reset secret in ``path``, created once (32 random bytes, mode 0600).

    The server derives every connection id's stateless reset token from it (RFC 9000 §10.3.2), so a restarted
    server can reset the connections its previous run held. Like the TLS key, a file group or others may access
    is refused (PermissionError), and a file of the wrong length is refused (ValueError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        _write_new(path, secrets.token_bytes(RESET_KEY_BYTES), 0o600)
    check_key_file_mode(path)
    data = path.read_bytes()
    if len(data) != RESET_KEY_BYTES:
        raise ValueError(f"stateless-reset key {path}: {len(data)} bytes, expected {RESET_KEY_BYTES}")
    return data


def ensure_certificate(cert_path: Path, key_path: Path, common_name: str) -> tuple[bytes, bytes]:
    """Read the PEM pair at the given paths, creating it (key 0600, certificate 0644) if neither exists.

    Raises PermissionError for an existing key file that group or others may access.
    """
    if cert_path.exists() and key_path.exists():
        check_key_file_mode(key_path)
        cert_pem, key_pem = cert_path.read_bytes(), key_path.read_bytes()
        load_certificate(cert_pem, key_pem)  # fail at start, not at the first handshake
        return cert_pem, key_pem
    if cert_path.exists() or key_path.exists():
        raise FileExistsError(f"only one of {cert_path} and {key_path} exists; remove it or restore the other")
    cert_pem, key_pem = generate_self_signed(common_name)
    key_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    cert_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_new(key_path, key_pem, 0o600)
    _write_new(cert_path, cert_pem, 0o644)
    return cert_pem, key_pem
