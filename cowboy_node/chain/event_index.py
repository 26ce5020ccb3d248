"""The node-local event index: every event of a committed block, findable by emitter (and topic) and height.

Key layout (in the block's commit batch, next to ``R/<height>``)::

    X/<emitter 20><height be8><seq be4>                      -> CBOR [topic, data, tx_index | null]
    Y/<emitter 20><keccak256(topic)[:8]><height be8><seq be4> -> b""   (points at the X/ key)

``seq`` numbers the block's events in order: the receipts' events (transaction order, then emission order),
then the block-level events of End of Block (``BlockResult.block_events``). ``tx_index`` is the transaction
that emitted it, null for a block-level event.

Why an index and not state: nothing in execution reads it, it needs no proof and no agreement, and every
validator would otherwise pay state writes (and a larger commitment) for what only an operator's queries
use. Block-level events (timer expiries, cancellations for insufficient funds, Mailbox drops) are in no
receipt, so without this index they would be lost with the block context. It grows like the receipts do
(``R/``), bounded per block by what a block can emit; a query reads only the keys it returns (plus one),
so its cost is bounded by its ``limit`` whatever the index holds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_node.types.receipt import Event, Receipt
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.codec.fixed import NULL, byte_string, text, uint
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.validation_errors import DecodeError

EVENTS_PREFIX = b"X/"
TOPICS_PREFIX = b"Y/"
TOPIC_HASH_LEN = 8
"""Bytes of ``keccak256(topic)`` in a topic key: a collision only costs a filtered-out read (the X/ entry has
the topic)."""
_POS = struct.Struct(">QI")
_EMITTER_LEN = 20


@dataclass(frozen=True, slots=True)
class IndexedEvent:
    """One event found in the index."""

    height: int
    """Block that emitted it."""
    seq: int
    """Its position among the block's events (receipt events first, then block-level events)."""
    tx_index: int | None
    """Index of the transaction that emitted it in its block; None for a block-level (End of Block) event."""
    event: Event
    """The event itself."""


@lru_cache(maxsize=1024)
def topic_hash(topic: str) -> bytes:
    """The topic's part of a ``Y/`` key (memoised: a block's events share a few topics)."""
    return keccak256(topic.encode("utf-8", "surrogatepass"))[:TOPIC_HASH_LEN]


def _entry(topic: str, data: bytes, tx_index: int | None) -> bytes:
    """``encode([topic, data, tx_index])``, the ``X/`` value, by the fixed-shape path when it applies."""
    t = text(topic)
    if t is not None and type(data) is bytes:
        tail = NULL if tx_index is None else uint(tx_index)
        if tail is not None:
            return b"\x83" + t + byte_string(data) + tail
    return encode([topic, data, tx_index])


def index_ops(height: int, receipts: Sequence[Receipt], block_events: Iterable[Event]) -> list[WriteOp]:
    """The writes that index every event of the block at ``height``."""
    ops: list[WriteOp] = []
    seq = 0

    def add(event: Event, tx_index: int | None) -> None:
        nonlocal seq
        pos = _POS.pack(height, seq)
        ops.append((EVENTS_PREFIX + event.emitter + pos, _entry(event.topic, event.data, tx_index)))
        ops.append((TOPICS_PREFIX + event.emitter + topic_hash(event.topic) + pos, b""))
        seq += 1

    for i, receipt in enumerate(receipts):
        for event in receipt.events:
            add(event, i)
    for event in block_events:
        add(event, None)
    return ops


def _decode_entry(emitter: bytes, pos: bytes, raw: bytes) -> IndexedEvent:
    value = decode(raw)
    if (not isinstance(value, list) or len(value) != 3 or not isinstance(value[0], str)
            or not isinstance(value[1], bytes) or not (value[2] is None or isinstance(value[2], int))):
        raise DecodeError("stored event index entry: expected [topic, data, tx_index|null]")
    height, seq = _POS.unpack(pos)
    return IndexedEvent(int(height), int(seq), value[2], Event(emitter, value[0], value[1]))


def scan_events(store: StateStore, emitter: bytes, *, topic: str | None = None, from_height: int = 0,
                to_height: int = 2**64 - 1, after: tuple[int, int] | None = None,
                reverse: bool = False) -> Iterator[IndexedEvent]:
    """Events of ``emitter`` (with ``topic`` if given) in ``from_height..to_height``, by ``(height, seq)``
    ascending (descending if ``reverse``), strictly after the cursor ``after`` in that direction.

    Lazy: the caller stops it after the entries it needs, so the work is bounded by what it takes.
    """
    if len(emitter) != _EMITTER_LEN:
        raise ValueError("emitter must be 20 bytes")
    if from_height > to_height:
        return
    prefix = EVENTS_PREFIX + emitter if topic is None else TOPICS_PREFIX + emitter + topic_hash(topic)
    if not reverse:
        start = prefix + _POS.pack(from_height, 0)
        if after is not None:
            start = max(start, prefix + _POS.pack(*after) + b"\x00")  # strictly after the cursor
    else:
        start = prefix + _POS.pack(to_height, 0xFFFFFFFF)
        if after is not None:
            h, s = after
            if h == 0 and s == 0:
                return
            below = _POS.pack(h, s - 1) if s > 0 else _POS.pack(h - 1, 0xFFFFFFFF)
            start = min(start, prefix + below)
    for key, _value in store.iterate(prefix, start=start, reverse=reverse):
        pos = key[len(prefix):]
        height = _POS.unpack(pos)[0]
        if (height > to_height) if not reverse else (height < from_height):
            return
        raw = _value if topic is None else store.get(EVENTS_PREFIX + emitter + pos)
        if raw is None:  # a Y/ key always has its X/ entry (same batch); tolerate a damaged store by skipping
            continue
        entry = _decode_entry(emitter, pos, raw)
        if topic is not None and entry.event.topic != topic:  # topic-hash collision
            continue
        yield entry
