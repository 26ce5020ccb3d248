"""On-disk journal of the node's pooled transactions, so a restart does not drop them (and leave nonce gaps).

The node appends every transaction it admits (:meth:`MempoolJournal.append`, in memory), writes and fsyncs the
appended records in one go once per committed block (:meth:`MempoolJournal.sync`), and rewrites the file from the
pool's current contents when it has grown past twice what the pool holds (:meth:`MempoolJournal.compact`). On
start it replays the records through normal admission: transactions that were included meanwhile, or are no
longer valid, are refused there and simply dropped. What a crash can lose is what was admitted since the last
sync (at most one block interval); transactions that left the pool (included, evicted, expired) stay in the file
until the next compaction and are re-checked on replay.

File format (``DATA/mempool.journal``): the 8-byte magic ``CWBMPJ01``, then records, each
``u32 BE payload length ‖ payload ‖ u32 BE CRC-32 of the payload``; a payload is a transaction's ``tx_bytes``.
A record cut short or failing its CRC (a crash in the middle of a write) ends the journal: it and anything after it
are ignored and truncated away by :meth:`MempoolJournal.replay`, never an error. Compaction writes a temporary
file, fsyncs it, renames it over the journal and fsyncs the directory, so the journal on disk is always either the
old or the new file.

Not thread-safe; the node calls it from its event-loop thread only.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from cowboy_node.chain.admission import admit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_protocol.keys import fsync_dir
from cowboy_protocol.types.validation_errors import ValidationError

MEMPOOL_JOURNAL_FILE = "mempool.journal"
"""The journal's file name in the node's data directory."""
MAGIC = b"CWBMPJ01"
"""First bytes of a journal file (format version 1)."""
MAX_RECORD = 16 * 1024 * 1024
"""Largest payload accepted on replay; a longer length field is treated as a torn record."""
_HEAD = struct.Struct(">I")
COMPACT_SLACK = 1 << 20
"""Bytes a journal may exceed ``2 × live bytes`` by before :meth:`MempoolJournal.needs_compaction` says so, so that
an almost empty pool does not rewrite the file at every block."""


def _record(payload: bytes) -> bytes:
    return _HEAD.pack(len(payload)) + payload + _HEAD.pack(zlib.crc32(payload))


class MempoolJournal:
    """Append-only journal at ``path``; see the module docstring for the format and the guarantees."""

    def __init__(self, path: Path) -> None:
        """Use the journal at ``path`` (created on the first :meth:`sync` or :meth:`compact`); reads nothing yet."""
        self.path = Path(path)
        self._buf: list[bytes] = []
        self._buffered = 0
        self._fd: int | None = None
        self._size: int | None = None  # bytes on disk once checked (None: not yet opened or replayed)
        self.torn_bytes = 0
        """Bytes ignored at the end of the file by the last :meth:`replay` (a torn or corrupt tail)."""

    @property
    def size_bytes(self) -> int:
        """Journal size: bytes on disk (as last checked) plus appended records not yet synced."""
        return (self._size or 0) + self._buffered

    def append(self, tx_bytes: bytes) -> None:
        """Add one admitted transaction's ``tx_bytes``; written at the next :meth:`sync`."""
        rec = _record(tx_bytes)
        self._buf.append(rec)
        self._buffered += len(rec)

    def sync(self) -> None:
        """Write the appended records in one go, flush and fsync (no-op when nothing was appended)."""
        if not self._buf:
            return
        fd = self._open()
        data = memoryview(b"".join(self._buf))
        size = self._size or 0
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError:  # e.g. disk full: cut a partial write so a retry appends after the last whole record
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
        self._size = size + len(data)
        self._buf.clear()
        self._buffered = 0

    def needs_compaction(self, live_bytes: int) -> bool:
        """Whether the journal has grown past twice ``live_bytes`` (the pool's bytes) plus :data:`COMPACT_SLACK`."""
        return self.size_bytes > 2 * live_bytes + COMPACT_SLACK

    def compact(self, txs: Iterable[bytes]) -> None:
        """Replace the journal atomically with exactly ``txs`` (each a ``tx_bytes``); unsynced appends are dropped
        (the caller passes the pool's current contents, which include them)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        size = len(MAGIC)
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            chunk: list[bytes] = []
            for tx in txs:
                chunk.append(_record(tx))
                if len(chunk) >= 1024:
                    size += f.write(b"".join(chunk))
                    chunk.clear()
            size += f.write(b"".join(chunk))
            f.flush()
            os.fsync(f.fileno())
        self._close_fd()
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self._size = size
        self._buf.clear()
        self._buffered = 0

    def replay(self) -> Iterator[bytes]:
        """The ``tx_bytes`` of every whole record, in order. A torn or corrupt tail is ignored (its size is in
        :attr:`torn_bytes`) and truncated from the file so later appends follow the last whole record. Call it
        before the first :meth:`append`."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._size = 0
            self.torn_bytes = 0
            return iter(())
        records, end = _parse(data)
        self.torn_bytes = len(data) - end
        if self.torn_bytes:
            self._truncate(end)
        self._size = end
        return iter(records)

    def close(self) -> None:
        """Sync what was appended and close the file."""
        try:
            self.sync()
        finally:
            self._close_fd()

    # -- internals --------------------------------------------------------------------
    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            if self._size is None:  # never replayed: cut any torn tail before appending after it
                try:
                    data = self.path.read_bytes()
                except FileNotFoundError:
                    data = b""
                if data:
                    _, end = _parse(data)
                    if end != len(data):
                        self._truncate(end)
                    self._size = end
            if not self._size:  # new (or emptied) file: start with the magic
                with open(self.path, "wb") as f:
                    f.write(MAGIC)
                    f.flush()
                    os.fsync(f.fileno())
                fsync_dir(self.path.parent)
                self._size = len(MAGIC)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)  # kept open between syncs
        return self._fd

    def _truncate(self, end: int) -> None:
        with open(self.path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())


