"""Runner Registry executors and state (docs/runners.md; CIP-11 §7.1, §7.2, §8.5).

Every transaction goes through the production path (``execute_transaction``); state is read back with the
production read functions (``execution/runners/registry_state.py``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_node.execution import fees
from cowboy_node.execution.runners import registry
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import RUNNER_REGISTRY, get_account
from cowboy_node.types.account import account_key
from cowboy_node.types.presence import decode_presence
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.runner import Capabilities, Health, Rate, RateCard
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from tests.unit.eob_helpers import fund, make_ctx
from tests.unit.runner.test_runner_support import (
    CAPS,
    CARD,
    CFG,
    FUNDS,
    MIN_STAKE,
    SK_A,
    SK_B,
    SK_C,
    SK_D,
    UNBONDING,
    A,
    B,
    C,
    D,
    register,
    registry_world,
    run,
)


def _ok(receipt: object) -> None:
    assert getattr(receipt, "status") == STATUS_SUCCESS, getattr(receipt, "error_code")  # noqa: B009


# -- CIP-11 §7.2 index basis -------------------------------------------------------------------------

def test_active_runner_array_is_the_presence_index_basis() -> None:
    world = registry_world()
    for h, sk in enumerate((SK_A, SK_B, SK_C), start=1):
        _ok(register(world, sk, h))
    assert store.active_runner_addresses(world) == [A, B, C]
    array_bytes = world.get(store.ACTIVE_RUNNERS_KEY)

    # B unhealthy (dispatcher), C stale (no heartbeat for far longer than the timeout), A paused:
    # none of it rewrites the list.
    store.mark_unhealthy(world, B)
    _ok(run(world, SK_A, RunnerHeartbeat(accepting=False), 500))
    assert world.get(store.ACTIVE_RUNNERS_KEY) == array_bytes
    assert store.active_runner_addresses(world) == [A, B, C]
    recs = store.runners_in_index_order(world)
    assert [(r.index, r.address, r.health) for r in recs] == [
        (0, A, Health.PAUSED), (1, B, Health.UNHEALTHY), (2, C, Health.HEALTHY)]
    # The PresenceInput domain is the array: index 2 is valid, 3 is not.
    assert store.registry_size(world) == 3
    assert decode_presence(bytes([0x01, 0x01]) + (1).to_bytes(4, "big") + (2).to_bytes(4, "big"), 3) == {2}
    with pytest.raises(Exception):  # noqa: B017 - any rejection: index 3 is outside |registry| = 3
        decode_presence(bytes([0x01, 0x01]) + (1).to_bytes(4, "big") + (3).to_bytes(4, "big"), 3)

    _ok(register(world, SK_D, 501))
    assert store.active_runner_addresses(world) == [A, B, C, D]
    d = store.get_runner(world, D)
    assert d is not None and d.index == 3
    assert store.registry_size(world) == 4


def test_re_registration_after_deregistration_keeps_the_index_and_reputation() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    _ok(register(world, SK_B, 1))
    store.adjust_reputation(world, A, -7_000_000_000, CFG)
    _ok(run(world, SK_A, RunnerDeregister(), 2))
    registry.release_unbonded(world, make_ctx(2 + UNBONDING))
    _ok(register(world, SK_A, 20, stake=MIN_STAKE + 5))
    a = store.get_runner(world, A)
    assert a is not None and a.index == 0 and a.health == Health.HEALTHY and a.stake == MIN_STAKE + 5
    assert a.reputation_x1e9 == CFG.initial_reputation_x1e9 - 7_000_000_000
    assert (a.registered_at, a.last_heartbeat, a.unbonding_until) == (20, 20, 0)
    assert store.active_runner_addresses(world) == [A, B]


# -- registration --------------------------------------------------------------------------------------

def test_registration_bonds_the_stake_and_creates_a_healthy_record() -> None:
    world = registry_world()
    r = register(world, SK_A, 7, stake=MIN_STAKE * 3)
    _ok(r)
    assert get_account(world, A).balance == FUNDS - MIN_STAKE * 3 - r.fee_paid
    assert get_account(world, RUNNER_REGISTRY).balance == MIN_STAKE * 3
    rec = store.get_runner(world, A)
    assert rec is not None
    assert (rec.address, rec.index, rec.stake, rec.capabilities, rec.rate_card, rec.health) == (
        A, 0, MIN_STAKE * 3, CAPS, CARD, Health.HEALTHY)
    assert (rec.registered_at, rec.last_heartbeat, rec.reputation_x1e9, rec.active_jobs, rec.unbonding_until) == (
        7, 7, CFG.initial_reputation_x1e9, 0, 0)
    [event] = r.events
    assert (event.emitter, event.topic) == (RUNNER_REGISTRY, "runner.registered")
    assert decode(event.data) == {0: A, 1: 0, 2: (MIN_STAKE * 3).to_bytes(16, "big")}


def test_registration_charges_cycles_and_the_cells_it_writes() -> None:
    from cowboy_node.execution.transactions import ACCOUNT_WRITE_CELLS, execute_transaction
    from tests.helpers import make_tx

    world = registry_world()
    _ok(register(world, SK_A, 1))
    tx = make_tx(SK_B, 0, RunnerRegister(stake=MIN_STAKE, capabilities=CAPS, rate_card=CARD), chain_id="t",
                 cycles_limit=100_000, cells_limit=5_000)
    r = execute_transaction(world, tx, make_ctx(2))
    _ok(r)
    rec = store.get_runner(world, B)
    assert rec is not None
    # one existing entry in the array when B is appended
    assert r.cycles_used == fees.TX_BASE_CYCLES + registry.RUNNER_TX_CYCLES + registry.ARRAY_CYCLES_PER_ENTRY * 1
    intrinsic = len(tx.body()) + ACCOUNT_WRITE_CELLS
    record_cells = len(store.record_key(B)) + len(rec.encode())
    array_cells = len(store.ACTIVE_RUNNERS_KEY) + 21  # one more 20-byte string (1-byte head) in the array
    sender_cells = len(account_key(B)) + len(get_account(world, B).encode())
    registry_cells = len(account_key(RUNNER_REGISTRY)) + len(get_account(world, RUNNER_REGISTRY).encode())
    assert r.cells_used == intrinsic + record_cells + array_cells + sender_cells + registry_cells


def test_stake_below_the_minimum_fails_with_runner_stake_too_low() -> None:
    world = registry_world()
    r = register(world, SK_A, 1, stake=MIN_STAKE - 1)
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_stake_too_low")
    _ok(register(world, SK_A, 1, stake=MIN_STAKE))  # exactly the minimum is enough


def test_registering_twice_fails_with_runner_already_registered() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    r = register(world, SK_A, 2)
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_already_registered")


def test_registering_while_the_stake_is_unbonding_fails_with_runner_already_registered() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    _ok(run(world, SK_A, RunnerDeregister(), 2))
    r = register(world, SK_A, 3)
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_already_registered")


def test_a_full_registry_fails_with_runner_registry_full_but_a_returning_address_fits() -> None:
    world = registry_world(replace(CFG, max_active_runners=2))
    _ok(register(world, SK_A, 1))
    _ok(register(world, SK_B, 1))
    r = register(world, SK_C, 2)
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_registry_full")
    _ok(run(world, SK_A, RunnerDeregister(), 2))
    registry.release_unbonded(world, make_ctx(2 + UNBONDING))
    _ok(register(world, SK_A, 30))  # A keeps index 0: the array does not grow


def test_balance_must_cover_the_stake_on_top_of_the_maximum_fee() -> None:
    from tests.helpers import make_tx
    from tests.unit.runner.test_runner_support import CELLS_LIMIT, CYCLES_LIMIT

    world = registry_world()
    max_fee = make_tx(SK_A, 0, RunnerDeregister(), chain_id="t", cycles_limit=CYCLES_LIMIT,
                      cells_limit=CELLS_LIMIT).max_fee()
    fund(world, A, MIN_STAKE + max_fee - 1)
    r = register(world, SK_A, 1)
    assert (r.status, r.error_code) == (STATUS_FAILED, "insufficient_balance")
    fund(world, B, MIN_STAKE + max_fee)
    _ok(register(world, SK_B, 1))


@pytest.mark.parametrize("case", ["too_low", "already", "full", "balance"])
def test_a_failed_registration_changes_nothing_but_the_fee_and_nonce(case: str) -> None:
    world = registry_world(replace(CFG, max_active_runners=1))
    _ok(register(world, SK_A, 1))
    sk, who, stake = {"too_low": (SK_B, B, MIN_STAKE - 1), "already": (SK_A, A, MIN_STAKE),
                      "full": (SK_B, B, MIN_STAKE), "balance": (SK_B, B, FUNDS)}[case]
    before = dict(world.changes())
    before_acct = get_account(world, who)
    r = register(world, sk, 2, stake=stake)
    assert r.status == STATUS_FAILED and r.events == ()
    after = world.changes()
    changed = sorted(k for k in after if before.get(k, b"?") != after[k])
    assert changed == [account_key(who)]  # only the fee and the nonce
    acct = get_account(world, who)
    assert (acct.balance, acct.nonce) == (before_acct.balance - r.fee_paid, before_acct.nonce + 1)
    assert store.active_runner_addresses(world) == [A]
    assert get_account(world, RUNNER_REGISTRY).balance == MIN_STAKE


# -- heartbeat and updates ---------------------------------------------------------------------------------

def test_heartbeat_sets_last_heartbeat_and_health() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    r = run(world, SK_A, RunnerHeartbeat(accepting=False), 5)
    _ok(r)
    rec = store.get_runner(world, A)
    assert rec is not None and (rec.health, rec.last_heartbeat) == (Health.PAUSED, 5)
    assert [(e.topic, decode(e.data)) for e in r.events] == [("runner.heartbeat", {0: A, 1: False})]
    _ok(run(world, SK_A, RunnerHeartbeat(accepting=True), 6))
    rec = store.get_runner(world, A)
    assert rec is not None and (rec.health, rec.last_heartbeat) == (Health.HEALTHY, 6)


def test_heartbeat_lifts_unhealthy() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    store.mark_unhealthy(world, A)
    _ok(run(world, SK_A, RunnerHeartbeat(accepting=True), 9))
    rec = store.get_runner(world, A)
    assert rec is not None and (rec.health, rec.last_heartbeat) == (Health.HEALTHY, 9)


def test_updates_replace_capabilities_and_rate_card() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    caps = Capabilities(job_kinds=(0, 1), regions=(), http_domains=("*",), max_concurrent_jobs=9)
    card = RateCard(((0, Rate(5, 6)), (1, Rate(7, 8))))
    r1 = run(world, SK_A, RunnerUpdateCapabilities(caps), 2)
    r2 = run(world, SK_A, RunnerUpdateRateCard(card), 3)
    _ok(r1)
    _ok(r2)
    rec = store.get_runner(world, A)
    assert rec is not None and (rec.capabilities, rec.rate_card) == (caps, card)
    assert [e.topic for e in r1.events + r2.events] == ["runner.capabilities_updated", "runner.rate_card_updated"]
    assert decode(r1.events[0].data) == {0: A, 1: caps.to_cbor()}


@pytest.mark.parametrize("ins", [RunnerHeartbeat(True), RunnerUpdateCapabilities(CAPS), RunnerUpdateRateCard(CARD),
                                 RunnerDeregister()], ids=["heartbeat", "caps", "rate_card", "deregister"])
def test_unregistered_sender_fails_with_runner_not_registered(ins: object) -> None:
    world = registry_world()
    r = run(world, SK_A, ins, 1)  # type: ignore[arg-type]
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_not_registered")


@pytest.mark.parametrize("ins", [RunnerHeartbeat(True), RunnerUpdateCapabilities(CAPS), RunnerUpdateRateCard(CARD),
                                 RunnerDeregister()], ids=["heartbeat", "caps", "rate_card", "deregister"])
def test_deregistered_sender_fails_with_runner_deregistered(ins: object) -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    _ok(run(world, SK_A, RunnerDeregister(), 2))
    r = run(world, SK_A, ins, 3)  # type: ignore[arg-type]
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_deregistered")
    rec = store.get_runner(world, A)
    assert rec is not None and rec.health == Health.DEREGISTERED and rec.unbonding_until == 2 + UNBONDING


# -- deregistration --------------------------------------------------------------------------------------

def test_deregister_with_active_jobs_fails_with_runner_has_active_jobs() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    store.adjust_active_jobs(world, A, 1)
    r = run(world, SK_A, RunnerDeregister(), 2)
    assert (r.status, r.error_code) == (STATUS_FAILED, "runner_has_active_jobs")
    store.adjust_active_jobs(world, A, -1)
    _ok(run(world, SK_A, RunnerDeregister(), 3))


def test_deregister_marks_the_record_and_adds_the_unbonding_entry() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    _ok(register(world, SK_B, 1))
    array = world.get(store.ACTIVE_RUNNERS_KEY)
    r = run(world, SK_A, RunnerDeregister(), 4)
    _ok(r)
    rec = store.get_runner(world, A)
    assert rec is not None and (rec.health, rec.unbonding_until, rec.stake) == (
        Health.DEREGISTERED, 4 + UNBONDING, MIN_STAKE)
    assert [k for k, _ in world.iterate(store.UNBOND_PREFIX)] == [
        store.UNBOND_PREFIX + (4 + UNBONDING).to_bytes(8, "big") + A]
    assert world.get(store.ACTIVE_RUNNERS_KEY) == array  # the index basis is untouched
    assert [(e.topic, decode(e.data)) for e in r.events] == [("runner.deregistered", {0: A, 1: 4 + UNBONDING})]


def test_stake_comes_back_after_exactly_unbonding_blocks_and_only_once() -> None:
    from cowboy_node.execution.eob.system_hooks import system_hooks

    world = registry_world()
    _ok(register(world, SK_A, 1, stake=MIN_STAKE * 2))
    _ok(run(world, SK_A, RunnerDeregister(), 5))
    bal = get_account(world, A).balance
    ctx = make_ctx(5 + UNBONDING - 1)
    system_hooks(world, ctx)  # one block early: nothing
    assert get_account(world, A).balance == bal and ctx.events == []
    assert get_account(world, RUNNER_REGISTRY).balance == MIN_STAKE * 2
    ctx = make_ctx(5 + UNBONDING)
    system_hooks(world, ctx)
    assert get_account(world, A).balance == bal + MIN_STAKE * 2
    assert get_account(world, RUNNER_REGISTRY).balance == 0
    rec = store.get_runner(world, A)
    assert rec is not None and (rec.stake, rec.unbonding_until, rec.health) == (0, 0, Health.DEREGISTERED)
    assert list(world.iterate(store.UNBOND_PREFIX)) == []
    [event] = ctx.events
    assert (event.emitter, event.topic, decode(event.data)) == (  # type: ignore[attr-defined]
        RUNNER_REGISTRY, "runner.unbonded", {0: A, 1: (MIN_STAKE * 2).to_bytes(16, "big")})
    for h in (5 + UNBONDING, 5 + UNBONDING + 1, 5 + UNBONDING + 100):
        later = make_ctx(h)
        system_hooks(world, later)
        assert later.events == []
    assert get_account(world, A).balance == bal + MIN_STAKE * 2


def test_release_scans_in_height_order_and_stops_at_the_first_later_entry() -> None:
    world = registry_world()
    for sk in (SK_A, SK_B, SK_C):
        _ok(register(world, sk, 1))
    _ok(run(world, SK_C, RunnerDeregister(), 2))   # due 12
    _ok(run(world, SK_A, RunnerDeregister(), 3))   # due 13
    _ok(run(world, SK_B, RunnerDeregister(), 9))   # due 19
    ctx = make_ctx(13)
    assert registry.release_unbonded(world, ctx) == 2
    assert [decode(e.data)[0] for e in ctx.events] == [C, A]  # type: ignore[attr-defined, index]
    rec_b = store.get_runner(world, B)
    assert rec_b is not None and rec_b.stake == MIN_STAKE and rec_b.unbonding_until == 19


# -- dispatcher helpers ----------------------------------------------------------------------------------

def test_adjust_reputation_clamps_to_zero_and_the_maximum() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    store.adjust_reputation(world, A, 10**15, CFG)
    rec = store.get_runner(world, A)
    assert rec is not None and rec.reputation_x1e9 == CFG.max_reputation_x1e9
    store.adjust_reputation(world, A, -(10**15), CFG)
    rec = store.get_runner(world, A)
    assert rec is not None and rec.reputation_x1e9 == 0


def test_adjust_active_jobs_counts_and_refuses_to_go_negative() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    assert store.adjust_active_jobs(world, A, 2) > 0
    rec = store.get_runner(world, A)
    assert rec is not None and rec.active_jobs == 2
    with pytest.raises(ValueError):
        store.adjust_active_jobs(world, A, -3)
    with pytest.raises(LookupError):
        store.adjust_active_jobs(world, B, 1)


def test_mark_unhealthy_leaves_a_deregistered_runner_deregistered() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    _ok(run(world, SK_A, RunnerDeregister(), 2))
    assert store.mark_unhealthy(world, A) == 0
    rec = store.get_runner(world, A)
    assert rec is not None and rec.health == Health.DEREGISTERED


def test_slash_stake_removes_the_share_from_stake_and_registry_balance() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1, stake=12_345))
    assert store.slash_stake(world, A, 100) == 1_234  # 10%, rounded down
    rec = store.get_runner(world, A)
    assert rec is not None and rec.stake == 12_345 - 1_234
    assert get_account(world, RUNNER_REGISTRY).balance == 12_345 - 1_234
    with pytest.raises(ValueError):
        store.slash_stake(world, A, 1_001)


def test_put_runner_returns_the_bytes_written() -> None:
    world = registry_world()
    _ok(register(world, SK_A, 1))
    rec = store.get_runner(world, A)
    assert rec is not None
    assert store.put_runner(world, rec) == len(store.record_key(A)) + len(rec.encode())


def test_state_keys_live_under_the_registry_namespace() -> None:
    ns = b"actor/" + bytes(19) + b"\x01" + b"/kv/"
    assert ns + b"active_runners" == store.ACTIVE_RUNNERS_KEY
    assert store.record_key(A) == b"actor/" + bytes(19) + b"\x01" + b"/kv/runner/" + A
    assert store.unbond_key(258, A) == b"actor/" + bytes(19) + b"\x01" + b"/kv/unbond/" + bytes.fromhex(
        "0000000000000102") + A
    # The array value is a plain CBOR array of 20-byte strings, in append order.
    world = registry_world()
    _ok(register(world, SK_B, 1))
    _ok(register(world, SK_A, 1))
    assert world.get(store.ACTIVE_RUNNERS_KEY) == bytes.fromhex("82" "54") + B + b"\x54" + A
    assert encode([B, A]) == world.get(store.ACTIVE_RUNNERS_KEY)
