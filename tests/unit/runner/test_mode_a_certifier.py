"""The runner's Mode A certifier (cowboy_runner/presence_certificates.py): newest receipt per validator, a
certificate only when the chain could accept it (t_hard fresh accepting receipts, anchor above the last one),
and not again before half the proof TTL has passed."""

from __future__ import annotations

from cowboy_protocol.transport.frames import PresenceReceiptFrame
from cowboy_protocol.transport.preimages import RunnerKey, ValidatorKey
from cowboy_runner.presence_certificates import PresenceCertifier, certificate_cycles, mode_a_requested

RUNNER = RunnerKey(b"\x01" * 32)
VALIDATORS = [ValidatorKey(bytes([0x10 + i]) * 32) for i in range(5)]


def _frame(v: int, height: int, accepting: bool = True) -> PresenceReceiptFrame:
    return PresenceReceiptFrame(RUNNER.pubkey, VALIDATORS[v].pubkey, 0, b"\x22" * 32, height, 1, accepting,
                                b"\x77" * 64)


def test_mode_a_requested_follows_the_chain_flag() -> None:
    assert not mode_a_requested({})
    assert not mode_a_requested({"cip11": {"PRESENCE_HARD_EXCLUDE_ENABLED": False}})
    assert mode_a_requested({"cip11": {"PRESENCE_HARD_EXCLUDE_ENABLED": True}})


def test_certificate_needs_t_hard_fresh_accepting_receipts_from_distinct_validators() -> None:
    c = PresenceCertifier(RUNNER.pubkey.address())
    c.add(_frame(0, 100))
    c.add(_frame(0, 104))  # newer receipt of the same validator replaces the older
    c.add(_frame(1, 103, accepting=False))  # never counts
    assert c.next_certificate(105, t_hard=2, freshness=30, ttl=60) is None
    c.add(_frame(2, 60))  # stale at 105 (45 > 30)
    assert c.next_certificate(105, t_hard=2, freshness=30, ttl=60) is None
    c.add(_frame(3, 102))
    cert = c.next_certificate(105, t_hard=2, freshness=30, ttl=60)
    assert cert is not None and cert.runner == RUNNER.pubkey.address()
    assert [(r.validator_pubkey[1:], r.block_height) for r in cert.receipts] == [
        (VALIDATORS[0].pubkey.key, 104), (VALIDATORS[3].pubkey.key, 102)]


def test_not_resubmitted_before_half_the_ttl_nor_without_a_newer_anchor() -> None:
    c = PresenceCertifier(RUNNER.pubkey.address())
    for v in range(3):
        c.add(_frame(v, 100))
    cert = c.next_certificate(100, t_hard=3, freshness=30, ttl=60)
    assert cert is not None
    c.submitted(cert)
    assert c.last_anchor == 100
    assert c.next_certificate(129, t_hard=3, freshness=30, ttl=60) is None  # proof still covers > half its TTL
    assert c.next_certificate(130, t_hard=3, freshness=30, ttl=60) is None  # due, but nothing newer than 100
    for v in range(3):
        c.add(_frame(v, 128))
    again = c.next_certificate(130, t_hard=3, freshness=30, ttl=60)
    assert again is not None and max(r.block_height for r in again.receipts) == 128


def test_cycles_cover_the_chain_charge() -> None:
    # tx base 10,000 + PRESENCE_CERT_BASE_CYCLES 20,000 + (1,000 + 5,000) per receipt, plus headroom
    assert certificate_cycles(11) >= 10_000 + 20_000 + 11 * 6_000
