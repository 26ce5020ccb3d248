"""End-of-Block step DeliverTimers (seeds/003 §5, §6.2–§6.5).

The due timers are the height-index entries at heights ≤ the current height,
scanned in (height, seq) order: the lane-deferred backlog of earlier blocks
first, then this height's timers in insertion (FIFO) order. Each is classified
(§5.4) and leaves by exactly one path:

* TTL expiry (``height > expires_at``) or insufficient funds
  (``balance(fee_payer) < max_cost``): removed without executing under the GC
  budget (``TimerConfig.gc_cycles_per_block``, ``GC_CYCLES_PER_TIMER`` each),
  event ``timer.expired`` / ``timer.cancelled_insufficient_funds``. When the GC
  budget is spent the timer stays for the next block and the scan goes on, so
  an expiry storm never holds back live fires.
* natural fire: if its ``gas_limit_per_fire`` fits the remaining lane budget
  (the first fire of a block always fits), the timer is removed, ``max_cost``
  is debited from its fee payer, the handler runs under its own checkpoint
  (reverted unless it succeeds), the unused part is refunded and the used
  part burned; event ``timer.fired``. The first timer that does not fit ends
  the scan: it and everything after it are delivered first next block, in the
  same order.

The step reads ``TimerConfig`` once; the basefees are those of the block.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.records import encode_account
from cowboy_node.execution.system_state import get_timer_config
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.timer_record import DEFAULT_HANDLER, MAX_HANDLER_BYTES, Timer, encode_item
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account, account_key
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import encode_u128
from cowboy_protocol.types.params import TimerConfig

LANE_TIMER_CYCLES = 10_000_000
"""Default §6.5 lane budget: cycles fired handlers may use per block (half the CIP-3 cycles target)."""
GC_CYCLES_PER_TIMER = 5_000
"""GC-budget cost of removing one expired or unfunded timer (5M default budget → 1,000 per block)."""
ORIGIN_TX_HASH = bytes(32)
"""Origin tx hash of a timer's deferred transaction: the "no parent tx" sentinel (§5.2)."""

TOPIC_FIRED = "timer.fired"
TOPIC_EXPIRED = "timer.expired"
TOPIC_INSUFFICIENT_FUNDS = "timer.cancelled_insufficient_funds"


@dataclass(frozen=True, slots=True)
class FireOutcome:
    """What running one timer handler did (returned by the injected :data:`RunHandler`)."""

    ok: bool
    """True if the handler succeeded; otherwise its writes are reverted (it is still charged)."""
    cycles_used: int
    """Cycles used (clamped to the fire's gas limit)."""
    cells_used: int
    """Cells used (clamped to ``max_cells_per_fire``)."""
    error_code: str | None
    """Stable failure code when ``ok`` is False."""
    events: tuple[Event, ...] = ()
    """Events the handler emitted (kept only when ``ok``)."""


_new = object.__new__
_OUTCOME_SET = tuple(getattr(FireOutcome, name).__set__ for name in FireOutcome.__slots__)  # declaration order


def make_outcome(ok: bool, cycles_used: int, cells_used: int, error_code: str | None,
                 events: tuple[Event, ...]) -> FireOutcome:
    """``FireOutcome(ok, cycles_used, cells_used, error_code, events)``, filled through the slot descriptors (the
    frozen dataclass's ``__init__`` costs about twice as much; the instance is the same)."""
    out = _new(FireOutcome)
    s = _OUTCOME_SET
    s[0](out, ok)
    s[1](out, cycles_used)
    s[2](out, cells_used)
    s[3](out, error_code)
    s[4](out, events)
    return out


RunHandler = Callable[[WorldState, Timer, Meter], FireOutcome]
"""Executes one fire: ``(world, routed timer, meter)``. The timer passed in carries the handler and
payload after the ``_handler`` convention; the meter's limits are ``(gas_limit_per_fire,
max_cells_per_fire)``. DeliverTimers owns a checkpoint around the call and reverts it unless ``ok``;
a raised :class:`TxFailed` counts as a failed fire charged at the meter's usage."""


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """Summary of one DeliverTimers step."""

    fired: int
    """Timers whose handler ran (successfully or not)."""
    deferred: bool
    """True if the lane budget closed while due timers remained (they go first next block)."""
    expired: int
    """Timers removed by TTL expiry."""
    self_destructed: int
    """Timers removed because their fee payer could not cover ``max_cost``."""
    gc_deferred: int
    """Expired / unfunded timers left in place because the GC budget was spent."""
    lane_cycles_used: int
    """Cycles the fired handlers used."""
    gc_cycles_used: int
    """GC budget used."""
    events: tuple[Event, ...]
    """The events appended to ``ctx.events``, in order."""


