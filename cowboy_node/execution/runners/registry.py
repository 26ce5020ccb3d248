"""Runner Registry executors (instructions 0x20..0x24) and the End-of-Block stake release.

Every executor charges :data:`RUNNER_TX_CYCLES` plus the cells of what it writes, acts on the
registration of ``tx.sender`` and appends one event emitted by the Runner Registry (0x…01).
Failures raise :class:`TxFailed` with a stable code (the transaction is reverted and still charged):

- ``runner_stake_too_low``: RunnerRegister stake below ``RunnerConfig.min_runner_stake``;
- ``runner_already_registered``: a registration exists that is not deregistered with its stake returned;
- ``runner_registry_full``: the active-runner array already holds ``max_active_runners`` addresses;
- ``insufficient_balance``: the balance minus the reserved maximum fee does not cover the stake;
- ``runner_not_registered``: heartbeat / update / deregister without a registration;
- ``runner_deregistered``: heartbeat / update / deregister after RunnerDeregister;
- ``runner_has_active_jobs``: RunnerDeregister while jobs are assigned to the runner.
"""

from __future__ import annotations

from dataclasses import replace

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import RUNNER_REGISTRY, get_account, get_runner_config, put_account
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import U128_MAX, encode_u128
from cowboy_protocol.types.runner import Health, RunnerRecord
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from cowboy_protocol.types.transaction import Transaction

RUNNER_TX_CYCLES = 5_000
"""Cycles of every runner instruction (record read, checks, record write)."""
ARRAY_CYCLES_PER_ENTRY = 2
"""Cycles per existing entry when a new address is appended (the array is decoded and re-encoded)."""

E_STAKE_TOO_LOW = "runner_stake_too_low"
E_ALREADY_REGISTERED = "runner_already_registered"
E_REGISTRY_FULL = "runner_registry_full"
E_INSUFFICIENT_BALANCE = "insufficient_balance"
E_NOT_REGISTERED = "runner_not_registered"
E_DEREGISTERED = "runner_deregistered"
E_HAS_ACTIVE_JOBS = "runner_has_active_jobs"
E_BALANCE_OVERFLOW = "balance_overflow"

TOPIC_REGISTERED = "runner.registered"
"""Data ``{0: address, 1: index, 2: stake u128}``."""
TOPIC_HEARTBEAT = "runner.heartbeat"
"""Data ``{0: address, 1: accepting}``."""
TOPIC_CAPABILITIES_UPDATED = "runner.capabilities_updated"
"""Data ``{0: address, 1: capabilities map}``."""
TOPIC_RATE_CARD_UPDATED = "runner.rate_card_updated"
"""Data ``{0: address, 1: rate card map}``."""
TOPIC_DEREGISTERED = "runner.deregistered"
"""Data ``{0: address, 1: unbonding_until}``."""
TOPIC_UNBONDED = "runner.unbonded"
"""Data ``{0: address, 1: amount returned u128}`` (End of Block)."""


def _emit(events: list[Event], topic: str, data: dict[int, object]) -> None:
    events.append(Event(RUNNER_REGISTRY, topic, encode(data)))


