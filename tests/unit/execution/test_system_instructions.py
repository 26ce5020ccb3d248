"""Governed timer system instructions (seeds/003 §5.4, §6.4) executed through ``execute_transaction``.

UpdateTimerConfig (0x41), CancelTimer (0x42) and ExtendTimer (0x43) are only for senders in
``system_deployers`` (ALICE in the test genesis). Anyone else gets a failed, charged receipt
``unauthorized`` and nothing else changes. Timers are created directly with
``timers.schedule.schedule_timer`` on the same WorldState.
"""

from __future__ import annotations

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.fees import SYSTEM_INSTRUCTION_CYCLES, TX_BASE_CYCLES
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import (
    apply_staged_timer_config,
    get_account,
    get_timer_config,
    set_timer_config,
)
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.schedule import schedule_timer
from cowboy_node.execution.transactions import ACCOUNT_WRITE_CELLS, execute_transaction
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import account_key
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Event, Receipt
from cowboy_protocol.types.instructions import CancelTimer, ExtendTimer, Instruction, UpdateTimerConfig
from cowboy_protocol.types.params import TimerConfig
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx, transfer

NOW = 100
TIMER_ACTOR = bytes([0x5A]) * 20  # an ordinary actor, neither ALICE nor BOB
SYSTEM_06 = bytes(19) + b"\x06"   # the Basefee system actor: emitter of governance events
# Hand-written state key: "actor/" ‖ 0x00×19 06 ‖ "/kv/system:timer_config" (docs/protocol.md §4).
TIMER_CONFIG_KEY = b"actor/" + bytes(19) + b"\x06" + b"/kv/system:timer_config"
NEW_CONFIG = TimerConfig(max_ttl_blocks=100, max_cycles_per_fire=1_000, max_cells_per_fire=2_000,
                         max_timers_per_actor=3, gc_cycles_per_block=50_000)
NEW_CONFIG_CBOR = bytes.fromhex(
    "a5" "00" "1864" "01" "1903e8" "02" "1907d0" "03" "03" "04" "19c350")


class Env:
    """A world at height NOW with ALICE (system deployer) funded and BOB funded by ALICE."""

    def __init__(self, chain: Chain) -> None:
        self.world = chain.world()
        self.ctx: BlockContext = begin_block(self.world, BlockEnv(
            chain_id=CHAIN_ID, height=NOW, timestamp_ms=1, fee_recipient=FEE_RECIPIENT, beacon=b"",
            parent_beacon=b""))
        self.nonces = {ALICE_SK: 0, BOB_SK: 0}
        r = execute_transaction(self.world, transfer(ALICE_SK, 0, BOB, 10**21), self.ctx)
        assert r.status == STATUS_SUCCESS
        self.nonces[ALICE_SK] = 1

    def run(self, sk: bytes, ins: Instruction) -> Receipt:
        tx = make_tx(sk, self.nonces[sk], ins)
        self.nonces[sk] += 1
        return execute_transaction(self.world, tx, self.ctx)

    def schedule(self, *, height: int = NOW + 10, expires_at: int | None = None, payload: bytes = b"p") -> bytes:
        return schedule_timer(self.world, self.ctx, Meter(10**9, 10**9), actor=TIMER_ACTOR, tx_sender=TIMER_ACTOR,
                              height=height, handler="handle_timer", payload=payload, expires_at=expires_at)


@pytest.fixture
def env(chain: Chain) -> Env:
    return Env(chain)


def _changed_keys(before: dict[bytes, bytes | None], world: WorldState) -> set[bytes]:
    after = world.changes()
    return {k for k in after.keys() | before.keys() if before.get(k) != after.get(k)}


def _assert_only_fee_charged(env: Env, sk: bytes, sender: bytes, receipt: Receipt,
                             before: dict[bytes, bytes | None], balance_before: int) -> None:
    assert receipt.status == STATUS_FAILED and receipt.events == ()
    assert receipt.fee_paid > 0
    assert get_account(env.world, sender).balance == balance_before - receipt.fee_paid
    # The failed instruction wrote nothing: only the sender's account (fee, nonce) changed.
    assert _changed_keys(before, env.world) == {account_key(sender)}


