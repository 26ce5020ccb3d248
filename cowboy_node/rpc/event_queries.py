"""Event and terminal-timer reads for the HTTP API (``GET /events``, ``GET /actor/{address}/timers/history``).

Both read the node-local event index (``chain/event_index.py``) through a store snapshot, so they never take
the state lock and a block committing meanwhile does not change an answer. Every read is bounded by its
``limit``: the index is ordered by ``(emitter[, topic], height, seq)``, so a page reads only the entries it
returns plus one (to know whether there is a next page).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cowboy_node.chain.blockstore import BlockStore
from cowboy_node.chain.event_index import IndexedEvent, scan_events
from cowboy_node.rpc.facade import RpcError
from cowboy_node.state.kv_store import StateStore
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.fields import decode_u128

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain

MAX_EVENTS_LIMIT = 1000
"""Largest page of ``GET /events``."""
DEFAULT_EVENTS_LIMIT = 100
"""Page size of ``GET /events`` when ``limit`` is not given."""
MAX_TOPIC_BYTES = 256
"""Longest ``topic`` filter (UTF-8 bytes)."""
TERMINAL_TOPICS: dict[str, str] = {
    "timer.expired": "expired",
    "timer.cancelled_insufficient_funds": "insufficient_funds",
    "mailbox.dropped": "mailbox_dropped",
}
"""Block-level events that end a timer (or a Mailbox entry) without running it → the reason shown. They are
emitted by the timer's actor, so the actor's index holds them (docs/timers.md: expiry, the fee payer
unable to cover ``max_cost`` (CIP-5 "self-destruct"), a Mailbox entry dropped for the same reason)."""
CIP1_REFUSED_TOPIC = "cip1.bid_refused"
"""A CIP-1 timer's GBA refused to bid (docs/timers.md §15.4): ``{0: timer_id, 1: code, 2: gba_cycles,
3: gba_fee (u128 bytes), 4: dropped}``, emitter = the owner. Terminal only when ``dropped`` (a broken GBA);
otherwise the timer was deferred and stays pending."""
CIP1_DROPPED = "gba_dropped"
"""Reason of a CIP-1 timer dropped because its GBA is broken (``cip1.bid_refused`` with ``dropped`` true). A
CIP-1 timer past its ``expires_at`` emits the same ``timer.expired`` as a seeds/003 one (reason ``expired``)."""
TERMINAL_REASONS: dict[str, str] = {**TERMINAL_TOPICS, "timer.cancelled_by_governance": "cancelled_by_governance",
                                    CIP1_REFUSED_TOPIC: CIP1_DROPPED}
"""Every event that ends a timer without running it → the ``reason`` label of ``cowboy_timers_terminal_total``
(a governance cancel is emitted by the Basefee system actor 0x…06, not the actor, so the actor's history
lacks it; a ``cip1.bid_refused`` counts only when it dropped the timer)."""
MAX_CIP1_REFUSALS_SCANNED = 1_000
"""``cip1.bid_refused`` entries one history read examines at most: they are mostly deferrals (one per block
a priced-out timer waits), so finding the drops among them is bounded here, not by ``limit``."""


def count_terminal(events: Iterable[Event]) -> dict[str, int]:
    """``reason → count`` of the terminal-timer events among ``events`` (for the node's metric)."""
    out: dict[str, int] = {}
    for e in events:
        reason = TERMINAL_REASONS.get(e.topic)
        if reason is None or (reason == "cancelled_by_governance" and not _removed(e.data)):
            continue
        if reason == CIP1_DROPPED and not _dropped(e.data):
            continue
        out[reason] = out.get(reason, 0) + 1
    return out


def _field(data: bytes, key: int) -> object:
    try:
        value = decode(data)
    except CodecError:
        return None
    return value.get(key) if isinstance(value, dict) else None


def _removed(data: bytes) -> bool:
    """``timer.cancelled_by_governance`` data ``{0: timer_id, 1: removed}``: a cancel of no timer removed nothing."""
    return _field(data, 1) is True


def _dropped(data: bytes) -> bool:
    """``cip1.bid_refused`` data: field 4 says whether the timer was dropped (else deferred)."""
    return _field(data, 4) is True


DEFAULT_HISTORY_LIMIT = 50
"""Terminal timers ``/actor/{address}/timers/history`` returns when ``limit`` is not given."""
MAX_HISTORY_LIMIT = 200
"""Largest ``limit`` of ``/actor/{address}/timers/history``."""


def format_cursor(entry: IndexedEvent) -> str:
    """The ``next`` cursor after ``entry``: ``"<height>:<seq>"``."""
    return f"{entry.height}:{entry.seq}"


def parse_cursor(text: str) -> tuple[int, int]:
    """``"<height>:<seq>"`` → ``(height, seq)``; else 400 ``invalid_cursor``."""
    h, sep, s = text.partition(":")
    if not sep or not h.isdigit() or not s.isdigit() or len(h) > 20 or len(s) > 10:
        raise RpcError(400, "invalid_cursor", "cursor must be <height>:<seq> as returned in next")
    height, seq = int(h), int(s)
    if height > 2**64 - 1 or seq > 2**32 - 1:
        raise RpcError(400, "invalid_cursor", "cursor out of range")
    return height, seq


def _event_json(e: IndexedEvent) -> dict[str, Any]:
    return {"height": e.height, "seq": e.seq, "tx_index": e.tx_index,
            "emitter": to_checksum_address(e.event.emitter), "topic": e.event.topic,
            "data": "0x" + e.event.data.hex()}


def events_view(store: StateStore, actor: bytes, *, topic: str | None, from_height: int, to_height: int | None,
                after: tuple[int, int] | None, limit: int) -> dict[str, Any]:
    """A page of ``actor``'s events in ``(height, seq)`` order: ``{"actor", "topic", "from", "to", "events",
    "next" (cursor or null), "height"}``. ``to_height`` None means the head."""
    head = BlockStore(store).head_height() or 0
    to = head if to_height is None else min(to_height, head)
    page: list[IndexedEvent] = []
    more = False
    for entry in scan_events(store, actor, topic=topic, from_height=from_height, to_height=to, after=after):
        if len(page) == limit:
            more = True
            break
        page.append(entry)
    return {"actor": to_checksum_address(actor), "topic": topic, "from": from_height, "to": to,
            "events": [_event_json(e) for e in page], "next": format_cursor(page[-1]) if more else None,
            "height": head}


def _terminal_json(entry: IndexedEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"reason": TERMINAL_REASONS[entry.event.topic], "height": entry.height,
                           "topic": entry.event.topic}
    try:
        data = decode(entry.event.data)
    except CodecError:
        return out
    if not isinstance(data, dict):
        return out
    if entry.event.topic == CIP1_REFUSED_TOPIC:
        return {**out, **_cip1_drop_json(data)}
    ident = data.get(0)
    if isinstance(ident, bytes):
        out["deliver_id" if entry.event.topic == "mailbox.dropped" else "timer_id"] = "0x" + ident.hex()
    if entry.event.topic == "timer.expired" and isinstance(data.get(1), int):
        out["expires_at"] = data[1]
    elif isinstance(payer := data.get(1), bytes) and len(payer) == 20:
        out["fee_payer"] = to_checksum_address(payer)
        with contextlib.suppress(KeyError, ValueError):
            out["cost"], out["available"] = str(decode_u128(data[2], "cost")), str(decode_u128(data[3], "available"))
    return out


def _cip1_drop_json(data: dict[Any, Any]) -> dict[str, Any]:
    """The fields of a dropped CIP-1 timer (``cip1.bid_refused``)."""
    out: dict[str, Any] = {"scheduler": "cip1"}
    if isinstance(ident := data.get(0), bytes):
        out["timer_id"] = "0x" + ident.hex()
    if isinstance(code := data.get(1), str):
        out["code"] = code
    if isinstance(cycles := data.get(2), int) and not isinstance(cycles, bool):
        out["gba_cycles"] = cycles
    with contextlib.suppress(KeyError, ValueError):
        out["gba_fee"] = str(decode_u128(data[3], "gba_fee"))
    return out


def _cip1_drops(store: StateStore, actor: bytes, head: int, want: int) -> tuple[list[IndexedEvent], int | None]:
    """Up to ``want`` most recent drops among the actor's newest :data:`MAX_CIP1_REFUSALS_SCANNED`
    ``cip1.bid_refused`` entries; the second value, when that cap stopped the walk with entries left, is the
    height of the first entry not examined (drops at or below it were not searched), else None."""
    drops: list[IndexedEvent] = []
    for n, entry in enumerate(scan_events(store, actor, topic=CIP1_REFUSED_TOPIC, to_height=head, reverse=True)):
        if len(drops) >= want:
            break
        if n >= MAX_CIP1_REFUSALS_SCANNED:
            return drops, entry.height
        if _dropped(entry.event.data):
            drops.append(entry)
    return drops, None


def terminal_timers_view(store: StateStore, actor: bytes, *, limit: int) -> dict[str, Any]:
    """The ``limit`` most recent timers of ``actor`` that ended without firing, newest first:
    ``{"address", "terminal": [{"reason", "height", "timer_id" | "deliver_id", …}], "truncated",
    "cip1_searched_to", "height"}``.

    Reads at most ``limit + 1`` index entries per terminal topic (each topic's index is walked backwards
    from the head), whatever the actor's history holds, plus at most :data:`MAX_CIP1_REFUSALS_SCANNED`
    ``cip1.bid_refused`` entries (only those that dropped a timer are listed). ``cip1_searched_to`` is null
    when that walk reached its end or found enough drops, else the height at and below which CIP-1 drops
    may be missing.
    """
    head = BlockStore(store).head_height() or 0
    found: list[IndexedEvent] = []
    for topic in TERMINAL_TOPICS:
        for n, entry in enumerate(scan_events(store, actor, topic=topic, to_height=head, reverse=True)):
            if n > limit:
                break
            found.append(entry)
    drops, searched_to = _cip1_drops(store, actor, head, limit + 1)
    found.extend(drops)
    found.sort(key=lambda e: (e.height, e.seq), reverse=True)
    return {"address": to_checksum_address(actor), "terminal": [_terminal_json(e) for e in found[:limit]],
            "truncated": len(found) > limit, "cip1_searched_to": searched_to, "height": head}


class EventQueries:
    """``events`` and ``timer_history`` over the node's ``chain`` (composed into ``node/api.py``'s ``NodeApi``):
    they read a store snapshot, never the state lock."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        """The node's chain (its store holds the event index)."""

    def events(self, actor: bytes, topic: str | None, from_height: int, to_height: int | None,
               after: tuple[int, int] | None, limit: int) -> dict[str, Any]:
        """See :func:`events_view`."""
        snap = self.chain.store.snapshot()
        try:
            return events_view(snap, actor, topic=topic, from_height=from_height, to_height=to_height, after=after,
                               limit=limit)
        finally:
            snap.close()

    def timer_history(self, actor: bytes, limit: int) -> dict[str, Any]:
        """See :func:`terminal_timers_view`."""
        snap = self.chain.store.snapshot()
        try:
            return terminal_timers_view(snap, actor, limit=limit)
        finally:
            snap.close()
