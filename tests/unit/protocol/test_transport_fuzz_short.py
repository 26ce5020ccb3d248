"""A short run of the CIP-11 transport fuzz target (``tests/fuzz/fuzz_transport.py``) in the default suite:
random and mutated frame streams through ``FrameDecoder`` into both session kinds raise nothing but typed
transport errors, end in at most one Goodbye + Closed, keep the decoder buffer under MAX_FRAME_BYTES + 4, and
stay within a memory bound. The last tests break the code under test on purpose to show the checks can fail."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cowboy_protocol.transport import framing
from cowboy_protocol.transport.frames import MAX_FRAME_BYTES
from cowboy_protocol.transport.validator_session import ValidatorSession
from tests.fuzz.fuzz_transport import BUFFER_BOUND, ENCODED_TO_VALIDATOR, Case, Violation, generate, rng_draw, run_case

SHORT_CASES = 2_000
PEAK_BOUND_MIB = 64.0
"""Same bound as the long target's default."""


def test_seeded_fuzz_cases_raise_nothing_and_memory_stays_bounded() -> None:
    tracemalloc.start()
    try:
        outcomes = [run_case(generate(rng_draw(random.Random(0xC1B11 * 1_000_003 + i)))) for i in range(SHORT_CASES)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / 2**20 < PEAK_BOUND_MIB
    # The generator reaches every ending, including sessions that authenticated first.
    assert {o.split("+")[0] for o in outcomes} == {"open", "closed_local", "closed_peer"}
    assert any(o.endswith("+auth") for o in outcomes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_hypothesis_fuzz_cases_raise_nothing(data: st.DataObject) -> None:
    run_case(generate(lambda lo, hi: data.draw(st.integers(lo, hi))))


def test_near_maximal_truncated_frame_is_buffered_within_the_bound() -> None:
    length = MAX_FRAME_BYTES
    data = length.to_bytes(4, "big") + b"\x20" + bytes(length - 2)  # one byte short of complete
    assert run_case(Case("validator_fresh", data, (4, 65_536), (0, 0, 0), True)) == "closed_local"


def test_the_fuzz_checks_catch_an_exception_escaping_a_session(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: ValidatorSession, frame: object, now: float) -> list[object]:
        raise ValueError("escaped")

    monkeypatch.setattr(ValidatorSession, "_dispatch", boom)
    with pytest.raises(ValueError, match="escaped"):
        run_case(Case("validator_fresh", ENCODED_TO_VALIDATOR[0], (), (0,), False))  # the runner's genuine Hello


def test_the_fuzz_checks_catch_a_decoder_that_buffers_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "_check_length", lambda length, max_frame_bytes: None)
    data = (2**32 - 1).to_bytes(4, "big") + bytes(BUFFER_BOUND + 1)
    with pytest.raises(Violation, match="buffers"):
        run_case(Case("validator_fresh", data, (), (0,), False))
