"""What every signed validator announcement on the peer layer (presence, endpoints) is checked against first.

An announcement names its announcer's Ed25519 key; it is taken only from that validator itself (the peer layer
authenticated ``sender``), never from ourselves, and only with a signature that verifies over its preimage.
"""

from __future__ import annotations

from collections.abc import Mapping

from cowboy_protocol.crypto import ed25519


class AnnouncementRefused(ValueError):
    """An announcement was not accepted; ``reason`` is a stable label (a metric label value)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_announcer(index: Mapping[bytes, int], me: bytes, announcer: bytes, sender: int,
                    refused: type[AnnouncementRefused]) -> None:
    """``announcer`` is another validator of ``index`` (key → snapshot position) and is ``sender`` itself;
    else ``refused("not_a_validator" | "wrong_sender", …)``."""
    position = index.get(announcer)
    if position is None or announcer == me:
        raise refused("not_a_validator", "announcer is not another validator of the snapshot")
    if position != sender:
        raise refused("wrong_sender", f"announcement of validator {position} sent by validator {sender}")


def check_signature(announcer: bytes, preimage: bytes, signature: bytes, refused: type[AnnouncementRefused]) -> None:
    """The announcer's Ed25519 signature over ``preimage``; else ``refused("bad_signature", …)``."""
    if not ed25519.verify(announcer, preimage, signature):
        raise refused("bad_signature", "announcement signature does not verify")