# -- UpdateTimerConfig ---------------------------------------------------------------------------
def test_update_timer_config_by_a_system_deployer_replaces_it_from_the_next_block_and_emits_the_event(
        env: Env) -> None:
    tx = make_tx(ALICE_SK, 1, UpdateTimerConfig(NEW_CONFIG))
    r = execute_transaction(env.world, tx, env.ctx)
    assert r.status == STATUS_SUCCESS and r.error_code is None
    # seeds/003 §7 "TimerConfig is read once per block …; mid-block changes do not apply": staged, not applied.
    assert get_timer_config(env.world) == TimerConfig()
    assert env.world.get(TIMER_CONFIG_KEY) != NEW_CONFIG_CBOR
    apply_staged_timer_config(env.world)  # the end of the block (execution.block._finish)
    assert get_timer_config(env.world) == NEW_CONFIG
    assert env.world.get(TIMER_CONFIG_KEY) == NEW_CONFIG_CBOR
    assert r.events == (Event(SYSTEM_06, "timer_config.updated", NEW_CONFIG_CBOR),)
    # Charged: intrinsic + the system instruction's cycles; cells: intrinsic + the config bytes written.
    assert r.cycles_used == TX_BASE_CYCLES + SYSTEM_INSTRUCTION_CYCLES
    assert r.cells_used == len(tx.body()) + ACCOUNT_WRITE_CELLS + len(NEW_CONFIG_CBOR)


def test_new_timer_config_applies_to_host_calls_from_the_next_block_only(env: Env) -> None:
    assert env.run(ALICE_SK, UpdateTimerConfig(NEW_CONFIG)).status == STATUS_SUCCESS
    # Later in the same block the block-start config still holds (a gas limit the new config refuses is fine).
    schedule_timer(env.world, env.ctx, Meter(10**9, 10**9), actor=TIMER_ACTOR, tx_sender=TIMER_ACTOR,
                   height=NOW + 1, handler="h", payload=b"", gas_limit=1_001)
    apply_staged_timer_config(env.world)  # end of block: from the next block on, the new config applies
    with pytest.raises(TxFailed) as e:
        schedule_timer(env.world, env.ctx, Meter(10**9, 10**9), actor=TIMER_ACTOR, tx_sender=TIMER_ACTOR,
                       height=NOW + 1, handler="h", payload=b"", gas_limit=1_001)
    assert e.value.code == "timer_gas_limit_too_high"


def test_update_timer_config_by_anyone_else_is_unauthorized_and_charged(env: Env) -> None:
    before, balance = env.world.changes(), get_account(env.world, BOB).balance
    r = env.run(BOB_SK, UpdateTimerConfig(NEW_CONFIG))
    assert r.error_code == "unauthorized"
    assert get_timer_config(env.world) == TimerConfig()
    _assert_only_fee_charged(env, BOB_SK, BOB, r, before, balance)
    assert get_account(env.world, BOB).nonce == 1


def test_invalid_timer_config_fails_with_invalid_config_and_changes_nothing(env: Env) -> None:
    bad = TimerConfig(max_timers_per_actor=2**32)  # must fit u32
    before, balance = env.world.changes(), get_account(env.world, ALICE).balance
    r = env.run(ALICE_SK, UpdateTimerConfig(bad))
    assert r.error_code == "invalid_config"
    assert get_timer_config(env.world) == TimerConfig()
    _assert_only_fee_charged(env, ALICE_SK, ALICE, r, before, balance)


def test_u32_cap_itself_is_a_valid_config(env: Env) -> None:
    edge = TimerConfig(max_timers_per_actor=2**32 - 1)
    assert env.run(ALICE_SK, UpdateTimerConfig(edge)).status == STATUS_SUCCESS
    apply_staged_timer_config(env.world)  # from the next block
    assert get_timer_config(env.world) == edge


# -- CancelTimer ---------------------------------------------------------------------------------
def _cancel_event(timer_id: bytes, removed: bool) -> Event:
    # {0: timer_id, 1: removed}: a2 00 58 20 <id> 01 f5|f4
    return Event(SYSTEM_06, "timer.cancelled_by_governance",
                 bytes.fromhex("a2" "00" "5820") + timer_id + bytes.fromhex("01" + ("f5" if removed else "f4")))


def test_cancel_timer_removes_another_actors_timer_and_is_idempotent(env: Env) -> None:
    timer_id = env.schedule()
    keep = env.schedule(payload=b"other")
    assert store.get_meta(env.world, TIMER_ACTOR).live == 2
    r1 = env.run(ALICE_SK, CancelTimer(timer_id))
    assert r1.status == STATUS_SUCCESS
    assert r1.events == (_cancel_event(timer_id, True),)
    assert store.get_timer(env.world, timer_id) is None
    assert store.actor_timers(env.world, TIMER_ACTOR) == [(keep, NOW + 10)]
    assert store.timers_at(env.world, NOW + 10) == [keep]
    assert store.get_meta(env.world, TIMER_ACTOR).live == 1
    # Second cancel of the same id: success, reports removed = false, touches no timer state.
    before = env.world.changes()
    r2 = env.run(ALICE_SK, CancelTimer(timer_id))
    assert r2.status == STATUS_SUCCESS and r2.error_code is None
    assert r2.events == (_cancel_event(timer_id, False),)
    assert _changed_keys(before, env.world) == {account_key(ALICE)}


