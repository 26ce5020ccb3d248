"""Bounds and bookkeeping of the early-reveal hold (CIP-11 §10.3)."""

from __future__ import annotations

from cowboy_node.transport.reveal_hold import HeldReveal, RevealHold, Verdict


def _r(owner: int, job: int, size: int = 10) -> HeldReveal:
    return HeldReveal(owner, bytes([job]) * 32, bytes(size), owner)


def test_per_connection_and_total_bounds_by_count_and_bytes() -> None:
    hold = RevealHold(per_connection=2, total=3, bytes_per_connection=100, bytes_total=150)
    assert hold.hold(_r(1, 1)) and hold.hold(_r(1, 2))
    assert not hold.hold(_r(1, 3))  # third for connection 1
    assert hold.hold(_r(1, 2, 20))  # same (connection, job) replaces, does not count twice
    assert len(hold) == 2 and hold.held_by(1) == 2 and hold.held_bytes == 30
    assert hold.hold(_r(2, 1))
    assert not hold.hold(_r(3, 1))  # total count
    assert hold.drop_owner(1) == 2 and len(hold) == 1 and hold.held_bytes == 10
    assert not hold.hold(_r(3, 1, 101))  # bytes per connection
    assert hold.hold(_r(3, 1, 100)) and not hold.hold(_r(4, 1, 41))  # bytes in total: 10 + 100 + 41 > 150


def test_sweep_releases_drops_and_keeps() -> None:
    hold = RevealHold()
    for job in (1, 2, 3):
        assert hold.hold(_r(1, job))
    verdicts = {bytes([1]) * 32: Verdict.RELEASE, bytes([2]) * 32: Verdict.DROP, bytes([3]) * 32: Verdict.KEEP}
    released, dropped = hold.sweep(lambda e: verdicts[e.job_id])
    assert [e.job_id[0] for e in released] == [1] and dropped == 1
    assert len(hold) == 1 and hold.held_by(1) == 1 and hold.held_bytes == 10
