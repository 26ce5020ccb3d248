"""Where runners reach each validator's CIP-11 QUIC transport, learned from the validators themselves.

A runner keeps sessions with the ``k`` validators of its ``Sub(R)`` (CIP-11 §5.1) but is configured with one
validator's RPC. So every validator announces its runner-facing QUIC endpoint (``[quic] advertise``, default
``[quic] addr`` when that is not a wildcard) to the others over the peer layer, and ``GET /validators`` on any
validator lists every endpoint it knows; the runner fills its session plan from there (entries of its own
``[validators]`` table win). Endpoints are routing hints, not identity: a wrong one only costs a session that
fails the validator's HelloAck signature check (§6.2).

Wire (channel :data:`CH_ENDPOINTS`; deterministic CBOR, golden in ``docs/protocol.md``)::

    EndpointAnnouncement = {0: validator_pubkey (32), 1: quic endpoint ("HOST:PORT" text, ≤ 262 bytes),
                            2: rpc URL ("http(s)://HOST:PORT" text ≤ 300 bytes, "" when not announced),
                            3: sequence (u64, strictly increasing per validator), 4: signature (64)}

``signature`` is Ed25519 over ``ENDPOINT_DOMAIN ‖ genesis_hash ‖ CBOR{0, 1, 2, 3}``. The RPC URL lets a runner
fail over to another validator's HTTP API when its own validator is down (``[rpc] advertise``). Accepted only from the
validator the key names, with a verifying signature and a sequence above the last accepted one; refusals are
``malformed``, ``not_a_validator``, ``wrong_sender``, ``bad_signature``, ``stale``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from cowboy_node.p2p.announcer import AnnouncementRefused, check_announcer, check_signature
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.netaddr import parse_host_port
from cowboy_protocol.types.fields import decode_map, expect_bytes, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

CH_ENDPOINTS = 5
"""Peer-layer channel of endpoint announcements."""
ENDPOINT_DOMAIN = b"cowboy/validator-endpoints/v1"
"""Signature domain of an announcement."""
MAX_ENDPOINT_BYTES = 262
"""Longest endpoint text (a 253-byte host name, ':' and a port)."""
MAX_URL_BYTES = 300
"""Longest RPC URL."""


class EndpointRefused(AnnouncementRefused):
    """An endpoint announcement was not accepted; ``reason`` is a stable label."""


@dataclass(frozen=True, slots=True)
class EndpointAnnouncement:
    """One validator's runner-facing QUIC endpoint."""

    validator_pubkey: bytes
    """The announcer's raw Ed25519 peer_pubkey."""
    quic: str
    """``HOST:PORT`` (``[V6]:PORT``) runners dial."""
    rpc: str
    """``http(s)://HOST:PORT`` of the validator's HTTP API ("" when it announces none)."""
    sequence: int
    """Strictly increasing per validator (the announcer uses its wall clock in ms): newer replaces older."""
    signature: bytes
    """Ed25519 signature (see the module docstring)."""

    def _fields(self) -> dict[int, object]:
        return {0: self.validator_pubkey, 1: self.quic, 2: self.rpc, 3: self.sequence}

    def encode(self) -> bytes:
        """Canonical bytes."""
        return encode({**self._fields(), 4: self.signature})

    def preimage(self, genesis_hash: bytes) -> bytes:
        """The signed bytes."""
        return ENDPOINT_DOMAIN + genesis_hash + encode(self._fields())

    @staticmethod
    def decode(data: bytes) -> EndpointAnnouncement:
        """Strict inverse of :meth:`encode`; the endpoint must parse as ``HOST:PORT``."""
        m = decode_map(data, frozenset({0, 1, 2, 3, 4}), "EndpointAnnouncement")
        quic, rpc = m[1], m[2]
        if not isinstance(quic, str) or len(quic.encode()) > MAX_ENDPOINT_BYTES:
            raise DecodeError("EndpointAnnouncement.quic: expected HOST:PORT text")
        if not isinstance(rpc, str) or len(rpc.encode()) > MAX_URL_BYTES or (rpc and not is_http_url(rpc)):
            raise DecodeError("EndpointAnnouncement.rpc: expected an http(s)://HOST:PORT URL or empty text")
        try:
            parse_host_port(quic, key="EndpointAnnouncement.quic")
        except ValueError as e:
            raise DecodeError(str(e)) from None
        return EndpointAnnouncement(expect_bytes(m[0], "EndpointAnnouncement.validator_pubkey", 32), quic, rpc,
                                    expect_uint(m[3], "EndpointAnnouncement.sequence"),
                                    expect_bytes(m[4], "EndpointAnnouncement.signature", 64))


def is_http_url(text: str) -> bool:
    """``http(s)://HOST[:PORT]`` with nothing after the authority but an optional ``/``."""
    u = urllib.parse.urlsplit(text)
    try:
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return False
    return u.scheme in ("http", "https") and bool(u.hostname) and u.path in ("", "/") and not (
        u.query or u.fragment or u.username or u.password)


def make_endpoint_announcement(seed: bytes, genesis_hash: bytes, quic: str, sequence: int,
                               rpc: str = "") -> EndpointAnnouncement:
    """Sign this validator's endpoints."""
    unsigned = EndpointAnnouncement(ed25519.public_key_from_seed(seed), quic, rpc, sequence, bytes(64))
    return EndpointAnnouncement(unsigned.validator_pubkey, quic, rpc, sequence,
                                ed25519.sign(seed, unsigned.preimage(genesis_hash)))


class EndpointBook:
    """The newest accepted endpoint of each other validator."""

    def __init__(self, genesis_hash: bytes, validators: tuple[bytes, ...], me: bytes) -> None:
        self._genesis_hash = genesis_hash
        self._index = {k: i for i, k in enumerate(validators)}
        self._me = me
        self._latest: dict[bytes, EndpointAnnouncement] = {}

    def receive(self, sender: int, data: bytes) -> EndpointAnnouncement:
        """Check and keep an announcement from authenticated peer ``sender``; raises :class:`EndpointRefused`."""
        try:
            a = EndpointAnnouncement.decode(data)
        except DecodeError as e:
            raise EndpointRefused("malformed", str(e)) from None
        check_announcer(self._index, self._me, a.validator_pubkey, sender, EndpointRefused)
        last = self._latest.get(a.validator_pubkey)
        if last is not None and a.sequence <= last.sequence:
            raise EndpointRefused("stale", f"sequence {a.sequence} is not above {last.sequence}")
        check_signature(a.validator_pubkey, a.preimage(self._genesis_hash), a.signature, EndpointRefused)
        self._latest[a.validator_pubkey] = a
        return a

    def endpoint(self, validator_pubkey: bytes) -> str | None:
        """The newest accepted QUIC endpoint of ``validator_pubkey`` (None: never announced)."""
        got = self._latest.get(validator_pubkey)
        return None if got is None else got.quic

    def rpc_url(self, validator_pubkey: bytes) -> str | None:
        """The newest accepted RPC URL of ``validator_pubkey`` (None: never announced, or announced none)."""
        got = self._latest.get(validator_pubkey)
        return None if got is None or not got.rpc else got.rpc