class AccountCache:
    """Reads and writes fee payers' accounts for one End-of-Block step, decoding each stored value once.

    The store is always read (a handler may change any account), but when it still holds the bytes this
    cache last wrote or decoded for that address, the decoded ``(balance, nonce)`` is reused: decoding is a
    pure function of the bytes. A burst of fires charged to one payer thus decodes nothing after the first.
    Writes are exactly ``system_state.put_account``'s (same key, same canonical bytes).
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[bytes, tuple[bytes | None, int, int]] = {}

    def _read(self, world: WorldState, address: bytes) -> tuple[bytes | None, int, int]:
        raw = world.get(account_key(address))
        hit = self._known.get(address)
        if hit is not None and hit[0] == raw:
            return hit
        account = Account() if raw is None else Account.decode(raw)
        hit = (raw, account.balance, account.nonce)
        self._known[address] = hit
        return hit

    def get(self, world: WorldState, address: bytes) -> Account:
        """The account at ``address`` (a zero account if absent), as ``system_state.get_account``."""
        _raw, balance, nonce = self._read(world, address)
        return Account(balance, nonce)

    def balance(self, world: WorldState, address: bytes) -> int:
        """``get(world, address).balance``."""
        return self._read(world, address)[1]

    def put(self, world: WorldState, address: bytes, account: Account) -> None:
        """Store ``account``, as ``system_state.put_account``."""
        self._write(world, address, account.balance, account.nonce)

    def add(self, world: WorldState, address: bytes, delta: int, *, just_read: bool = False) -> None:
        """Add ``delta`` to the balance stored now (nonce kept): ``put`` of ``get`` with ``balance + delta``.

        ``just_read``: the caller read this account through this cache and nothing has written the world's
        accounts since, so that read is used instead of reading the store again.
        """
        hit = self._known.get(address) if just_read else None
        _raw, balance, nonce = hit if hit is not None else self._read(world, address)
        self._write(world, address, balance + delta, nonce)

    def _write(self, world: WorldState, address: bytes, balance: int, nonce: int) -> None:
        raw = encode_account(balance, nonce)  # = Account(balance, nonce).encode() (or its error), faster
        world.set(account_key(address), raw)
        self._known[address] = (raw, balance, nonce)


def max_cost(timer: Timer, cfg: TimerConfig, ctx: BlockContext) -> int:
    """Worst-case cost of one fire (§6.3 step 2)."""
    return timer.gas_limit_per_fire * ctx.cycle_basefee + cfg.max_cells_per_fire * ctx.cell_basefee


_MAX_JSON_BRACKETS = 64
"""At most this many ``[``/``{`` bytes in a convention payload: bounds the nesting depth so the parse
never depends on the interpreter's recursion limit (a determinism guard)."""


class _Number:
    """Stands in for every JSON number: their values are never used, and converting huge integers
    would depend on the interpreter's int-digits limit."""


_NUMBER = _Number()


def _number(_text: str) -> _Number:
    return _NUMBER


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _unique_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate key")
    return obj


def parse_handler_payload(payload: bytes) -> tuple[str, bytes] | None:
    """``(handler, inner payload)`` if ``payload`` follows the ``_handler`` convention, else None.

    The payload must be strict UTF-8 JSON (RFC 8259: no NaN/Infinity, no duplicate keys, at most
    ``_MAX_JSON_BRACKETS`` brackets) whose top level is an object with a ``_handler`` string of
    1..256 UTF-8 bytes and a ``_payload`` string in strict standard base64; other keys are ignored.
    """
    if payload.lstrip()[:1] != b"{" or payload.count(b"{") + payload.count(b"[") > _MAX_JSON_BRACKETS:
        return None
    try:
        obj = json.loads(payload.decode("utf-8"), object_pairs_hook=_unique_object, parse_int=_number,
                         parse_float=_number, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    name, inner = obj.get("_handler"), obj.get("_payload")
    if not isinstance(name, str) or not isinstance(inner, str):
        return None
    try:
        name_len = len(name.encode("utf-8"))
        data = base64.b64decode(inner, validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        return None
    if not 0 < name_len <= MAX_HANDLER_BYTES:
        return None
    return name, data


_CBOR_HANDLER_KEY = b"\x68_handler"
"""CBOR text ``"_handler"`` (the first key in canonical order)."""
_CBOR_PAYLOAD_KEY = b"\x68_payload"
"""CBOR text ``"_payload"``."""


def _cbor_head(buf: bytes, pos: int, major: int) -> tuple[int, int] | None:
    """``(argument, next position)`` of a shortest-form CBOR head of ``major`` type at ``pos``, else None."""
    if pos >= len(buf) or buf[pos] >> 5 != major:
        return None
    info = buf[pos] & 0x1F
    if info < 24:
        return info, pos + 1
    width = {24: 1, 25: 2, 26: 4, 27: 8}.get(info)
    if width is None or pos + 1 + width > len(buf):
        return None
    value = int.from_bytes(buf[pos + 1:pos + 1 + width], "big")
    if value < (24 if width == 1 else 1 << (4 * width)):
        return None  # not the shortest form: not canonical
    return value, pos + 1 + width


def parse_cbor_envelope(payload: bytes) -> tuple[str, bytes] | None:
    """``(handler, inner payload)`` if ``payload`` is exactly the canonical CBOR map
    ``{"_handler": text of 1..256 UTF-8 bytes, "_payload": bytes}`` (the SDK's envelope), else None.

    Parsed by hand, field by field, so no nesting or recursion is ever involved: the
    map head ``a2``, the two keys in canonical order, shortest-form length heads, and
    nothing after the payload.
    """
    if payload[:1] != b"\xa2" or not payload.startswith(_CBOR_HANDLER_KEY, 1):
        return None
    head = _cbor_head(payload, 1 + len(_CBOR_HANDLER_KEY), 3)
    if head is None:
        return None
    name_len, pos = head
    if not 0 < name_len <= MAX_HANDLER_BYTES or pos + name_len > len(payload):
        return None
    try:
        name = payload[pos:pos + name_len].decode("utf-8")
    except UnicodeDecodeError:
        return None
    pos += name_len
    if not payload.startswith(_CBOR_PAYLOAD_KEY, pos):
        return None
    head = _cbor_head(payload, pos + len(_CBOR_PAYLOAD_KEY), 2)
    if head is None or head[1] + head[0] != len(payload):
        return None
    return name, payload[head[1]:]


def route(timer: Timer) -> Timer:
    """The timer as its handler sees it: the ``_handler`` convention (§4.2) applies to timers with the
    default handler; a timer naming another handler gets its payload verbatim."""
    if timer.handler != DEFAULT_HANDLER:
        return timer
    # The canonical-CBOR envelope first (what the SDK writes), then the JSON form (as the SDK reads them).
    parsed = parse_cbor_envelope(timer.payload) or parse_handler_payload(timer.payload)
    if parsed is None:
        return timer
    return replace(timer, handler=parsed[0], payload=parsed[1])


def deliver_timers(world: WorldState, ctx: BlockContext, run_handler: RunHandler, *,
                   lane_timer_cycles: int = LANE_TIMER_CYCLES) -> DeliveryReport:
    """Deliver the due timers of block ``ctx.env.height`` (see the module docstring)."""
    current = ctx.env.height
    cfg = get_timer_config(world)
    events: list[Event] = []
    fired = expired = destructed = gc_deferred = 0
    lane_used = gc_used = 0
    deferred = removed_any = False
    first_left: tuple[int, int] | None = None
    accounts = AccountCache()
    start = store.get_cursor(world)
    # The iterator yields the index as it was when the scan began; a handler may since have removed or rewritten
    # an entry further on (cancel, extend). Every write of a height-index key is logged in ``world.watch_log``
    # (store.py), so an entry whose key was logged after the scan began is read again from the world.
    log = world.watch_log
    seen = len(log)
    touched: set[bytes] = set()
    for key, raw in store.iter_entries(world, start):
        height, seq = store.split_height_key(key)
        if height > current:
            break
        if len(log) != seen:
            touched.update(log[seen:])
            seen = len(log)
        if key in touched:
            now = world.get(key)
            if now is None:
                continue  # removed earlier in this block (e.g. cancelled by a handler)
            raw = now
        timer = store.decode_entry(key, raw)
        cost = max_cost(timer, cfg, ctx)
        available = 0
        if current <= timer.expires_at:
            available = accounts.balance(world, timer.fee_payer)
            if available >= cost:
                if fired and timer.gas_limit_per_fire > lane_timer_cycles - lane_used:
                    deferred = True
                    first_left = first_left or (height, seq)
                    break
                store.remove_indexed(world, timer)
                seen = len(log)  # this removal: the scan has passed that key
                removed_any = True
                fired += 1
                lane_used += _fire(world, ctx, cfg, timer, cost, run_handler, events, accounts)
                continue
        if gc_used + GC_CYCLES_PER_TIMER > cfg.gc_cycles_per_block:
            gc_deferred += 1
            first_left = first_left or (height, seq)
            continue
        gc_used += GC_CYCLES_PER_TIMER
        store.remove_indexed(world, timer)
        seen = len(log)
        removed_any = True
        if current > timer.expires_at:
            expired += 1
            events.append(Event(timer.actor_address, TOPIC_EXPIRED,
                                encode({0: timer.timer_id, 1: timer.expires_at, 2: current})))
        else:
            destructed += 1
            events.append(Event(timer.actor_address, TOPIC_INSUFFICIENT_FUNDS,
                                encode({0: timer.timer_id, 1: timer.fee_payer, 2: encode_u128(cost),
                                        3: encode_u128(available)})))
    if removed_any:
        cursor = first_left or (current + 1, 0)
        if cursor != start:
            store.set_cursor(world, *cursor)
    ctx.events.extend(events)
    return DeliveryReport(fired, deferred, expired, destructed, gc_deferred, lane_used, gc_used, tuple(events))


@dataclass(frozen=True, slots=True)
class ChargedRun:
    """What :func:`charged_run` did: the handler's outcome and what it was charged."""

    outcome: FireOutcome
    """The handler's outcome (its writes kept only when ``ok``)."""
    cycles: int
    """Cycles charged (clamped to the gas limit)."""
    cells: int
    """Cells charged (clamped to the cells limit)."""
    actual: int
    """Fee charged and burned: cycles × cycle basefee + cells × cell basefee."""


def run_checkpointed(world: WorldState, meter: Meter, run: Callable[[Meter], FireOutcome]) -> FireOutcome:
    """Run a handler in a checkpoint: its writes are kept if it succeeds and reverted otherwise; a ``TxFailed``
    becomes a failed outcome (anything else propagates, after the revert)."""
    cp = world.checkpoint()
    try:
        outcome = run(meter)
    except TxFailed as e:
        outcome = FireOutcome(False, meter.cycles_used, meter.cells_used, e.code)
    except BaseException:
        world.revert(cp)
        raise
    if outcome.ok:
        world.release(cp)
    else:
        world.revert(cp)
    return outcome


def charged_run(world: WorldState, ctx: BlockContext, *, fee_payer: bytes, cost: int, gas_limit: int,
                cells_limit: int, run: Callable[[Meter], FireOutcome], accounts: AccountCache | None = None,
                payer_just_read: bool = False) -> ChargedRun:
    """Pre-charge ``cost`` to ``fee_payer``, run the handler in a checkpoint (reverted on failure), refund the
    unused part and burn the rest (seeds/003 §6.3 steps 4–7; the same for Mailbox entries). Timers and Mailbox
    entries carry no priority fee: the whole actual cost is basefee, burned; tip 0. ``accounts`` is the
    step's :class:`AccountCache` (None: a fresh one); ``payer_just_read``: the caller has just read the fee
    payer's account through it and written no account since (saves reading it again)."""
    if accounts is None:
        accounts = AccountCache()
    accounts.add(world, fee_payer, -cost, just_read=payer_just_read)
    meter = Meter(gas_limit, cells_limit)
    outcome = run_checkpointed(world, meter, run)
    cycles = min(max(outcome.cycles_used, 0), gas_limit)
    cells = min(max(outcome.cells_used, 0), cells_limit)
    actual = cycles * ctx.cycle_basefee + cells * ctx.cell_basefee
    accounts.add(world, fee_payer, cost - actual)  # the refund, on the balance as the handler left it
    ctx.burned += actual
    ctx.cycles_used += cycles
    ctx.cells_used += cells
    return ChargedRun(outcome, cycles, cells, actual)


def fired_event_data(timer_id: bytes, ok: bool, cycles: int, cells: int, actual: int,
                     error_code: str | None) -> bytes:
    """Data of a ``timer.fired`` event: ``encode({0: timer_id, 1: ok, 2: cycles, 3: cells, 4: encode_u128(actual),
    5: error_code})``, byte for byte (or its error), without building the map."""
    return b"".join((b"\xa6\x00", encode_item(timer_id), b"\x01", encode_item(ok), b"\x02", encode_item(cycles),
                     b"\x03", encode_item(cells), b"\x04", encode_item(encode_u128(actual)), b"\x05",
                     encode_item(error_code)))


def _fire(world: WorldState, ctx: BlockContext, cfg: TimerConfig, timer: Timer, cost: int,
          run_handler: RunHandler, events: list[Event], accounts: AccountCache) -> int:
    """Pre-charge, execute, refund, burn (§6.3 steps 4–7); returns the cycles used."""
    run = charged_run(world, ctx, fee_payer=timer.fee_payer, cost=cost, gas_limit=timer.gas_limit_per_fire,
                      cells_limit=cfg.max_cells_per_fire, run=lambda meter: run_handler(world, route(timer), meter),
                      accounts=accounts, payer_just_read=True)
    outcome, cycles = run.outcome, run.cycles
    if outcome.ok:
        events.extend(outcome.events)
    events.append(Event(timer.actor_address, TOPIC_FIRED,
                        fired_event_data(timer.timer_id, outcome.ok, cycles, run.cells, run.actual,
                                         outcome.error_code)))
    return cycles
