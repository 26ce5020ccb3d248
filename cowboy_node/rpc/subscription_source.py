"""What a subscription sends for one committed height, read from the chain's stores (``rpc/subscriptions.py``).

Every topic reads committed data only — blocks, receipts and the event index, all written in the height's one
commit batch — so replaying a height after a reconnect gives exactly what the live stream gave. A height
yields at most one message per subscription (all its matching items together), so a client that resumes
``from`` the height after the last message it received misses nothing and sees nothing twice.

Messages are bytes, encoded here once: the hub (``rpc/subscriptions.py``) asks for each (height, filter) once,
in its reader thread, and sends the same bytes to every subscriber with that filter. Heights recently read are
cached (the block message, each transaction with its receipt already encoded), so filters over the same height
cost one store read; the cache is only touched from that one reader thread.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.event_index import scan_events
from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.params import parse_address_param, parse_hash, parse_height
from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.crypto.address import to_checksum_address

__all__ = ["TOPICS", "ChainSource", "Filter", "parse_filter"]

TOPICS = ("blocks", "txs", "events", "jobs")
"""Subscription topics."""
MAX_NAME_BYTES = 256
"""Longest event name filter (as ``GET /events``' ``topic``)."""
_PARAMS = {"topic", "from", "sender", "hash", "actor", "name", "job"}
_ALLOWED = {"blocks": {"topic", "from"}, "txs": {"topic", "from", "sender", "hash"},
            "events": {"topic", "from", "actor", "name"}, "jobs": {"topic", "from", "job"}}
_CACHE_HEIGHTS = 256


@dataclass(frozen=True, slots=True)
class Filter:
    """A subscription's topic and server-side filters (None: not filtered on)."""

    topic: str
    """One of :data:`TOPICS`."""
    from_height: int | None
    """First height to send (a replay from the store up to the head, then live); None: the next block."""
    sender: bytes | None = None
    """txs: only this sender's transactions."""
    tx_hash: bytes | None = None
    """txs: only this transaction."""
    actor: bytes | None = None
    """events: the emitter (required: the event index is keyed by emitter)."""
    name: str | None = None
    """events: only this event name."""
    job: bytes | None = None
    """jobs: only this job id."""

    def selector(self) -> Filter:
        """The filter without its starting height: subscribers with equal selectors get the same messages."""
        return replace(self, from_height=None)


def parse_filter(query: Any) -> Filter:
    """The filter of ``GET /subscribe?topic=…``; 400 ``invalid_query`` / ``invalid_topic`` / ``invalid_height`` /
    ``invalid_address`` / ``invalid_hash`` otherwise."""
    unknown = sorted(k for k in query if k not in _PARAMS)
    if unknown:
        raise RpcError(400, "invalid_query", f"unknown parameters {unknown}; expected {sorted(_PARAMS)}")
    if len(query.getall("topic", [])) != 1 or any(len(query.getall(k)) > 1 for k in query):
        raise RpcError(400, "invalid_query", "give topic once, and each filter at most once")
    topic = query["topic"]
    if topic not in TOPICS:
        raise RpcError(400, "invalid_topic", f"topic must be one of {list(TOPICS)}")
    extra = sorted(k for k in query if k not in _ALLOWED[topic])
    if extra:
        raise RpcError(400, "invalid_query", f"topic {topic} takes {sorted(_ALLOWED[topic])}, not {extra}")
    from_height = parse_height(query["from"]) if "from" in query else None
    name = query.get("name")
    if name is not None and not 0 < len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES:
        raise RpcError(400, "invalid_query", f"name must be 1..{MAX_NAME_BYTES} UTF-8 bytes")
    if topic == "events" and "actor" not in query:
        raise RpcError(400, "invalid_query", "topic events needs actor (events are indexed by emitter)")
    return Filter(
        topic=topic, from_height=from_height,
        sender=parse_address_param(query["sender"]) if "sender" in query else None,
        tx_hash=parse_hash(query["hash"]) if "hash" in query else None,
        actor=parse_address_param(query["actor"]) if "actor" in query else None,
        name=name, job=parse_hash(query["job"], "job") if "job" in query else None)


@dataclass(frozen=True, slots=True)
class _Height:
    block_message: bytes  # the blocks topic's message, encoded once for every subscriber
    txs: tuple[tuple[bytes, bytes, bytes], ...]  # (sender, hash, encoded tx JSON with its receipt)


class ChainSource:
    """Renders subscription messages from ``chain``'s committed stores (reads only; safe beside commits; one
    thread at a time)."""

    def __init__(self, chain: Chain) -> None:
        self._chain = chain
        self._cache: OrderedDict[int, _Height] = OrderedDict()

    def head(self) -> int:
        """The committed height."""
        return self._chain.height

    def _height(self, height: int) -> _Height | None:
        got = self._cache.get(height)
        if got is not None:
            return got
        blocks = self._chain.blocks
        block = blocks.block(height)
        receipts = blocks.receipts(height)
        if block is None or receipts is None:
            return None
        doc = block.header.to_json()
        doc["transactions"] = ["0x" + t.tx_hash().hex() for t in block.transactions]
        doc["signature"] = "0x" + block.signature.hex()
        txs = []
        for i, (tx, receipt) in enumerate(zip(block.transactions, receipts, strict=True)):
            h = tx.tx_hash()
            txs.append((tx.sender, h, _dump({**tx.to_json(), "height": height, "index": i,
                                             "receipt": receipt.to_json()})))
        got = _Height(_dump({"type": "block", "height": height, "block": doc}), tuple(txs))
        self._cache[height] = got
        while len(self._cache) > _CACHE_HEIGHTS:
            self._cache.popitem(last=False)
        return got

    def message(self, f: Filter, height: int) -> bytes | None:
        """The message of ``height`` for ``f`` (encoded JSON), or None when nothing at that height matches."""
        if f.topic == "blocks":
            h = self._height(height)
            return None if h is None else h.block_message
        if f.topic == "txs":
            h = self._height(height)
            if h is None:
                return None
            txs = [doc for sender, tx_hash, doc in h.txs
                   if (f.sender is None or sender == f.sender) and (f.tx_hash is None or tx_hash == f.tx_hash)]
            return _envelope("txs", height, txs) if txs else None
        if f.topic == "events":
            assert f.actor is not None
            events = [_dump({"height": e.height, "seq": e.seq, "tx_index": e.tx_index,
                             "emitter": to_checksum_address(e.event.emitter), "topic": e.event.topic,
                             "data": "0x" + e.event.data.hex()})
                      for e in scan_events(self._chain.store, f.actor, topic=f.name, from_height=height,
                                           to_height=height)]
            return _envelope("events", height, events) if events else None
        jobs = []
        for e in scan_events(self._chain.store, JOB_DISPATCHER, from_height=height, to_height=height):
            if not e.event.topic.startswith("job."):
                continue
            job_id = _job_id(e.event.data)
            if job_id is None or (f.job is not None and job_id != f.job):
                continue
            jobs.append(_dump({"job_id": "0x" + job_id.hex(), "event": e.event.topic,
                               "status": e.event.topic.removeprefix("job."), "seq": e.seq}))
        return _envelope("jobs", height, jobs) if jobs else None


def _job_id(data: bytes) -> bytes | None:
    """Key 0 of a ``job.*`` event's CBOR map is the job id (execution/jobs: every job event carries it first)."""
    try:
        m = decode(data)
    except CodecError:
        return None
    job_id = m.get(0) if isinstance(m, dict) else None
    return bytes(job_id) if isinstance(job_id, bytes) and len(job_id) == 32 else None


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _envelope(kind: str, height: int, items: list[bytes]) -> bytes:
    """``{"type": kind, "height": height, kind: [items]}`` from items already encoded (no second encoding)."""
    return b'{"type":"%s","height":%d,"%s":[%s]}' % (kind.encode(), height, kind.encode(), b",".join(items))
