"""Stateless reset pieces of the QUIC adapter (RFC 9000 §10.3) and the persistent reset secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cowboy_protocol.quic.adapter import (
    MIN_STATELESS_RESET_BYTES,
    SERVER_CID_LENGTH,
    is_issued_cid,
    is_stateless_reset,
    issue_cid,
    stateless_reset_packet,
    stateless_reset_token,
)
from cowboy_protocol.quic.certs import ensure_reset_key


def test_server_connection_ids_are_recognised_only_under_their_secret() -> None:
    a, b = bytes(32), bytes([1]) * 32
    cid = issue_cid(a)
    assert len(cid) == SERVER_CID_LENGTH and issue_cid(a) != cid
    assert is_issued_cid(a, cid) and not is_issued_cid(b, cid)
    assert not is_issued_cid(a, cid[:-1] + bytes([cid[-1] ^ 1])) and not is_issued_cid(a, cid[:8])
    assert not any(is_issued_cid(a, bytes([i]) * SERVER_CID_LENGTH) for i in range(256))  # garbage is not ours


def test_token_is_a_keyed_function_of_the_connection_id() -> None:
    a, b = bytes(32), bytes([1]) * 32
    cid = bytes(range(8))
    assert len(stateless_reset_token(a, cid)) == 16
    assert stateless_reset_token(a, cid) == stateless_reset_token(a, cid)  # same secret: same token after restart
    assert stateless_reset_token(b, cid) != stateless_reset_token(a, cid)
    assert stateless_reset_token(a, bytes(8)) != stateless_reset_token(a, cid)


@pytest.mark.parametrize("trigger", [22, 30, 43, 44, 65, 1200])
def test_reset_is_smaller_than_its_trigger_short_header_and_ends_with_the_token(trigger: int) -> None:
    token = stateless_reset_token(bytes(32), b"\x07" * 8)
    packet = stateless_reset_packet(token, trigger)
    assert packet is not None and MIN_STATELESS_RESET_BYTES <= len(packet) < trigger and len(packet) <= 64
    assert packet[0] & 0xC0 == 0x40  # header form 0, fixed bit 1
    assert packet[-16:] == token and is_stateless_reset(packet, token)


def test_no_reset_for_a_trigger_too_short_to_answer_with_a_smaller_one() -> None:
    assert stateless_reset_packet(bytes(16), MIN_STATELESS_RESET_BYTES) is None


def test_only_the_token_in_use_counts() -> None:
    token = stateless_reset_token(bytes(32), b"\x07" * 8)
    packet = stateless_reset_packet(token, 100)
    assert packet is not None
    assert not is_stateless_reset(packet, stateless_reset_token(bytes(32), b"\x08" * 8))
    assert not is_stateless_reset(packet, None) and not is_stateless_reset(packet, b"")
    assert not is_stateless_reset(bytes([0x80]) + packet[1:], token)  # a long header is never a reset
    assert not is_stateless_reset(packet[-20:], token)  # shorter than 21 bytes


def test_reset_key_is_created_once_with_mode_0600_and_refused_when_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "home" / "quic-reset.key"
    first = ensure_reset_key(path)
    assert len(first) == 32 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert ensure_reset_key(path) == first  # kept across restarts
    os.chmod(path, 0o644)
    with pytest.raises(PermissionError):
        ensure_reset_key(path)
    os.chmod(path, 0o600)
    path.write_bytes(b"short")
    with pytest.raises(ValueError):
        ensure_reset_key(path)
