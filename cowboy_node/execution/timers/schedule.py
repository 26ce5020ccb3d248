"""Timer host calls and system instructions: schedule, extend, cancel (seeds/003 §4, §5.4, §6.1).

Host calls run inside a transaction: they charge the transaction's :class:`Meter`
and raise :class:`TxFailed` with a stable code on any violation, before writing
anything; the caller's checkpoint then reverts the whole transaction. All
writes go through the :class:`WorldState`, so a reverted transaction leaves no
timer side effect (§4.3). Error codes are listed in docs/timers.md §5.

The system instructions (CancelTimer / ExtendTimer) take no meter: the caller
checks ``sender ∈ system_deployers`` and charges the instruction, as for the
other governed system instructions.
"""

from __future__ import annotations

from dataclasses import replace

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import BASEFEE_ACTOR, get_timer_config
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.timer_record import (
    MAX_HANDLER_BYTES,
    MAX_PAYLOAD_BYTES,
    Timer,
    derive_timer_id,
)
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import ADDRESS_LEN, U64_MAX
from cowboy_protocol.types.params import TimerConfig

SET_TIMER_BASE_CYCLES = 200
"""Cycles of schedule_timer / schedule_timer_ex (§6.1); cells are the bytes written."""
EXTEND_TIMER_CYCLES = 200
"""Cycles of the extend_timer host call (§6.1)."""
CANCEL_TIMER_CYCLES = 200
"""Cycles of the cancel_timer host call (§6.1)."""
RESERVED_BAND = range(0x01, 0x10)
"""Low bytes of the reserved system-actor addresses 0x01..0x0F (§4.2)."""
ZERO_ADDRESS = bytes(ADDRESS_LEN)
"""The burn address, never a valid fee payer."""
GOVERNANCE_EMITTER = BASEFEE_ACTOR
"""Emitter of the governance timer events: the system actor that holds TimerConfig (§6.4)."""

# Error codes (stable; docs/timers.md §5). Spec class in brackets.
E_INVALID_INPUT = "timer_invalid_input"                  # [InvalidInput] wrong type / out of u64 range
E_HEIGHT_NOT_FUTURE = "timer_height_not_future"          # [InvalidInput] height <= current height
E_PAYLOAD_TOO_LARGE = "timer_payload_too_large"          # [InvalidInput] payload > 1 MiB
E_HANDLER_INVALID = "timer_handler_invalid"              # [InvalidInput] empty, > 256 bytes or not UTF-8
E_FEE_PAYER_ZERO = "timer_fee_payer_zero"                # [InvalidInput] fee_payer is the zero address
E_FEE_PAYER_RESERVED = "timer_fee_payer_reserved"        # [InvalidInput] fee_payer in 0x01..0x0F
E_FEE_PAYER_NOT_ALLOWED = "timer_fee_payer_not_allowed"  # [InvalidInput] neither the actor nor tx_sender
E_GAS_LIMIT_ZERO = "timer_gas_limit_zero"                # [InvalidInput] gas_limit == 0
E_GAS_LIMIT_TOO_HIGH = "timer_gas_limit_too_high"        # [InvalidInput] gas_limit > max_cycles_per_fire
E_EXPIRY_NOT_FUTURE = "timer_expiry_not_future"          # [InvalidInput] expires_at <= current height
E_EXPIRY_TOO_FAR = "timer_expiry_too_far"                # [InvalidInput] expires_at > current + max_ttl
E_ACTOR_CAP = "timer_actor_cap_reached"                  # [InvalidInput] max_timers_per_actor live timers
E_NOT_FOUND = "timer_not_found"                          # extend_timer on an absent timer
E_UNAUTHORIZED = "timer_unauthorized"                    # [Unauthorized] timer of another actor

ERROR_CODES = frozenset({
    E_INVALID_INPUT, E_HEIGHT_NOT_FUTURE, E_PAYLOAD_TOO_LARGE, E_HANDLER_INVALID, E_FEE_PAYER_ZERO,
    E_FEE_PAYER_RESERVED, E_FEE_PAYER_NOT_ALLOWED, E_GAS_LIMIT_ZERO, E_GAS_LIMIT_TOO_HIGH, E_EXPIRY_NOT_FUTURE,
    E_EXPIRY_TOO_FAR, E_ACTOR_CAP, E_NOT_FOUND, E_UNAUTHORIZED,
})
"""Every code a timer host call or system instruction raises."""


