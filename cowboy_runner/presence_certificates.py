"""Mode A on the runner (CIP-11 §8.3): collect PresenceReceipts from the subset validators, submit certificates.

Only while the chain requests Mode A (``PRESENCE_HARD_EXCLUDE_ENABLED``, read from ``/params``) does the runner
ask its validators for receipts (``PresenceReceiptRequest``) and certify itself. It keeps the newest receipt of
each validator (raw ``peer_pubkey``) and, once half the proof TTL has passed since its last accepted anchor (or it
has none), submits a ``SubmitPresenceCertificate`` with every fresh, accepting receipt it holds — as soon as it
holds ``T_HARD`` of them from distinct validators and their newest height is above its last anchor (the chain
refuses anything else: ``too_few_receipts``, ``anchor_not_newer``). The chain decides; this module only avoids
transactions that would certainly fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cowboy_protocol.transport.frames import PresenceReceiptFrame
from cowboy_protocol.types.presence_instructions import MAX_RECEIPTS, PresenceReceipt, SubmitPresenceCertificate

CERT_BASE_CYCLES = 10_000 + 20_000
"""Transaction base + PRESENCE_CERT_BASE_CYCLES (CIP-11 §13)."""
CYCLES_PER_RECEIPT = 1_000 + 5_000
"""Precheck + one Ed25519 attempt per receipt (CIP-11 §13)."""
CYCLES_MARGIN = 10_000
"""Headroom for the state write."""


def certificate_cycles(n_receipts: int) -> int:
    """The cycles limit of a certificate transaction with ``n_receipts`` receipts."""
    return CERT_BASE_CYCLES + CYCLES_PER_RECEIPT * n_receipts + CYCLES_MARGIN


def mode_a_requested(params: Mapping[str, Any]) -> bool:
    """Does the chain's ``/params`` document set ``PRESENCE_HARD_EXCLUDE_ENABLED``?"""
    return bool((params.get("cip11") or {}).get("PRESENCE_HARD_EXCLUDE_ENABLED", False))


def receipt_of(frame: PresenceReceiptFrame) -> PresenceReceipt:
    """The on-chain receipt a (session-verified) PresenceReceipt frame carries."""
    return PresenceReceipt(frame.runner_pubkey.to_bytes(), frame.validator_pubkey.to_bytes(), frame.subset_epoch,
                           frame.validator_set_hash, frame.block_height, frame.nonce_echo, frame.accepting_new,
                           frame.validator_signed)


class PresenceCertifier:
    """Receipts held and certificates sent by one runner (not persisted: after a restart it simply re-collects)."""

    def __init__(self, runner: bytes) -> None:
        self.runner = runner
        self.receipts: dict[bytes, PresenceReceipt] = {}
        """Newest receipt per raw validator peer_pubkey (during an overlap, whichever epoch's is newer)."""
        self.last_anchor = 0
        """The anchor of the last certificate sent (the chain's ``presence_anchor`` once it was included)."""
        self.sent = 0
        """Certificates submitted."""

    def add(self, frame: PresenceReceiptFrame) -> None:
        """Keep a verified receipt if it is the newest of its validator."""
        r = receipt_of(frame)
        key = frame.validator_pubkey.key
        held = self.receipts.get(key)
        if held is None or r.block_height >= held.block_height:
            self.receipts[key] = r

    def next_certificate(self, height: int, *, t_hard: int, freshness: int,
                         ttl: int) -> SubmitPresenceCertificate | None:
        """The certificate to submit at ``height``, or None (not due, too few fresh receipts, nothing newer)."""
        if self.last_anchor and height < self.last_anchor + ttl // 2:
            return None  # the last proof still covers more than half its TTL
        fresh = sorted((r for r in self.receipts.values()
                        if r.accepting_new and r.block_height <= height and height - r.block_height <= freshness),
                       key=lambda r: (-r.block_height, r.validator_pubkey))[:MAX_RECEIPTS]
        if len(fresh) < max(1, t_hard) or fresh[0].block_height <= self.last_anchor:
            return None
        return SubmitPresenceCertificate(self.runner, tuple(fresh))

    def submitted(self, cert: SubmitPresenceCertificate) -> None:
        """Record a submitted certificate (its anchor is what the next one must exceed)."""
        self.last_anchor = max(r.block_height for r in cert.receipts)
        self.sent += 1