def register(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
    """RunnerRegister (0x20): bond the stake, create the record (new address: append to the array)."""
    ins = tx.instruction
    assert isinstance(ins, RunnerRegister)
    meter.charge_cycles(RUNNER_TX_CYCLES)
    cfg = get_runner_config(world)
    sender = tx.sender
    if ins.stake < cfg.min_runner_stake:
        raise TxFailed(E_STAKE_TOO_LOW, f"stake {ins.stake} is below the minimum {cfg.min_runner_stake}")
    existing = store.get_runner(world, sender)
    if existing is not None and not (existing.health == Health.DEREGISTERED and existing.unbonding_until == 0):
        raise TxFailed(E_ALREADY_REGISTERED, "the sender is registered (or its stake is still unbonding)")
    if existing is None:
        size = store.registry_size(world)
        meter.charge_cycles(ARRAY_CYCLES_PER_ENTRY * size)
        if size >= cfg.max_active_runners:
            raise TxFailed(E_REGISTRY_FULL, f"the registry holds its maximum of {cfg.max_active_runners} runners")
    account = get_account(world, sender)
    # The maximum fee stays reserved, as for a transfer: the fee is settled after the instruction runs.
    if account.balance - tx.max_fee() < ins.stake:
        raise TxFailed(E_INSUFFICIENT_BALANCE, "balance does not cover the stake plus the maximum fee")
    meter.charge_cells(put_account(world, sender, Account(account.balance - ins.stake, account.nonce)))
    registry = get_account(world, RUNNER_REGISTRY)
    if registry.balance + ins.stake > U128_MAX:
        raise TxFailed(E_BALANCE_OVERFLOW, "runner registry balance would exceed u128")
    meter.charge_cells(put_account(world, RUNNER_REGISTRY, Account(registry.balance + ins.stake, registry.nonce)))
    if existing is None:
        index, added = store.append_active_runner(world, sender)
        meter.charge_cells(len(store.ACTIVE_RUNNERS_KEY) + added)
        reputation, active_jobs = cfg.initial_reputation_x1e9, 0
    else:
        # A returning address keeps its index (CIP-11 §7.2) and its reputation (no reset by re-registering).
        index, reputation, active_jobs = existing.index, existing.reputation_x1e9, existing.active_jobs
    height = ctx.env.height
    rec = RunnerRecord(address=sender, index=index, stake=ins.stake, capabilities=ins.capabilities,
                       rate_card=ins.rate_card, health=Health.HEALTHY, registered_at=height, last_heartbeat=height,
                       reputation_x1e9=reputation, active_jobs=active_jobs, unbonding_until=0)
    meter.charge_cells(store.put_runner(world, rec))
    _emit(events, TOPIC_REGISTERED, {0: sender, 1: index, 2: encode_u128(ins.stake)})


def _registered(world: WorldState, tx: Transaction, meter: Meter) -> RunnerRecord:
    meter.charge_cycles(RUNNER_TX_CYCLES)
    rec = store.get_runner(world, tx.sender)
    if rec is None:
        raise TxFailed(E_NOT_REGISTERED, "the sender is not a registered runner")
    if rec.health == Health.DEREGISTERED:
        raise TxFailed(E_DEREGISTERED, "the sender has deregistered")
    return rec


def heartbeat(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
    """RunnerHeartbeat (0x21): last_heartbeat = height; HEALTHY if accepting else PAUSED (lifts UNHEALTHY)."""
    ins = tx.instruction
    assert isinstance(ins, RunnerHeartbeat)
    rec = _registered(world, tx, meter)
    health = Health.HEALTHY if ins.accepting else Health.PAUSED
    meter.charge_cells(store.put_runner(world, replace(rec, last_heartbeat=ctx.env.height, health=health)))
    _emit(events, TOPIC_HEARTBEAT, {0: tx.sender, 1: ins.accepting})


def update_capabilities(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                        events: list[Event]) -> None:
    """RunnerUpdateCapabilities (0x22): replace the capabilities."""
    ins = tx.instruction
    assert isinstance(ins, RunnerUpdateCapabilities)
    rec = _registered(world, tx, meter)
    meter.charge_cells(store.put_runner(world, replace(rec, capabilities=ins.capabilities)))
    _emit(events, TOPIC_CAPABILITIES_UPDATED, {0: tx.sender, 1: ins.capabilities.to_cbor()})


def update_rate_card(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                     events: list[Event]) -> None:
    """RunnerUpdateRateCard (0x23): replace the rate card."""
    ins = tx.instruction
    assert isinstance(ins, RunnerUpdateRateCard)
    rec = _registered(world, tx, meter)
    meter.charge_cells(store.put_runner(world, replace(rec, rate_card=ins.rate_card)))
    _emit(events, TOPIC_RATE_CARD_UPDATED, {0: tx.sender, 1: ins.rate_card.to_cbor()})


def deregister(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
    """RunnerDeregister (0x24): DEREGISTERED, stake due back at height + unbonding_blocks (index entry added)."""
    assert isinstance(tx.instruction, RunnerDeregister)
    rec = _registered(world, tx, meter)
    if rec.active_jobs > 0:
        raise TxFailed(E_HAS_ACTIVE_JOBS, f"{rec.active_jobs} jobs are still assigned to the runner")
    until = ctx.env.height + get_runner_config(world).unbonding_blocks
    meter.charge_cells(store.put_runner(world, replace(rec, health=Health.DEREGISTERED, unbonding_until=until)))
    key = store.unbond_key(until, tx.sender)
    world.set(key, b"")
    meter.charge_cells(len(key))
    _emit(events, TOPIC_DEREGISTERED, {0: tx.sender, 1: until})


def release_unbonded(world: WorldState, ctx: BlockContext) -> int:
    """Return every stake whose ``unbonding_until ≤ height`` (SystemHooks); returns how many were released.

    Scans the unbonding index from its start and stops at the first later entry, so the work is the
    number of stakes due. Each is moved from the registry's balance to the runner's account, the record
    gets stake 0 and unbonding_until 0 (so it may register again), and the index entry is deleted: a
    stake is returned once.
    """
    height = ctx.env.height
    due: list[tuple[bytes, bytes]] = []
    for key, _ in world.iterate(store.UNBOND_PREFIX):
        at, address = store.parse_unbond_key(key)
        if at > height:
            break
        due.append((key, address))
    for key, address in due:
        world.delete(key)
        rec = store.get_runner(world, address)
        if rec is None or rec.unbonding_until == 0:
            continue  # no stake waits behind this entry
        amount = rec.stake
        registry = get_account(world, RUNNER_REGISTRY)
        runner = get_account(world, address)
        put_account(world, RUNNER_REGISTRY, Account(registry.balance - amount, registry.nonce))
        put_account(world, address, Account(runner.balance + amount, runner.nonce))
        store.put_runner(world, replace(rec, stake=0, unbonding_until=0))
        ctx.events.append(Event(RUNNER_REGISTRY, TOPIC_UNBONDED, encode({0: address, 1: encode_u128(amount)})))
    return len(due)
