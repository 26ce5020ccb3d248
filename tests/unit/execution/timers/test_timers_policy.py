"""Governed TimerPolicy: defaults (FIFO), golden bytes, state key, strict decode."""

from __future__ import annotations

import pytest

from cowboy_node.execution.timers.policy import (
    KEY_TIMER_POLICY,
    MODE_FIFO,
    MODE_GLOBALBOX,
    TimerPolicy,
    get_timer_policy,
    set_timer_policy,
)
from cowboy_protocol.types.validation_errors import DecodeError
from tests.unit.eob_helpers import make_world

DEFAULT_BYTES = bytes.fromhex("a8 0000 0101 0200 03190100 0410 0508 06190100 071a00278d00")


def test_default_is_fifo_with_the_documented_parameters() -> None:
    p = TimerPolicy()
    assert p.mode == MODE_FIFO
    assert (p.w_age, p.w_bid, p.max_fires_per_block, p.max_fires_per_target) == (1, 0, 256, 16)
    assert (p.max_watch_prefixes, p.max_watch_fires_per_block, p.max_interval_blocks) == (8, 256, 2_592_000)


def test_encoding_golden_bytes_and_state_key() -> None:
    assert TimerPolicy().encode() == DEFAULT_BYTES
    assert TimerPolicy.decode(DEFAULT_BYTES) == TimerPolicy()
    assert b"actor/" + bytes(19) + b"\x06/kv/system:timer_policy" == KEY_TIMER_POLICY


def test_absent_policy_reads_as_default_and_setter_round_trips() -> None:
    world = make_world()
    assert get_timer_policy(world) == TimerPolicy()
    p = TimerPolicy(mode=MODE_GLOBALBOX, max_fires_per_block=2)
    set_timer_policy(world, p)
    assert get_timer_policy(world) == p and world.get(KEY_TIMER_POLICY) == p.encode()


@pytest.mark.parametrize("bad", [TimerPolicy(mode=3), TimerPolicy(max_fires_per_block=0),
                                 TimerPolicy(max_fires_per_target=0), TimerPolicy(w_age=1 << 32)])
def test_out_of_range_policies_are_rejected(bad: TimerPolicy) -> None:
    with pytest.raises(DecodeError):
        set_timer_policy(make_world(), bad)


def test_decode_rejects_missing_fields() -> None:
    with pytest.raises(DecodeError):
        TimerPolicy.decode(bytes.fromhex("a1 0000"))


# -- UpdateTimerPolicy (0x44) ----------------------------------------------------------------------

def test_update_timer_policy_instruction_golden_bytes() -> None:
    from cowboy_protocol.types.instructions import UpdateTimerPolicy, instruction_from_cbor, instruction_to_cbor

    ins = UpdateTimerPolicy(TimerPolicy(mode=MODE_GLOBALBOX, max_fires_per_block=2))
    m = instruction_to_cbor(ins)
    from cowboy_protocol.codec import encode
    assert encode(m) == bytes.fromhex("a2 00 1844 01 a8 0001 0101 0200 0302 0410 0508 06190100 071a00278d00")
    assert instruction_from_cbor(m) == ins


def test_update_timer_policy_by_a_system_deployer_applies_and_others_are_refused() -> None:
    from cowboy_node.chain.chain import Chain
    from cowboy_node.execution.block import begin_block
    from cowboy_node.execution.context import BlockEnv
    from cowboy_node.execution.transactions import execute_transaction
    from cowboy_node.state.memory import MemoryStore
    from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS
    from cowboy_protocol.types.instructions import UpdateTimerPolicy
    from tests.helpers import ALICE_SK, BOB, BOB_SK, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx, transfer

    chain = Chain(MemoryStore(), make_dev_genesis().genesis)
    world = chain.world()
    ctx = begin_block(world, BlockEnv(chain_id=CHAIN_ID, height=5, timestamp_ms=1, fee_recipient=FEE_RECIPIENT,
                                      beacon=b"", parent_beacon=b""))
    assert execute_transaction(world, transfer(ALICE_SK, 0, BOB, 10**21), ctx).status == STATUS_SUCCESS
    new = TimerPolicy(mode=MODE_GLOBALBOX, w_bid=7)
    r_bob = execute_transaction(world, make_tx(BOB_SK, 0, UpdateTimerPolicy(new)), ctx)
    assert r_bob.status == STATUS_FAILED and r_bob.error_code == "unauthorized"
    assert get_timer_policy(world) == TimerPolicy()
    r = execute_transaction(world, make_tx(ALICE_SK, 1, UpdateTimerPolicy(new)), ctx)
    assert r.status == STATUS_SUCCESS, r
    assert get_timer_policy(world) == new
    assert [(e.topic, e.data) for e in r.events] == [("timer_policy.updated", new.encode())]
