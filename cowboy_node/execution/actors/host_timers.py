"""The timer calls of ``pvm_host`` (docs/timers.md): the bodies behind :class:`~.host.Host`'s ``schedule_timer*``,
``extend_timer``, ``get_timers``, ``cancel_timer``, the draft state-watch and interval extensions (§12.2-§12.3)
and CIP-1's ``set_timeout`` / ``cancel_timeout`` (§15).

``Host`` keeps the actor-facing methods (their names, signatures and docstrings are the API) and the frame's
closed check; each passes its :class:`Caller` here. Deterministic like the rest of ``execution/``: the same calls
against the same state charge the same cycles and write the same keys.
"""

from __future__ import annotations

from typing import NamedTuple

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.frame import CallFrame
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler import timeout as cip1_timeout
from cowboy_node.execution.timers import interval, schedule, watch
from cowboy_node.execution.timers import timer_state as timer_store
from cowboy_node.execution.timers.policy import E_EXTENSION_DISABLED, get_timer_policy
from cowboy_node.execution.timers.timer_record import DEFAULT_HANDLER, MAX_TIMER_ID_BYTES
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.fields import ADDRESS_LEN

GET_TIMERS_CYCLES_PER_TIMER = 200
"""get_timers, per live timer of the actor (on top of ``SCAN_BASE_CYCLES``), plus the payload bytes read."""
MAX_WATCH_KEY_PREFIX_BYTES = 256 - len(b"actor/") - ADDRESS_LEN - len(b"/kv/")
"""Longest ``key_prefix`` of a ``set_state_watch`` pair (226: the state-key prefix is at most 256 bytes)."""


class Caller(NamedTuple):
    """What a timer call runs against: the frame's world, block context, meter and call frame."""

    world: WorldState
    """State of the executing transaction."""
    ctx: BlockContext
    """The block being executed."""
    meter: Meter
    """The frame's cycle/cell meter."""
    frame: CallFrame
    """The calling actor's frame (``actor``, ``tx_sender``)."""


def schedule_timer_ex(c: Caller, height: object, payload: object, fee_payer: object, gas_limit: object,
                      access_limit: object, expires_at: object) -> bytes:
    """``Host.schedule_timer_ex``."""
    if isinstance(payload, bytearray):
        payload = bytes(payload)
    if isinstance(fee_payer, bytearray):
        fee_payer = bytes(fee_payer)
    if isinstance(access_limit, bool) or not isinstance(access_limit, int) or access_limit < 0:
        raise TxFailed(schedule.E_INVALID_INPUT, "access_limit must be a non-negative int")
    f = c.frame
    return schedule.schedule_timer(
        c.world, c.ctx, c.meter, actor=f.actor, tx_sender=f.tx_sender,
        height=height, handler=DEFAULT_HANDLER, payload=payload,  # type: ignore[arg-type]  # schedule validates
        fee_payer=None if fee_payer == b"" else fee_payer,  # type: ignore[arg-type]
        gas_limit=None if gas_limit == 0 and not isinstance(gas_limit, bool) else gas_limit,  # type: ignore[arg-type]
        expires_at=None if expires_at == 0 and not isinstance(expires_at, bool) else expires_at,  # type: ignore[arg-type]
    )


def extend_timer(c: Caller, timer_id: object, new_expires_at: object) -> None:
    """``Host.extend_timer``."""
    tid = _timer_id(timer_id)
    try:
        schedule.extend_timer(c.world, c.ctx, c.meter, actor=c.frame.actor, timer_id=tid,
                              new_expires_at=new_expires_at)  # type: ignore[arg-type]  # schedule validates
    except TxFailed as e:
        if e.code != schedule.E_NOT_FOUND:
            raise


