"""Mempool journal: round trip, one write per sync, torn tails, compaction, and the node's use of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.mempool_journal import COMPACT_SLACK, MAGIC, MempoolJournal, restore_mempool
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.node_harness import make_node

TXS = [bytes([i]) * (10 + i) for i in range(6)]


def read(path: Path) -> list[bytes]:
    """What a fresh process would replay."""
    return list(MempoolJournal(path).replay())


def test_round_trip_in_append_order(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    j = MempoolJournal(path)
    assert list(j.replay()) == []
    for t in TXS[:3]:
        j.append(t)
    assert not path.exists()  # appends are buffered until the block's sync
    j.sync()
    assert read(path) == TXS[:3]
    j.append(TXS[3])
    j.sync()
    j.sync()  # nothing new: no-op
    assert read(path) == TXS[:4] and j.size_bytes == path.stat().st_size
    j.append(TXS[4])
    j.close()  # a clean shutdown syncs what is left
    assert read(path) == TXS[:5]


def test_torn_last_record_is_ignored_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    j = MempoolJournal(path)
    for t in TXS[:3]:
        j.append(t)
    j.sync()
    whole = path.stat().st_size
    with open(path, "ab") as f:  # a crash in the middle of writing a fourth record
        f.write(b"\x00\x00\x00\x40" + b"partial")
    again = MempoolJournal(path)
    assert list(again.replay()) == TXS[:3]
    assert again.torn_bytes == 11 and path.stat().st_size == whole
    again.append(TXS[3])
    again.sync()
    assert read(path) == TXS[:4]


def test_corrupt_record_ends_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    j = MempoolJournal(path)
    for t in TXS[:3]:
        j.append(t)
    j.sync()
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF  # inside the last payload: its CRC no longer matches
    path.write_bytes(bytes(data))
    again = MempoolJournal(path)
    assert list(again.replay()) == TXS[:2] and again.torn_bytes > 0


def test_append_without_replay_still_cuts_a_torn_tail_first(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    j = MempoolJournal(path)
    j.append(TXS[0])
    j.sync()
    with open(path, "ab") as f:
        f.write(b"\x00\x00")
    j2 = MempoolJournal(path)
    j2.append(TXS[1])
    j2.sync()
    assert read(path) == TXS[:2]


def test_half_written_header_or_foreign_file_replays_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    for content in (MAGIC[:3], b"not a journal at all"):
        path.write_bytes(content)
        j = MempoolJournal(path)
        assert list(j.replay()) == [] and j.torn_bytes == len(content)
        j.append(TXS[0])
        j.sync()
        assert read(path) == TXS[:1]


def test_compaction_rewrites_atomically_and_appends_continue(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    (tmp_path / "mempool.journal.tmp").write_bytes(b"left over by a crash during an earlier compaction")
    j = MempoolJournal(path)
    for t in TXS:
        j.append(t)
    j.sync()
    j.append(b"unsynced")  # in the pool too, so part of what compaction writes; not kept twice
    j.compact([TXS[1], TXS[4]])
    assert read(path) == [TXS[1], TXS[4]]
    assert not (tmp_path / "mempool.journal.tmp").exists()
    assert j.size_bytes == path.stat().st_size
    j.append(TXS[5])
    j.sync()
    assert read(path) == [TXS[1], TXS[4], TXS[5]]


def test_needs_compaction_past_twice_the_live_bytes(tmp_path: Path) -> None:
    """Rewriting is due once the file exceeds twice what the pool holds (plus a slack for an almost empty pool)."""
    j = MempoolJournal(tmp_path / "mempool.journal")
    live = 100_000
    limit = 2 * live + COMPACT_SLACK
    while j.size_bytes + 1000 <= limit:
        j.append(b"x" * 988)  # 1000 bytes with its framing
        assert not j.needs_compaction(live)
    j.append(b"x" * 988)
    assert j.size_bytes > limit and j.needs_compaction(live) and not j.needs_compaction(j.size_bytes)


def test_node_journals_admitted_txs_once_per_block_and_restart_readmits_them(tmp_path: Path) -> None:
    path = tmp_path / "mempool.journal"
    node = make_node(mempool_journal=MempoolJournal(path))
    first, second, gapped = (transfer(ALICE_SK, n, BOB, 1) for n in (0, 1, 3))
    for t in (first, second, gapped):
        node.api.submit_transaction(t.to_bytes())
    assert read(path) == []  # not yet written: one synced write per block
    asyncio.run(node.produce_block())
    assert read(path) == [first.to_bytes(), second.to_bytes(), gapped.to_bytes()]
    assert node.mempool.queued_count == 1 and node.mempool.pending_count == 0
    # A restart: a fresh pool over the same chain replays the journal through admission.
    pool = Mempool(MempoolConfig())
    out = restore_mempool(MempoolJournal(path), node.chain, pool)
    assert out["replayed"] == 3 and out["admitted"] == 1 and out["dropped"] == 2
    assert out["dropped_nonce_too_low"] == 2  # included before the restart
    assert gapped.tx_hash() in pool and pool.queued_count == 1
    assert read(path) == [gapped.to_bytes()]  # compacted to what was admitted
    gauge = node.metrics.registry.get_sample_value
    assert gauge("cowboy_mempool_queued") == 1 and gauge("cowboy_mempool_pending") == 0
