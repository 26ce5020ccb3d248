"""Pruning of old blocks, receipts and indexes (``[storage] retain_blocks``), in bounded batches.

What a block leaves in the store besides state (``chain/blockstore.py``, ``chain/event_index.py``,
``consensus/records.py``): ``B/h``, ``R/h``, ``H/<hash>``, ``T/<tx hash>`` per transaction, ``C/f/h`` (its
finalization certificate), the ``C/s/`` seeds of rounds up to its round, and its events under ``X/``/``Y/``. The
event index is keyed emitter first, so the commit batch also writes ``E/h`` (only for a block with events):
the distinct ``emitter(20) ‖ keccak256(topic)[:8]`` pairs of its events, which name every ``X/``/``Y/`` prefix the
block wrote. State (``s/``, ``n/``) is never pruned: the head's state is all that is kept of it anyway.

``M/earliest`` holds the lowest height whose block is still stored (absent: 0, nothing pruned). A prune step
deletes heights ``[earliest, min(earliest + max_blocks, head − retain_blocks + 1))`` and moves ``M/earliest`` in
the same batch, so a reader that finds a block missing and then reads the pointer sees why (``410 pruned``), and
a crash part-way leaves either the step's every deletion or none. The batch is written without fsync: a step lost
in an OS crash is simply done again.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cowboy_node.chain.event_index import EVENTS_PREFIX, TOPIC_HASH_LEN, TOPICS_PREFIX
from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_node.types.block import Block

KEY_EARLIEST = b"M/earliest"
"""Lowest height whose block, receipts and indexes are still stored (be8; absent means 0)."""
EVENT_KEYS_PREFIX = b"E/"
"""``E/<height be8>``: the emitter ‖ topic-hash pairs of that block's events (only for blocks with events)."""
MIN_RETAIN_BLOCKS = 100
"""Smallest non-zero ``retain_blocks``: consensus and block sync read recent committed blocks (the parent of a
proposal, certificates of recent heights), and an operator's tools expect the last minutes to be there."""
DEFAULT_BATCH_BLOCKS = 64
"""Heights one prune step deletes at most (one step runs after each commit, so a node that turns pruning on
over a long archive catches up at 64 blocks per block, each batch small)."""
_BE8 = struct.Struct(">Q")
_PAIR = 20 + TOPIC_HASH_LEN
_SEED = b"C/s/"
_FIN = b"C/f/"
_BLOCK = b"B/"
_RECEIPTS = b"R/"
_HASH = b"H/"
_TX = b"T/"


def earliest_height(store: StateStore) -> int:
    """The lowest height still stored (0 when nothing was pruned)."""
    raw = store.get(KEY_EARLIEST)
    return 0 if raw is None else int(_BE8.unpack(raw)[0])


def event_keys_op(height: int, index_ops: Iterable[WriteOp]) -> WriteOp | None:
    """The ``E/<height>`` write for a block whose event-index writes are ``index_ops`` (None: no events)."""
    pairs = sorted({key[2:2 + _PAIR] for key, _ in index_ops if key.startswith(TOPICS_PREFIX)})
    if not pairs:
        return None
    return EVENT_KEYS_PREFIX + _BE8.pack(height), b"".join(pairs)


def _event_deletes(store: StateStore, height: int) -> list[WriteOp]:
    raw = store.get(EVENT_KEYS_PREFIX + _BE8.pack(height))
    if raw is None:
        return []
    h = _BE8.pack(height)
    ops: list[WriteOp] = [(EVENT_KEYS_PREFIX + h, None)]
    emitters: set[bytes] = set()
    for i in range(0, len(raw) - _PAIR + 1, _PAIR):
        pair = raw[i:i + _PAIR]
        emitters.add(pair[:20])
        ops.extend((k, None) for k, _ in store.iterate(TOPICS_PREFIX + pair + h))
    for emitter in sorted(emitters):
        ops.extend((k, None) for k, _ in store.iterate(EVENTS_PREFIX + emitter + h))
    return ops


def block_deletes(store: StateStore, height: int) -> tuple[list[WriteOp], Block | None]:
    """Every write that removes what block ``height`` left outside the state except round seeds (nothing when it
    is gone already), and the block (None when it was gone)."""
    h = _BE8.pack(height)
    ops: list[WriteOp] = [(_RECEIPTS + h, None), (_FIN + h, None)]
    raw = store.get(_BLOCK + h)
    block = None
    if raw is not None:
        block = Block.decode(raw)
        ops.append((_BLOCK + h, None))
        ops.append((_HASH + block.hash(), None))
        ops.extend((_TX + tx.tx_hash(), None) for tx in block.transactions)
    ops.extend(_event_deletes(store, height))
    return ops, block


def seed_deletes(store: StateStore, block: Block) -> list[WriteOp]:
    """The seeds of every round up to ``block``'s (its own and the nullified rounds before it): retained blocks
    have later rounds, and a proposer reads only seeds after its parent's round."""
    r = block.header.round
    end = _SEED + struct.pack(">QQ", r.epoch, r.view)
    return [(k, None) for k, _ in store.iterate(_SEED, start=end, reverse=True)]


@dataclass(frozen=True, slots=True)
class PruneStep:
    """What one :func:`prune_step` did."""

    pruned_from: int
    """First height deleted (the earliest before the step)."""
    earliest: int
    """The earliest retained height after the step (``pruned_from`` when nothing was due)."""
    deleted_keys: int
    """Keys deleted by the step's batch."""


def prune_target(head: int, retain_blocks: int) -> int:
    """The earliest height to keep: ``head − retain_blocks + 1`` (0 with ``retain_blocks`` 0, the archive)."""
    if retain_blocks <= 0:
        return 0
    return max(0, head - retain_blocks + 1)


def prune_step(store: StateStore, *, head: int, retain_blocks: int,
               max_blocks: int = DEFAULT_BATCH_BLOCKS) -> PruneStep:
    """Delete at most ``max_blocks`` of the oldest heights below ``head − retain_blocks + 1`` in one batch."""
    start = earliest_height(store)
    stop = min(start + max_blocks, prune_target(head, retain_blocks))
    if stop <= start:
        return PruneStep(start, start, 0)
    ops: list[WriteOp] = []
    last: Block | None = None
    for height in range(start, stop):
        deletes, block = block_deletes(store, height)
        ops.extend(deletes)
        last = block or last
    if last is not None:
        ops.extend(seed_deletes(store, last))
    ops.append((KEY_EARLIEST, _BE8.pack(stop)))
    store.write_batch(ops, sync=False)
    return PruneStep(start, stop, len(ops) - 1)


def below_earliest(store: StateStore, heights: Sequence[int]) -> int | None:
    """The earliest retained height when any of ``heights`` is below it (the ``pruned`` answer), else None."""
    earliest = earliest_height(store)
    return earliest if any(h < earliest for h in heights) else None
