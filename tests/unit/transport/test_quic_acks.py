"""ACK piggyback (``cowboy_protocol/transport/quic_acks``): a relayed ping's ACK waits for the pong (within the
advertised max_ack_delay) and becomes due the moment the pong is queued."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from aioquic.tls import Epoch

from cowboy_protocol.quic.acks import REPLY_ACK_DELAY_S, ack_with_next_packet, expect_reply

MAX_ACK_DELAY_S = 0.025
"""What aioquic advertises (transport parameter max_ack_delay = 25 ms)."""


def _quic(ack_at: float | None) -> Any:
    return SimpleNamespace(_spaces={Epoch.ONE_RTT: SimpleNamespace(ack_at=ack_at)})


def test_a_pending_ack_waits_for_the_reply_but_within_max_ack_delay() -> None:
    q = _quic(ack_at=100.001)  # aioquic's own 1 ms delay
    expect_reply(q, 100.0)
    ack_at = q._spaces[Epoch.ONE_RTT].ack_at
    assert 100.001 < ack_at <= 100.0 + MAX_ACK_DELAY_S
    assert REPLY_ACK_DELAY_S < MAX_ACK_DELAY_S


def test_no_pending_ack_stays_none() -> None:
    q = _quic(ack_at=None)
    expect_reply(q, 100.0)
    ack_with_next_packet(q, 100.0)
    assert q._spaces[Epoch.ONE_RTT].ack_at is None


def test_queuing_the_reply_makes_the_ack_due_now_and_never_later() -> None:
    q = _quic(ack_at=100.015)
    ack_with_next_packet(q, 100.002)
    assert q._spaces[Epoch.ONE_RTT].ack_at == 100.002
    q = _quic(ack_at=99.0)  # already overdue: unchanged
    ack_with_next_packet(q, 100.0)
    assert q._spaces[Epoch.ONE_RTT].ack_at == 99.0


def test_before_the_handshake_there_is_no_1rtt_space() -> None:
    q = SimpleNamespace(_spaces={})
    expect_reply(q, 1.0)  # type: ignore[arg-type]
    ack_with_next_packet(q, 1.0)  # type: ignore[arg-type]
