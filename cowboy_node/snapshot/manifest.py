"""The snapshot manifest and chunk encodings (deterministic CBOR, integer keys; golden bytes in
``tests/unit/storage/test_snapshot_format.py`` and docs/protocol.md "State snapshots").

```
Manifest = {0: format (1), 1: chain_id (text), 2: genesis_hash (32 B), 3: height, 4: block (encoded block at height),
            5: finalization (encoded Finalization of that block), 6: slots [[kind, digest] × 256],
            7: chunks [[first_slot, last_slot, size, keccak256(chunk bytes)], ...], 8: entries (state keys in all)}
Chunk    = [[key, value], ...]   the state entries of slots first_slot..last_slot, ascending by keccak256(key)
```

``slots[i]`` is what sits at the state tree's depth-2 path ``i`` (``state/slots.py``): kind 0 (empty; digest
``h''``), 1 (one leaf) or 2 (internal node). The chunks cover slots 0..255 in order, without gaps or overlaps.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.state.slots import EMPTY, INTERNAL, LEAF, SLOTS, Slot
from cowboy_protocol.codec import CodecError, decode, encode

FORMAT = 1
"""The only manifest format this node reads and writes."""
MAX_CHUNK_ENTRIES = 1 << 20
"""Most entries a chunk may hold (a bound on what one decode allocates)."""


class SnapshotError(Exception):
    """A snapshot, manifest or chunk refused; ``code`` names why (stable, for logs and tests)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """One chunk as the manifest lists it."""

    first_slot: int
    """First slot whose entries it holds."""
    last_slot: int
    """Last slot whose entries it holds (inclusive)."""
    size: int
    """Its encoded length in bytes."""
    digest: bytes
    """keccak256 of its encoding."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a snapshot is: the finalized block it is the state of, the 256 slots, and the chunk list."""

    chain_id: str
    """The chain's id (genesis ``chain_id``)."""
    genesis_hash: bytes
    """Hash of the genesis file the chain was started from."""
    height: int
    """Height of the block whose post-state this is."""
    block: bytes
    """That block, encoded (its header holds the state root)."""
    finalization: bytes
    """The encoded Finalization certificate of that block (proves it final to a node that has only genesis)."""
    slots: tuple[Slot, ...]
    """The 256 depth-2 slots of the state tree."""
    chunks: tuple[ChunkInfo, ...]
    """The chunks, covering the slots in order."""
    entries: int
    """Number of state entries in all chunks."""


def encode_manifest(m: Manifest) -> bytes:
    """Canonical bytes of ``m``."""
    return encode({0: FORMAT, 1: m.chain_id, 2: m.genesis_hash, 3: m.height, 4: m.block, 5: m.finalization,
                   6: [[s.kind, s.digest] for s in m.slots],
                   7: [[c.first_slot, c.last_slot, c.size, c.digest] for c in m.chunks], 8: m.entries})


def _uint(v: object, what: str) -> int:
    if type(v) is not int or v < 0:
        raise SnapshotError("bad_manifest", f"{what} must be an unsigned integer")
    return v


def _bytes(v: object, what: str, size: int | None = None) -> bytes:
    if type(v) is not bytes or (size is not None and len(v) != size):
        raise SnapshotError("bad_manifest", f"{what} must be {size if size is not None else 'a'} byte string")
    return v


def decode_manifest(raw: bytes) -> Manifest:
    """Strictly decode a manifest; :class:`SnapshotError` ``bad_manifest`` (or ``unsupported_format``)."""
    try:
        value = decode(raw)
    except CodecError as e:
        raise SnapshotError("bad_manifest", f"not canonical CBOR: {e}") from None
    if not isinstance(value, dict) or set(value) != set(range(9)):
        raise SnapshotError("bad_manifest", "expected a map with keys 0..8")
    if value[0] != FORMAT:
        raise SnapshotError("unsupported_format", f"manifest format {value[0]!r}; this node reads {FORMAT}")
    if type(value[1]) is not str:
        raise SnapshotError("bad_manifest", "chain_id must be a text")
    slots_raw, chunks_raw = value[6], value[7]
    if not isinstance(slots_raw, list) or len(slots_raw) != SLOTS:
        raise SnapshotError("bad_manifest", f"slots must be a list of {SLOTS}")
    slots = []
    for i, s in enumerate(slots_raw):
        if not isinstance(s, list) or len(s) != 2 or type(s[0]) is not int or s[0] not in (EMPTY, LEAF, INTERNAL):
            raise SnapshotError("bad_manifest", f"slot {i} must be [kind 0..2, digest]")
        kind: int = s[0]
        slots.append(Slot(kind, _bytes(s[1], f"slot {i} digest", 0 if kind == EMPTY else 32)))
    if not isinstance(chunks_raw, list) or not chunks_raw:
        raise SnapshotError("bad_manifest", "chunks must be a non-empty list")
    chunks = []
    expect = 0
    for i, c in enumerate(chunks_raw):
        if not isinstance(c, list) or len(c) != 4:
            raise SnapshotError("bad_manifest", f"chunk {i} must be [first_slot, last_slot, size, digest]")
        info = ChunkInfo(_uint(c[0], "first_slot"), _uint(c[1], "last_slot"), _uint(c[2], "size"),
                         _bytes(c[3], "chunk digest", 32))
        if info.first_slot != expect or info.last_slot < info.first_slot or info.last_slot >= SLOTS:
            raise SnapshotError("bad_manifest", f"chunk {i} covers slots {info.first_slot}..{info.last_slot}, "
                                                f"expected to start at {expect}")
        expect = info.last_slot + 1
        chunks.append(info)
    if expect != SLOTS:
        raise SnapshotError("bad_manifest", f"the chunks end at slot {expect - 1}, not {SLOTS - 1}")
    return Manifest(value[1], _bytes(value[2], "genesis_hash", 32), _uint(value[3], "height"),
                    _bytes(value[4], "block"), _bytes(value[5], "finalization"), tuple(slots), tuple(chunks),
                    _uint(value[8], "entries"))


def encode_chunk(entries: list[tuple[bytes, bytes]]) -> bytes:
    """Canonical bytes of a chunk (``entries`` already in key-hash order)."""
    return encode([[k, v] for k, v in entries])


def decode_chunk(raw: bytes) -> list[tuple[bytes, bytes]]:
    """Strictly decode a chunk's entries (order and slots are checked by the verifier); ``bad_chunk``."""
    try:
        value = decode(raw, max_depth=2)
    except CodecError as e:
        raise SnapshotError("bad_chunk", f"not canonical CBOR: {e}") from None
    if not isinstance(value, list) or len(value) > MAX_CHUNK_ENTRIES:
        raise SnapshotError("bad_chunk", f"expected a list of at most {MAX_CHUNK_ENTRIES} entries")
    out = []
    for entry in value:
        if not isinstance(entry, list) or len(entry) != 2 or type(entry[0]) is not bytes \
                or type(entry[1]) is not bytes:
            raise SnapshotError("bad_chunk", "an entry is not [key bytes, value bytes]")
        out.append((entry[0], entry[1]))
    return out
