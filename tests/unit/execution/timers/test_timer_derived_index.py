"""The timer id pointer and the per-actor index are derived keys (``state/derived.py``, docs/timers.md §2): stored
beside the records, out of the state tree. They must stay exactly what the records imply (a snapshot install
rebuilds them from the records alone), and the state root must be the one of the committed keys only."""

from __future__ import annotations

import pytest

from cowboy_node.chain.chain import STATE_PREFIX, Chain
from cowboy_node.execution.timers import timer_state
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.derived import is_derived
from cowboy_protocol.types.validation_errors import DecodeError
from tests.unit.eob_helpers import check_timer_indexes
from tests.unit.execution.timers.timer_mixed_scenario import run
from tests.unit.state.test_state_tree import ref_root

GOLDEN = Timer(actor_address=b"\x11" * 20, height=100, payload=b"hi", timer_id=b"\x22" * 32, handler="handle_timer",
               fee_payer=b"\x33" * 20, gas_limit_per_fire=550_000, expires_at=2_592_100, seq=7)
"""docs/timers.md §3's golden record."""


def test_the_derived_keys_of_a_record_are_the_documented_bytes() -> None:
    entry = b"timer/h/" + bytes.fromhex("0000000000000064" "0000000000000007")
    assert list(timer_state.derived_writes([(entry, GOLDEN.encode())])) == [
        (b"timer/t/" + b"\x22" * 32, bytes.fromhex("0000000000000064" "0000000000000007")),
        (b"timer/a/" + b"\x11" * 20 + b"\x22" * 32, bytes.fromhex("1864")),
    ]
    parked = b"timer/g/" + b"\x22" * 32  # a Globalbox record keeps its actor entry and has no pointer
    assert list(timer_state.derived_writes([(parked, GOLDEN.encode())])) == [
        (b"timer/a/" + b"\x11" * 20 + b"\x22" * 32, bytes.fromhex("1864"))]
    assert list(timer_state.derived_writes([(b"timer/m/" + b"\x11" * 20, b"\xa0")])) == []


@pytest.mark.parametrize("key", [b"timer/h/" + bytes(16), b"timer/g/" + b"\x23" * 32])
def test_a_record_at_a_key_that_is_not_its_own_is_refused(key: bytes) -> None:
    with pytest.raises(DecodeError):
        list(timer_state.derived_writes([(key, GOLDEN.encode())]))


def _stored(chain: Chain) -> dict[bytes, bytes]:
    return {k[len(STATE_PREFIX):]: v for k, v in chain.store.iterate(STATE_PREFIX)}


def test_through_the_mixed_run_the_indexes_are_what_the_records_imply_and_the_root_leaves_them_out() -> None:
    seen = {"blocks": 0, "most": 0}

    def check(chain: Chain) -> None:
        check_timer_indexes(chain.world())
        state = _stored(chain)
        derived = {k: v for k, v in state.items() if is_derived(k)}
        # the root is the reference tree's over every stored key but the derived ones
        assert chain.tree.root() == ref_root({k: v for k, v in state.items() if not is_derived(k)})
        seen["blocks"] += 1
        seen["most"] = max(seen["most"], len(derived))

    run(roots=True, after_block=check)
    assert seen["blocks"] > 10 and seen["most"] > 1_000  # the run held many live timers at once
