"""Local presence rules (CIP-11 §6.3, §6.4, §10.6, §11.3)."""

from __future__ import annotations

import pytest

from cowboy_node.transport.presence import PRESENCE_TIMEOUT_BLOCKS, LocalPresence


def test_presence_timeout_default_is_15_blocks() -> None:
    assert PRESENCE_TIMEOUT_BLOCKS == 15


def test_valid_ping_records_the_runner() -> None:
    p = LocalPresence()
    assert p.ping(7, 100)
    assert p.present(100) == frozenset({7})


def test_runner_silent_for_more_than_the_timeout_is_dropped_and_kept_exactly_at_it() -> None:
    p = LocalPresence(timeout_blocks=15)
    p.ping(1, 100)
    p.ping(2, 101)
    assert p.present(115) == frozenset({1, 2})  # gap of exactly 15 blocks: still present
    assert p.present(116) == frozenset({2})  # gap of 16: dropped
    assert p.present(117) == frozenset()


def test_later_ping_refreshes_and_an_older_height_never_moves_it_back() -> None:
    p = LocalPresence(timeout_blocks=5)
    p.ping(1, 10)
    p.ping(1, 20)
    p.ping(1, 12)  # a ping reporting an older head does not shorten the entry
    assert p.present(25) == frozenset({1})


def test_backpressure_false_removes_and_pings_do_not_restore_until_capacity_is_reasserted() -> None:
    p = LocalPresence()
    p.ping(3, 10)
    p.backpressure(3, accepting_new=False)
    assert 3 not in p.present(10)
    assert not p.accepting(3)
    assert not p.ping(3, 11)
    assert p.present(11) == frozenset()
    p.backpressure(3, accepting_new=True)
    assert p.accepting(3)
    assert 3 not in p.present(11)  # restored by the next valid ping, not by the signal itself
    assert p.ping(3, 12)
    assert p.present(12) == frozenset({3})


def test_hard_failure_clears_the_entry_and_the_next_ping_restores_it() -> None:
    p = LocalPresence()
    p.ping(4, 10)
    p.hard_failure(4)
    assert p.present(10) == frozenset()
    p.ping(4, 11)
    assert p.present(11) == frozenset({4})


def test_connection_loss_clears_at_once_and_a_fresh_handshake_forgets_backpressure() -> None:
    p = LocalPresence()
    p.ping(5, 10)
    p.backpressure(5, accepting_new=False)
    p.connection_closed(5)
    assert p.present(10) == frozenset()
    assert p.ping(5, 11)  # new connection: no inherited backpressure
    assert p.present(11) == frozenset({5})


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LocalPresence(timeout_blocks=0)