def _parse(data: bytes) -> tuple[list[bytes], int]:
    """Whole records of ``data`` and the offset just after the last one (0 when even the magic is missing)."""
    if not data.startswith(MAGIC):
        return [], 0
    out: list[bytes] = []
    pos, n = len(MAGIC), len(data)
    head = _HEAD.size
    while pos + head <= n:
        (length,) = _HEAD.unpack_from(data, pos)
        end = pos + head + length + head
        if length > MAX_RECORD or end > n:
            break
        payload = data[pos + head:pos + head + length]
        (crc,) = _HEAD.unpack_from(data, end - head)
        if zlib.crc32(payload) != crc:
            break
        out.append(payload)
        pos = end
    return out, pos


def restore_mempool(journal: MempoolJournal, chain: Chain, pool: Mempool) -> dict[str, int]:
    """Re-admit the journal's transactions into ``pool`` through normal admission, then compact the journal to
    what was admitted (dropping the rest and any torn tail). Returns counts for the start-up log: ``replayed``
    (whole records read), ``admitted``, ``dropped`` (refused: included meanwhile, no longer valid, duplicates, or
    beyond the pool's caps; by code in ``dropped_<code>``) and ``torn_bytes``. Raises OSError if the file cannot be
    read or rewritten."""
    records = list(journal.replay())
    out = {"replayed": len(records), "admitted": 0, "dropped": 0, "torn_bytes": journal.torn_bytes}
    for raw in records:
        try:
            admit(raw, chain, pool)
        except ValidationError as e:
            out["dropped"] += 1
            out[f"dropped_{e.code}"] = out.get(f"dropped_{e.code}", 0) + 1
        else:
            out["admitted"] += 1
    journal.compact(t.to_bytes() for t in pool.transactions())
    return out
