"""Reconnect backoff (CIP-11 §11.3) and on-chain heartbeat staggering (§6.6)."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from Crypto.Hash import keccak as ref_keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_runner.schedule import (
    backoff_delay,
    effective_cadence,
    forced_refresh_lead,
    heartbeat_due,
    heartbeat_phase,
)

ADDR = bytes.fromhex("19e7e376e7c213b7e7e7e46cc70a5dd086daff2a")
ZERO = bytes(20)


class FixedRng:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


# -- backoff -------------------------------------------------------------------------------------
def test_backoff_doubles_from_100ms_and_caps_at_30s_without_jitter() -> None:
    mid = FixedRng(0.5)  # u = 0: factor exactly 1
    assert [backoff_delay(a, mid) for a in range(10)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0])
    assert backoff_delay(10_000, mid) == 30.0


def test_backoff_jitter_is_plus_minus_25_percent() -> None:
    assert backoff_delay(3, FixedRng(0.0)) == pytest.approx(0.8 * 0.75)
    assert backoff_delay(20, FixedRng(0.0)) == pytest.approx(30 * 0.75)
    assert backoff_delay(20, FixedRng(0.999999)) == pytest.approx(30 * 1.25, rel=1e-5)


@settings(max_examples=300, deadline=None)
@given(attempt=st.integers(0, 200), seed=st.integers(0, 2**32))
def test_backoff_stays_within_the_jitter_band(attempt: int, seed: int) -> None:
    base = min(0.1 * 2 ** attempt, 30.0)
    d = backoff_delay(attempt, random.Random(seed))
    assert 0.75 * base <= d < 1.25 * base


def test_backoff_spreads_runners_that_retry_together() -> None:
    rng = random.Random(7)
    delays = {round(backoff_delay(5, rng), 6) for _ in range(200)}
    assert len(delays) > 150  # jitter decorrelates a herd


def test_backoff_rejects_negative_attempts() -> None:
    with pytest.raises(ValueError):
        backoff_delay(-1, FixedRng(0.5))


# -- phase ---------------------------------------------------------------------------------------
def _reference_phase(chain_id: str, address: bytes, cadence: int) -> int:
    digest = ref_keccak.new(digest_bits=256, data=chain_id.encode("utf-8") + address).digest()
    return int.from_bytes(digest, "big") % cadence


@pytest.mark.parametrize(("chain_id", "address", "cadence", "phase"), [
    # keccak256(b"cowboy-test-1" ‖ ADDR) = 0x296c2e9a…f32dbc03
    ("cowboy-test-1", ADDR, 80, 3),
    ("cowboy-test-1", ADDR, 100, 63),
    ("cowboy-test-1", ADDR, 7, 5),
    # keccak256(b"cowboy-devnet-1" ‖ ADDR) = 0x6a396ff2…4068c5c1
    ("cowboy-devnet-1", ADDR, 80, 33),
    ("cowboy-devnet-1", ADDR, 100, 13),
    # keccak256(b"cowboy-test-1" ‖ 0x00·20) = 0xa924bda3…9d6d8788
    ("cowboy-test-1", ZERO, 80, 72),
    ("cowboy-test-1", ZERO, 100, 52),
])
def test_heartbeat_phase_golden_values(chain_id: str, address: bytes, cadence: int, phase: int) -> None:
    assert _reference_phase(chain_id, address, cadence) == phase
    assert heartbeat_phase(chain_id, address, cadence) == phase


def test_heartbeat_phase_digest_is_keccak_of_the_concatenation() -> None:
    digest = ref_keccak.new(digest_bits=256, data=b"cowboy-test-1" + ADDR).digest()
    assert digest.hex() == "296c2e9a96b3e37b68d1d2fafa720b19e5318f3b23d81dd93faecee9f32dbc03"


def test_phase_is_runner_specific_and_spreads_runners_over_the_cadence() -> None:
    # §6.6: the staggering key MUST be runner-specific (no "height mod N == C" schedule for everyone).
    rng = random.Random(1)
    addresses = [rng.randbytes(20) for _ in range(5_000)]
    counts = Counter(heartbeat_phase("cowboy-devnet-1", a, 80) for a in addresses)
    assert len(counts) == 80
    assert max(counts.values()) < 2 * 5_000 / 80  # no bucket carries a herd
    assert heartbeat_phase("cowboy-devnet-1", ADDR, 80) != heartbeat_phase("cowboy-test-1", ADDR, 80)


# -- cadence and due -------------------------------------------------------------------------------
def test_effective_cadence_never_exceeds_timeout_minus_margin() -> None:
    assert effective_cadence(100, 20) == 80
    assert effective_cadence(100, 20, 0) == 80
    assert effective_cadence(100, 20, 30) == 30
    assert effective_cadence(100, 20, 95) == 80
    for bad in [(100, 100), (100, 0), (1, 1)]:
        with pytest.raises(ValueError):
            effective_cadence(*bad)


def _simulate(address: bytes, chain_id: str, cadence: int, timeout: int, blocks: int,
              dropped: frozenset[int] = frozenset(), start_last: int = 0, delay: int = 1) -> list[int]:
    """Heights at which heartbeats are included; a tx sent at h lands at h + delay unless h is in dropped."""
    last, in_flight, included = start_last, None, []
    for h in range(start_last + 1, start_last + blocks):
        if in_flight is not None and h >= in_flight:
            last, in_flight = in_flight, None
            included.append(last)
        if in_flight is None and heartbeat_due(h, last, address, chain_id, cadence, timeout) and h not in dropped:
            in_flight = h + delay
    return included


def test_steady_state_heartbeats_land_in_the_runner_phase_bucket_every_cadence() -> None:
    cadence, timeout = 80, 100
    phase = heartbeat_phase("cowboy-devnet-1", ADDR, cadence)
    included = _simulate(ADDR, "cowboy-devnet-1", cadence, timeout, 2_000)
    assert included
    # Sent at heights ≡ phase, landing one block later; the gap never exceeds the cadence.
    assert all((h - 1) % cadence == phase for h in included)
    gaps = [b - a for a, b in itertools.pairwise([0, *included])]
    assert max(gaps) <= cadence + 1 and max(gaps[1:]) == cadence


def test_forced_refresh_fires_before_the_floor_lapses_when_the_cadence_is_missed() -> None:
    cadence, timeout = 80, 100
    phase = heartbeat_phase("cowboy-devnet-1", ADDR, cadence)
    first = next(h for h in range(1, 200) if h % cadence == phase)
    lead = forced_refresh_lead(cadence, timeout)
    assert lead == 10
    # Last heartbeat at 0: due in the phase bucket, and in every block of [timeout − lead, timeout].
    for h in range(1, timeout + 1):
        expected = h % cadence == phase or h >= timeout - lead
        assert heartbeat_due(h, 0, ADDR, "cowboy-devnet-1", cadence, timeout) == expected, h
    # The in-phase heartbeat at `first` is lost (e.g. mempool congestion): the forced refresh saves the floor.
    included = _simulate(ADDR, "cowboy-devnet-1", cadence, timeout, 400, dropped=frozenset({first}))
    gaps = [b - a for a, b in itertools.pairwise([0, *included])]
    assert max(gaps) <= timeout  # never stale (eligible while height − last ≤ timeout)


def test_a_lapsed_runner_waits_for_its_phase_instead_of_joining_a_herd() -> None:
    cadence, timeout = 80, 100
    phase = heartbeat_phase("cowboy-devnet-1", ADDR, cadence)
    due = [h for h in range(1_000, 1_000 + cadence) if heartbeat_due(h, 0, ADDR, "cowboy-devnet-1", cadence, timeout)]
    assert due == [h for h in range(1_000, 1_000 + cadence) if h % cadence == phase]
    assert len(due) == 1


def test_not_due_in_the_block_of_the_last_heartbeat_or_when_the_view_lags() -> None:
    cadence, timeout = 80, 100
    phase = heartbeat_phase("cowboy-devnet-1", ADDR, cadence)
    h = 800 + phase
    assert heartbeat_due(h, h - 1, ADDR, "cowboy-devnet-1", cadence, timeout)
    assert not heartbeat_due(h, h, ADDR, "cowboy-devnet-1", cadence, timeout)
    assert not heartbeat_due(h, h + 5, ADDR, "cowboy-devnet-1", cadence, timeout)
    assert not heartbeat_due(h + 1, h - 1, ADDR, "cowboy-devnet-1", cadence, timeout)


@settings(max_examples=200, deadline=None)
@given(address=st.binary(min_size=20, max_size=20), timeout=st.integers(3, 300), margin_frac=st.floats(0.01, 0.9),
       delay=st.integers(1, 2))
def test_heartbeats_keep_the_floor_fresh_for_any_runner(address: bytes, timeout: int, margin_frac: float,
                                                        delay: int) -> None:
    margin = max(delay + 1, int(timeout * margin_frac))
    if margin >= timeout:
        return
    cadence = effective_cadence(timeout, margin)
    included = _simulate(address, "cowboy-devnet-1", cadence, timeout, 4 * timeout, delay=delay)
    points = [0, *included]
    assert all(b - a <= timeout for a, b in itertools.pairwise(points))
    assert 4 * timeout - 1 - points[-1] <= timeout


def test_heartbeat_due_rejects_a_cadence_not_below_the_timeout() -> None:
    with pytest.raises(ValueError):
        heartbeat_due(10, 0, ADDR, "c", 100, 100)
    with pytest.raises(ValueError):
        heartbeat_phase("c", b"short", 10)