def get_timers(c: Caller) -> dict[bytes, dict[str, object]]:
    """``Host.get_timers`` after its base charge."""
    live = timer_store.actor_timers(c.world, c.frame.actor)  # bounded by max_timers_per_actor
    c.meter.charge_cycles(GET_TIMERS_CYCLES_PER_TIMER * len(live))
    out: dict[bytes, dict[str, object]] = {}
    for timer_id, _height in live:
        t = timer_store.get_timer(c.world, timer_id)
        if t is None:
            continue
        c.meter.charge_cycles(len(t.payload) // 16)
        out[timer_id] = {"height": t.height, "payload": t.payload, "fee_payer": t.fee_payer,
                         "gas_limit": t.gas_limit_per_fire, "access_limit": None, "expires_at": t.expires_at}
    return out


def cancel_timer(c: Caller, timer_id: object) -> None:
    """``Host.cancel_timer``."""
    tid = _timer_id(timer_id)
    schedule.cancel_timer(c.world, c.ctx, c.meter, actor=c.frame.actor, timer_id=tid)


def set_state_watch(c: Caller, watch_keys: object, handler: object, data: object, fee_payer: object,
                    gas_limit: object, expires_at: object) -> bytes:
    """``Host.set_state_watch``."""
    try:
        prefixes = _watch_prefixes(watch_keys, get_timer_policy(c.world).max_watch_prefixes)
    except TxFailed:
        c.meter.charge_cycles(watch.SET_WATCH_BASE_CYCLES)  # a refused call costs what a valid one does
        raise
    f = c.frame
    return watch.set_state_watch(
        c.world, c.ctx, c.meter, actor=f.actor, tx_sender=f.tx_sender, prefixes=prefixes,
        handler=handler, payload=bytes(data) if isinstance(data, bytearray) else data,  # type: ignore[arg-type]
        fee_payer=_default(fee_payer, b""), gas_limit=_default(gas_limit, 0),  # type: ignore[arg-type]
        expires_at=_default(expires_at, 0))  # type: ignore[arg-type]  # watch.py validates


def set_interval(c: Caller, every_n_blocks: object, handler: object, data: object, fee_payer: object,
                 gas_limit: object, expires_at: object) -> bytes:
    """``Host.set_interval``."""
    f = c.frame
    return interval.set_interval(
        c.world, c.ctx, c.meter, actor=f.actor, tx_sender=f.tx_sender,
        every_blocks=every_n_blocks, handler=handler,  # type: ignore[arg-type]  # interval/schedule validate
        payload=bytes(data) if isinstance(data, bytearray) else data,  # type: ignore[arg-type]
        fee_payer=_default(fee_payer, b""), gas_limit=_default(gas_limit, 0),  # type: ignore[arg-type]
        expires_at=_default(expires_at, 0))  # type: ignore[arg-type]


def cancel_watch(c: Caller, timer_id: object) -> bool:
    """``Host.cancel_watch``."""
    c.meter.charge_cycles(schedule.CANCEL_TIMER_CYCLES)
    return watch.cancel_watch(c.world, actor=c.frame.actor, timer_id=_timer_id(timer_id))


def cancel_interval(c: Caller, timer_id: object) -> bool:
    """``Host.cancel_interval``."""
    c.meter.charge_cycles(schedule.CANCEL_TIMER_CYCLES)
    return interval.cancel_interval(c.world, actor=c.frame.actor, timer_id=_timer_id(timer_id),
                                    fired=c.ctx.eob.fired_timers)


def set_timeout(c: Caller, height: object, gba: object, handler: object, data: object, gas_limit: object,
                expires_at: object) -> bytes:
    """``Host.set_timeout``."""
    return cip1_timeout.set_timeout(
        c.world, c.ctx, c.meter, actor=c.frame.actor, height=height,
        gba=bytes(gba) if isinstance(gba, bytearray) else gba, handler=handler,
        payload=bytes(data) if isinstance(data, bytearray) else data,
        gas_limit=_default(gas_limit, 0), expires_at=_default(expires_at, 0))


def cancel_timeout(c: Caller, timer_id: object) -> bool:
    """``Host.cancel_timeout``."""
    tid = _timer_id(timer_id)
    return cip1_timeout.cancel_timeout(c.world, c.meter, actor=c.frame.actor, timer_id=tid)


def _default(value: object, sentinel: object) -> object:
    """The SDK's "protocol default" sentinel (``b""`` / ``0``, never ``False``) as None; anything else as given
    (a bytearray copied) for the timer module to validate."""
    if isinstance(value, bytearray):
        value = bytes(value)
    return None if type(value) is type(sentinel) and value == sentinel else value


def _watch_prefixes(value: object, limit: int) -> list[bytes]:
    """``[(actor_address, key_prefix), ...]`` as state-key prefixes ``actor/<addr>/kv/<key_prefix>``.

    Checked here because the pairs are this API's shape; the count is bounded before any pair is read
    (``limit`` = ``TimerPolicy.max_watch_prefixes``; 0 = the extension is disabled).
    """
    if limit == 0:
        raise TxFailed(E_EXTENSION_DISABLED, "state-watch timers are disabled by the governed timer policy")
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= limit:
        raise TxFailed(watch.E_WATCH_PREFIXES, f"watch_keys must be a list of 1..{limit} (address, key_prefix) pairs")
    out: list[bytes] = []
    for pair in value:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise TxFailed(watch.E_WATCH_PREFIXES, "each watch key is an (address, key_prefix) pair")
        addr, key_prefix = pair
        if isinstance(key_prefix, str):
            try:
                key_prefix = key_prefix.encode("utf-8")
            except UnicodeEncodeError:
                raise TxFailed(watch.E_WATCH_PREFIXES, "key_prefix is not valid UTF-8") from None
        if (not isinstance(addr, bytes | bytearray) or len(addr) != ADDRESS_LEN
                or not isinstance(key_prefix, bytes | bytearray)):
            raise TxFailed(watch.E_WATCH_PREFIXES, "each watch key is a 20-byte address and a bytes key prefix")
        prefix = store.kv_prefix(bytes(addr)) + bytes(key_prefix)
        if len(prefix) > watch.MAX_PREFIX_BYTES:
            raise TxFailed(watch.E_WATCH_PREFIXES, f"key_prefix may be at most {MAX_WATCH_KEY_PREFIX_BYTES} bytes")
        out.append(prefix)
    return out


def _timer_id(value: object) -> bytes:
    if not isinstance(value, bytes | bytearray) or not 1 <= len(value) <= MAX_TIMER_ID_BYTES:
        raise TxFailed(schedule.E_INVALID_INPUT, f"timer_id must be 1..{MAX_TIMER_ID_BYTES} bytes")
    return bytes(value)


