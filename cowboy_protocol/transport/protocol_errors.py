"""Typed transport errors. Each carries the :class:`GoodbyeReason` to close with and a stable code.

A :class:`RemoteProtocolError` means the peer sent something invalid (malformed frame,
bad signature, wrong identity); the session answers with ``Goodbye{reason}`` if it still
can, otherwise it closes — never a crash (DESIGN.md §3 rule 5). A
:class:`LocalProtocolError` means this side asked for something the protocol forbids
(an oversized frame, a field out of range); it is a bug or misuse on our side.
"""

from __future__ import annotations

from cowboy_protocol.transport.enums import GoodbyeReason

__all__ = ["LocalProtocolError", "RemoteProtocolError", "SignatureError", "TransportError"]


class TransportError(Exception):
    """Base class: ``code`` is a stable machine-readable string, ``reason`` the Goodbye reason."""

    def __init__(self, code: str, message: str, *, reason: GoodbyeReason = GoodbyeReason.PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


class LocalProtocolError(TransportError):
    """This side tried to encode or send something the protocol does not allow."""


class RemoteProtocolError(TransportError):
    """The peer sent bytes or values that violate CIP-11; close with ``Goodbye{reason}``."""


class SignatureError(RemoteProtocolError):
    """A role/scheme/key-length/signature-length mismatch or a signature that does not verify.

    Always fatal for the connection (CIP-11 §12.6: "Role-scheme mismatch is a fatal error");
    for a JobAssignment the runner answers ``Reject(UnverifiableAssignment)`` instead.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, reason=GoodbyeReason.AUTH_FAILED)
