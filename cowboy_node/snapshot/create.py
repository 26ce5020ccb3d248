"""Taking a snapshot of the state at a committed, certified height, into ``HOME/snapshots/<height>/``.

Read from one point-in-time store view (a LevelDB snapshot), so blocks may keep committing meanwhile. Entries are
first spread over 256 bucket files by slot (memory stays bounded whatever the state size), then each slot is
hashed and written into chunks of about ``chunk_bytes``. The directory is written as ``<height>.tmp`` and renamed
when complete: a listed snapshot is always whole.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

from cowboy_node.chain.blockstore import STATE_PREFIX, BlockStore
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.snapshot.manifest import (
    ChunkInfo,
    Manifest,
    SnapshotError,
    decode_manifest,
    encode_chunk,
    encode_manifest,
)
from cowboy_node.state.derived import is_derived
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.slots import EMPTY_SLOT, SLOTS, Slot, slot_index, slot_of_entries
from cowboy_node.state.tree import keccak256

SNAPSHOT_DIR = "snapshots"
"""Where a home keeps its snapshots (``HOME/snapshots/<height>/``)."""
MANIFEST_FILE = "manifest.cbor"
DEFAULT_CHUNK_BYTES = 4 << 20
"""Target encoded size of one chunk (a chunk is never split inside a slot)."""
_U32 = struct.Struct(">I")


def chunk_file(index: int) -> str:
    """File name of chunk ``index`` inside a snapshot directory."""
    return f"chunk-{index:05d}.cbor"


def _read_bucket(path: Path) -> Iterator[tuple[bytes, bytes]]:
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        (n,) = _U32.unpack_from(data, pos)
        k = data[pos + 4:pos + 4 + n]
        pos += 4 + n
        (n,) = _U32.unpack_from(data, pos)
        v = data[pos + 4:pos + 4 + n]
        pos += 4 + n
        yield k, v


def create_snapshot(view: StateStore, *, height: int, chain_id: str, genesis_hash: bytes, out_root: Path,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Path:
    """Write the snapshot of ``view`` (whose head is ``height``) under ``out_root/<height>``; its directory.

    Raises :class:`SnapshotError` ``no_certificate`` when the block has no stored finalization certificate, and
    ``exists`` when that snapshot is already there."""
    block = BlockStore(view).block_bytes(height)
    cert = ConsensusRecords(view).finalization_bytes(height)
    if block is None or cert is None:
        raise SnapshotError("no_certificate", f"block {height} or its finalization certificate is not stored")
    final = out_root / str(height)
    if final.exists():
        raise SnapshotError("exists", f"{final} already exists")
    tmp = out_root / f"{height}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "buckets").mkdir(parents=True)
    files = [open(tmp / "buckets" / f"{i:03d}", "wb") for i in range(SLOTS)]  # noqa: SIM115 - closed below
    entries = 0
    try:
        plen = len(STATE_PREFIX)
        for key, value in view.iterate(STATE_PREFIX):
            k = key[plen:]
            if is_derived(k):  # not in the state tree: the installer rebuilds it from the records
                continue
            f = files[slot_index(keccak256(k))]
            f.write(_U32.pack(len(k)) + k + _U32.pack(len(value)) + value)
            entries += 1
    finally:
        for f in files:
            f.close()
    slots: list[Slot] = []
    chunks: list[ChunkInfo] = []
    pending: list[tuple[bytes, bytes]] = []
    size, first = 0, 0

    def flush(last: int) -> None:
        nonlocal pending, size, first
        raw = encode_chunk(pending)
        (tmp / chunk_file(len(chunks))).write_bytes(raw)
        chunks.append(ChunkInfo(first, last, len(raw), keccak256(raw)))
        pending, size, first = [], 0, last + 1

    for s in range(SLOTS):
        bucket = tmp / "buckets" / f"{s:03d}"
        items = sorted(_read_bucket(bucket), key=lambda kv: keccak256(kv[0]))
        bucket.unlink()
        slots.append(slot_of_entries(items) if items else EMPTY_SLOT)
        pending.extend(items)
        size += sum(len(k) + len(v) + 8 for k, v in items)
        if size >= chunk_bytes or s == SLOTS - 1:
            flush(s)
    (tmp / "buckets").rmdir()
    manifest = Manifest(chain_id, genesis_hash, height, block, cert, tuple(slots), tuple(chunks), entries)
    (tmp / MANIFEST_FILE).write_bytes(encode_manifest(manifest))
    for p in tmp.iterdir():  # durable before the rename makes it visible
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.rename(tmp, final)
    fd = os.open(out_root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return final


def list_snapshots(out_root: Path) -> list[Manifest]:
    """The complete snapshots under ``out_root``, by height (``*.tmp`` directories of an interrupted take are not)."""
    out: list[Manifest] = []
    if not out_root.is_dir():
        return out
    for d in out_root.iterdir():
        if d.is_dir() and d.name.isdigit() and (d / MANIFEST_FILE).is_file():
            out.append(decode_manifest((d / MANIFEST_FILE).read_bytes()))
    return sorted(out, key=lambda m: m.height)


def prune_snapshots(out_root: Path, keep: int) -> list[int]:
    """Delete all but the newest ``keep`` snapshots; the heights deleted (a ``*.tmp`` being written is left)."""
    heights = [m.height for m in list_snapshots(out_root)]
    gone = heights[:-keep] if keep > 0 else heights
    for h in gone:
        shutil.rmtree(out_root / str(h), ignore_errors=True)
    return gone