def _uint(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U64_MAX:
        raise TxFailed(E_INVALID_INPUT, f"{what} must be an unsigned 64-bit integer")
    return value


def _address(value: object, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != ADDRESS_LEN:
        raise TxFailed(E_INVALID_INPUT, f"{what} must be a 20-byte address")
    return value


def check_payload_and_handler(payload: object, handler: object) -> tuple[bytes, str]:
    """§4.2 checks of a timer's payload (bytes, at most 1 MiB) then handler (1..256 UTF-8 bytes), in this order;
    shared by ``schedule_timer`` and CIP-1's ``set_timeout``. Returns them, checked."""
    if not isinstance(payload, bytes):
        raise TxFailed(E_INVALID_INPUT, "payload must be bytes")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise TxFailed(E_PAYLOAD_TOO_LARGE, f"payload is {len(payload)} bytes, the maximum is {MAX_PAYLOAD_BYTES}")
    if not isinstance(handler, str):
        raise TxFailed(E_HANDLER_INVALID, "handler must be a string")
    try:
        handler_len = len(handler.encode("utf-8"))
    except UnicodeEncodeError:
        raise TxFailed(E_HANDLER_INVALID, "handler is not valid UTF-8") from None
    if handler_len == 0 or handler_len > MAX_HANDLER_BYTES:
        raise TxFailed(E_HANDLER_INVALID, f"handler must be 1..{MAX_HANDLER_BYTES} UTF-8 bytes")
    return payload, handler


def check_gas_and_expiry(cfg: TimerConfig, current: int, gas_limit: object | None,
                         expires_at: object | None) -> tuple[int, int]:
    """§4.2 ``gas_limit`` (1..``max_cycles_per_fire``) then ``expires_at`` (in ``(current, current +
    max_ttl_blocks]``), ``None`` taking the protocol default; returns ``(gas_limit, expires_at)``."""
    gas = cfg.max_cycles_per_fire if gas_limit is None else _uint(gas_limit, "gas_limit")
    if gas == 0:
        raise TxFailed(E_GAS_LIMIT_ZERO, "gas_limit must be at least 1 cycle")
    if gas > cfg.max_cycles_per_fire:
        raise TxFailed(E_GAS_LIMIT_TOO_HIGH, f"gas_limit {gas} exceeds max_cycles_per_fire {cfg.max_cycles_per_fire}")
    ceiling = current + cfg.max_ttl_blocks
    expiry = ceiling if expires_at is None else _uint(expires_at, "expires_at")
    if expiry <= current:
        raise TxFailed(E_EXPIRY_NOT_FUTURE, f"expires_at {expiry} must be above the current height {current}")
    if expiry > ceiling:
        raise TxFailed(E_EXPIRY_TOO_FAR, f"expires_at {expiry} is beyond current height + max_ttl_blocks ({ceiling})")
    return gas, expiry


def is_reserved_address(address: bytes) -> bool:
    """True for the reserved system-actor band 0x01..0x0F (19 zero bytes then the low byte)."""
    return len(address) == ADDRESS_LEN and address[-1] in RESERVED_BAND and not any(address[:-1])


def _check_fee_payer(fee_payer: bytes, actor: bytes, tx_sender: bytes) -> None:
    if fee_payer == ZERO_ADDRESS:
        raise TxFailed(E_FEE_PAYER_ZERO, "fee_payer must not be the zero (burn) address")
    if is_reserved_address(fee_payer):
        raise TxFailed(E_FEE_PAYER_RESERVED, "fee_payer must not be a reserved system actor (0x01..0x0F)")
    if fee_payer != actor and fee_payer != tx_sender:
        raise TxFailed(E_FEE_PAYER_NOT_ALLOWED, "fee_payer must be the actor itself or the transaction sender")


def _check_new_expiry(value: object, current: int, cfg: TimerConfig) -> int:
    """Validate a new TTL and clamp it to ``current + max_ttl_blocks`` (§5.4)."""
    new = _uint(value, "new_expires_at")
    if new <= current:
        raise TxFailed(E_EXPIRY_NOT_FUTURE, f"new_expires_at {new} must be above the current height {current}")
    return min(new, current + cfg.max_ttl_blocks)


def schedule_timer(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, tx_sender: bytes,
                   height: int, handler: str, payload: bytes, fee_payer: bytes | None = None,
                   gas_limit: int | None = None, expires_at: int | None = None) -> bytes:
    """schedule_timer / schedule_timer_ex: validate (§4.2), charge (§6.1), store; returns the timer id.

    ``None`` for ``fee_payer`` / ``gas_limit`` / ``expires_at`` takes the protocol
    default (the actor; ``max_cycles_per_fire``; current height + ``max_ttl_blocks``).
    Checks run in the order documented in docs/timers.md §4 and write nothing on failure.
    """
    meter.charge_cycles(SET_TIMER_BASE_CYCLES)
    current = ctx.env.height
    cfg = get_timer_config(world)
    actor = _address(actor, "actor")
    tx_sender = _address(tx_sender, "tx_sender")
    height = _uint(height, "height")
    if height <= current:
        raise TxFailed(E_HEIGHT_NOT_FUTURE, f"timer height {height} must be above the current height {current}")
    payload, handler = check_payload_and_handler(payload, handler)
    payer = actor if fee_payer is None else _address(fee_payer, "fee_payer")
    _check_fee_payer(payer, actor, tx_sender)
    gas, expiry = check_gas_and_expiry(cfg, current, gas_limit, expires_at)
    meta = store.get_meta(world, actor)
    if meta.live >= cfg.max_timers_per_actor:
        raise TxFailed(E_ACTOR_CAP, f"actor already holds {meta.live} timers (max {cfg.max_timers_per_actor})")

    timer_id = derive_timer_id(actor, height, payload, meta.next_nonce)
    timer = Timer(actor_address=actor, height=height, payload=payload, timer_id=timer_id, handler=handler,
                  fee_payer=payer, gas_limit_per_fire=gas, expires_at=expiry, seq=store.next_seq(world))
    writes = store.insert_writes(timer, meta)
    meter.charge_cells(sum(len(k) + len(v) for k, v in writes))
    store.apply_writes(world, writes)
    return timer_id


def extend_timer(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, timer_id: bytes,
                 new_expires_at: int) -> None:
    """extend_timer host call: owner only; new TTL > current height, clamped, never shortened (§5.4)."""
    meter.charge_cycles(EXTEND_TIMER_CYCLES)
    current = ctx.env.height
    new = _check_new_expiry(new_expires_at, current, get_timer_config(world))
    timer = store.get_timer(world, timer_id)
    if timer is None:
        raise TxFailed(E_NOT_FOUND, "no live timer with this id")
    if timer.actor_address != actor:
        raise TxFailed(E_UNAUTHORIZED, "only the owning actor may extend its timer")
    _set_expiry(world, timer, new)


def cancel_timer(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, timer_id: bytes) -> bool:
    """cancel_timer host call: owner only (§4.2); True if removed, False if no such timer."""
    meter.charge_cycles(CANCEL_TIMER_CYCLES)
    timer = store.get_timer(world, timer_id)
    if timer is None:
        return False
    if timer.actor_address != actor:
        raise TxFailed(E_UNAUTHORIZED, "only the owning actor may cancel its timer")
    store.remove_timer(world, timer)
    return True


def system_cancel_timer(world: WorldState, ctx: BlockContext, *, timer_id: bytes,
                        events: list[Event] | None = None) -> bool:
    """CancelTimer system instruction: idempotent removal; True if a timer was removed.

    No pre-charge is ever outstanding between blocks (fires settle within
    DeliverTimers), so there is nothing to refund. Appends
    ``timer.cancelled_by_governance`` to ``events`` when given.
    """
    timer = store.get_timer(world, timer_id)
    if timer is not None:
        store.remove_timer(world, timer)
    if events is not None:
        events.append(Event(GOVERNANCE_EMITTER, "timer.cancelled_by_governance",
                            encode({0: bytes(timer_id), 1: timer is not None})))
    return timer is not None


def system_extend_timer(world: WorldState, ctx: BlockContext, *, timer_id: bytes, new_expires_at: int,
                        events: list[Event] | None = None) -> None:
    """ExtendTimer system instruction: clamped to current + max_ttl_blocks, never shortened, idempotent.

    A missing timer is a no-op. Appends ``timer.extended_by_governance`` to
    ``events`` when given (data: the timer id and the resulting ``expires_at``,
    null when there was no timer).
    """
    new = _check_new_expiry(new_expires_at, ctx.env.height, get_timer_config(world))
    timer = store.get_timer(world, timer_id)
    result = None if timer is None else _set_expiry(world, timer, new)
    if events is not None:
        events.append(Event(GOVERNANCE_EMITTER, "timer.extended_by_governance",
                            encode({0: bytes(timer_id), 1: result})))


def _set_expiry(world: WorldState, timer: Timer, clamped: int) -> int:
    """Raise ``expires_at`` to ``clamped`` (never lowers it); returns the resulting value."""
    if clamped <= timer.expires_at:
        return timer.expires_at
    store.replace_record(world, replace(timer, expires_at=clamped))
    return clamped