def test_cancel_timer_by_a_non_deployer_is_unauthorized_and_keeps_the_timer(env: Env) -> None:
    timer_id = env.schedule()
    before, balance = env.world.changes(), get_account(env.world, BOB).balance
    r = env.run(BOB_SK, CancelTimer(timer_id))
    assert r.error_code == "unauthorized"
    assert store.get_timer(env.world, timer_id) is not None
    _assert_only_fee_charged(env, BOB_SK, BOB, r, before, balance)


# -- ExtendTimer ---------------------------------------------------------------------------------
def _extend_event(timer_id: bytes, result_hex: str) -> Event:
    # {0: timer_id, 1: resulting expires_at | null}
    return Event(SYSTEM_06, "timer.extended_by_governance",
                 bytes.fromhex("a2" "00" "5820") + timer_id + bytes.fromhex("01" + result_hex))


def _expires(env: Env, timer_id: bytes) -> int:
    timer = store.get_timer(env.world, timer_id)
    assert timer is not None
    return timer.expires_at


def test_extend_timer_clamps_to_current_plus_max_ttl(env: Env) -> None:
    set_timer_config(env.world, TimerConfig(max_ttl_blocks=100))
    timer_id = env.schedule(expires_at=NOW + 10)
    r = env.run(ALICE_SK, ExtendTimer(timer_id, NOW + 1_000))
    assert r.status == STATUS_SUCCESS
    assert _expires(env, timer_id) == NOW + 100           # 200, not 1_100
    assert r.events == (_extend_event(timer_id, "18c8"),)  # uint 200


def test_extend_timer_never_shortens_and_reports_the_kept_expiry(env: Env) -> None:
    timer_id = env.schedule(expires_at=NOW + 50)
    r = env.run(ALICE_SK, ExtendTimer(timer_id, NOW + 20))
    assert r.status == STATUS_SUCCESS
    assert _expires(env, timer_id) == NOW + 50
    assert r.events == (_extend_event(timer_id, "1896"),)  # uint 150
    # and a real extension raises it
    r = env.run(ALICE_SK, ExtendTimer(timer_id, NOW + 60))
    assert _expires(env, timer_id) == NOW + 60
    assert r.events == (_extend_event(timer_id, "18a0"),)  # uint 160


def test_extend_of_a_missing_timer_is_a_no_op(env: Env) -> None:
    missing = b"\x77" * 32
    before = env.world.changes()
    r = env.run(ALICE_SK, ExtendTimer(missing, NOW + 5))
    assert r.status == STATUS_SUCCESS
    assert r.events == (_extend_event(missing, "f6"),)
    assert store.get_timer(env.world, missing) is None
    assert _changed_keys(before, env.world) == {account_key(ALICE)}


@pytest.mark.parametrize("new_expires_at", [NOW, NOW - 1, 0])
def test_extend_to_a_height_not_above_the_current_one_fails(env: Env, new_expires_at: int) -> None:
    timer_id = env.schedule(expires_at=NOW + 50)
    before, balance = env.world.changes(), get_account(env.world, ALICE).balance
    r = env.run(ALICE_SK, ExtendTimer(timer_id, new_expires_at))
    assert r.error_code == "timer_expiry_not_future"
    assert _expires(env, timer_id) == NOW + 50
    _assert_only_fee_charged(env, ALICE_SK, ALICE, r, before, balance)


def test_extend_timer_by_a_non_deployer_is_unauthorized(env: Env) -> None:
    timer_id = env.schedule(expires_at=NOW + 50)
    before, balance = env.world.changes(), get_account(env.world, BOB).balance
    r = env.run(BOB_SK, ExtendTimer(timer_id, NOW + 90))
    assert r.error_code == "unauthorized"
    assert _expires(env, timer_id) == NOW + 50
    _assert_only_fee_charged(env, BOB_SK, BOB, r, before, balance)


def test_a_blocks_update_timer_config_is_the_config_of_the_next_block() -> None:
    """Through real blocks (producer and verifying follower): the config staged by block h's UpdateTimerConfig
    is the governed one in block h's committed state, i.e. from block h + 1 on, and both agree on the root."""
    from tests.unit.execution.jobs import test_jobs_e2e as e2e

    net = e2e.Net(make_dev_genesis())
    net.block([net.tx(ALICE_SK, UpdateTimerConfig(NEW_CONFIG))])
    world = net.chain.world()
    assert get_timer_config(world) == NEW_CONFIG
    assert world.get(TIMER_CONFIG_KEY) == NEW_CONFIG_CBOR
    assert world.get(TIMER_CONFIG_KEY + b"_next") is None  # nothing left staged
