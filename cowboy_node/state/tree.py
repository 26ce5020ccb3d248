"""The authenticated state commitment: a 16-ary Merkle tree over ``keccak256(key)``.

Consensus rules (changing anything here changes every state root)
------------------------------------------------------------------
Let ``H = keccak256`` and, for a state key ``k``, ``kh = H(k)``; the tree
walks ``kh`` one 4-bit nibble at a time, high nibble of each byte first
(``kh[0] >> 4``, ``kh[0] & 15``, ``kh[1] >> 4``, ...).

* Empty tree: the root is ``EMPTY_ROOT = H(b"cowboy-state-empty-v1")``.
* Leaf for ``(k, v)``: ``H(0x00 ‖ H(k) ‖ H(v))``.
* Internal node: ``H(0x01 ‖ bitmap ‖ h_0 ‖ h_1 ‖ …)`` where ``bitmap`` is a
  big-endian u16 whose bit ``n`` (value ``1 << n``) is set iff the node has a
  child at nibble ``n``, followed by the 32-byte hashes of the present
  children in nibble order 0..15.

Shape -- a pure function of the set of key hashes, so the root depends only
on the final ``(key, value)`` set, never on insertion or deletion history.
For a nibble path ``p`` let ``S(p)`` be the keys whose hash starts with ``p``:

* ``|S(p)| == 0``: nothing at ``p``;
* ``|S(p)| == 1``: that key's leaf sits at ``p`` (so a leaf sits at the
  shortest prefix that distinguishes it from every other key);
* ``|S(p)| >= 2``: an internal node sits at ``p``; its child at nibble ``n``
  is whatever sits at ``p ‖ n``.

The root is whatever sits at the empty path (a single key's tree has that
key's leaf hash as its root). Hence every internal node has at least two
leaves below it, and an internal node never has exactly one child that is a
leaf: a delete that leaves one leaf under a node moves that leaf up to the
shallowest position that still distinguishes it. An internal node *does* keep
a single child when that child is itself an internal node (two or more keys
whose hashes share the next nibble): there are no extension nodes, so such
one-child chains stay where they are (they are rare: the hashes must share a
long prefix).

Storage (not consensus)
-----------------------
Nodes live in the store under ``prefix ‖ path``: ``path`` is one byte holding
the nibble count, then the nibbles packed two per byte (a final odd nibble in
the high half, low half zero). Leaf records are ``0x00 ‖ H(k) ‖ H(v) ‖ v``
(the leaf hash covers the first 65 bytes; the value is kept so proofs can
return it); internal records are exactly the hashed bytes
``0x01 ‖ bitmap ‖ hashes``. The committed root hash is stored at
``prefix ‖ 0xff``. ``prepare`` reads only nodes on the paths of the changed
keys (``O(changes · log16(keys))``) and re-hashes each touched node once.

Proofs
------
A :class:`StateProof` for key ``k`` lists, for every internal node on the walk
of ``H(k)`` from the root, its bitmap and the hashes of its other children. It
ends at a leaf (the key's own leaf for inclusion, another key's leaf for
exclusion), at an internal node without a child at the next nibble
(exclusion), or is empty (exclusion against ``EMPTY_ROOT``).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter

from Crypto.Hash import keccak as _keccak_mod

from cowboy_node.state.store import StateStore, WriteOp

__all__ = [
    "EMPTY_ROOT",
    "ProofLeaf",
    "ProofStep",
    "StateProof",
    "StateTree",
    "TreeError",
    "TreeUpdate",
    "keccak256",
    "verify_proof",
]


# -- keccak256 --------------------------------------------------------------------------------
def _keccak_public(data: bytes) -> bytes:
    return _keccak_mod.new(digest_bits=256, data=data).digest()


def _native_keccak() -> tuple[Callable[[bytes], bytes], Callable[[], Callable[[bytes], bytes]]] | None:
    """One-shot calls into pycryptodome's native keccak (3-5x faster than ``keccak.new``).

    Returns a thread-safe hash function and a factory of faster single-thread
    ones (each owns its output buffer). They rely on pycryptodome internals, so
    they are used only when present and in agreement with the public API.
    """
    try:
        from Crypto.Util import _raw_api

        if _raw_api.backend != "cffi":
            return None
        ffi = _raw_api.ffi
        oneshot = _keccak_mod._raw_keccak_lib.keccak_oneshot
        new = ffi.new
        buffer = ffi.buffer
        from_buffer = ffi.from_buffer

        def safe(data: bytes) -> bytes:
            out = new("uint8_t[32]")
            if oneshot(data, len(data), out, 32, 64, 24, 1):
                raise ValueError("keccak failed")
            digest: bytes = buffer(out)[:]
            return digest

        def factory() -> Callable[[bytes], bytes]:
            out = bytearray(32)
            ptr = from_buffer("uint8_t[]", out)

            def single(data: bytes) -> bytes:
                if oneshot(data, len(data), ptr, 32, 64, 24, 1):
                    raise ValueError("keccak failed")
                return bytes(out)

            return single

        single = factory()
        for probe in (b"", b"abc", bytes(range(256)) * 3):
            expected = _keccak_public(probe)
            if safe(probe) != expected or single(probe) != expected:
                return None
        return safe, factory
    except Exception:
        return None


def _public_factory() -> Callable[[bytes], bytes]:
    return _keccak_public


_native = _native_keccak()
_H: Callable[[bytes], bytes] = _native[0] if _native else _keccak_public
"""Thread-safe Keccak-256 used internally; always called with ``bytes``."""
_new_hasher: Callable[[], Callable[[bytes], bytes]] = _native[1] if _native else _public_factory
"""A Keccak-256 function for use by one thread at a time (one ``prepare``)."""


def keccak256(data: bytes) -> bytes:
    """Keccak-256 (original padding, as in Ethereum) of ``data``."""
    return _H(bytes(data))


EMPTY_ROOT = _keccak_public(b"cowboy-state-empty-v1")
"""Root of the empty tree."""

_LEAF = 0
_LEAF_TAG = b"\x00"
_INTERNAL_TAG = b"\x01"
_ROOT_KEY = b"\xff"
_MAX_DEPTH = 64
_DEPTH = [bytes((d,)) for d in range(_MAX_DEPTH + 2)]
_BYTE = [bytes((b,)) for b in range(256)]
_BIT = [1 << n for n in range(16)]
_BELOW = [(1 << n) - 1 for n in range(17)]


class TreeError(RuntimeError):
    """The stored tree is inconsistent, or an update was committed out of order."""


def _nibble(kh: bytes, depth: int) -> int:
    b = kh[depth >> 1]
    return b & 15 if depth & 1 else b >> 4


def _child_path(kh: bytes, depth: int, n: int) -> bytes:
    """Storage path of the first ``depth`` nibbles of ``kh`` followed by nibble ``n``."""
    if depth & 1:
        return _DEPTH[depth + 1] + kh[:depth >> 1] + _BYTE[(kh[depth >> 1] & 0xF0) | n]
    return _DEPTH[depth + 1] + kh[:depth >> 1] + _BYTE[n << 4]


# -- update machinery ---------------------------------------------------------------------------
class _Leaf:
    """A leaf during ``prepare``; ``at`` is where it is already stored unchanged (None: must be written)."""

    __slots__ = ("at", "hash", "kh", "value", "vh")

    def __init__(self, kh: bytes, vh: bytes, value: bytes, at: bytes | None, leaf_hash: bytes) -> None:
        self.kh = kh
        self.vh = vh
        self.value = value
        self.at = at
        self.hash = leaf_hash


class _Unchanged:
    __slots__ = ()


_UNCHANGED = _Unchanged()
_Result = _Leaf | bytes | _Unchanged | None
"""A subtree after the changes: one leaf (to be placed by the caller), an internal
node's hash (node already recorded), unchanged, or empty."""
_Change = tuple[bytes, bytes | None, bytes | None]
"""(key hash, value hash, value); both None for a delete."""


class _NodeCache:
    """Bounded cache of committed node records by path (capacity 0 disables it).

    Internal nodes are *pinned* in ``inner`` (up to ``pinned`` records, never evicted): every write walks
    the internal nodes above its leaf, they are few (about one per ten keys) and small, so keeping all of
    them makes a block's tree reads one leaf per changed key, whatever the key count. Leaves go to an
    approximate LRU made of two plain dicts (cheaper than an OrderedDict at a million entries): new and
    recently used records live in ``hot``; when ``hot`` reaches half the capacity it becomes ``cold`` and
    the previous ``cold`` is dropped. A hit in ``cold`` moves the record back to ``hot``.
    """

    def __init__(self, capacity: int, pinned: int | None = None) -> None:
        self.capacity = max(0, capacity)
        self._gen = max(1, self.capacity // 2)
        self.pinned = (4 * self.capacity if pinned is None else pinned) if self.capacity else 0
        self.inner: dict[bytes, bytes] = {}
        self.hot: dict[bytes, bytes] = {}
        self.cold: dict[bytes, bytes] = {}

    def get(self, path: bytes) -> bytes | None:
        rec = self.inner.get(path)
        if rec is not None:
            return rec
        rec = self.hot.get(path)
        if rec is None:
            rec = self.cold.get(path)
            if rec is not None:
                self.put(path, rec)
        return rec

    def put(self, path: bytes, rec: bytes) -> None:
        if not self.capacity:
            return
        if rec[0] != _LEAF and (len(self.inner) < self.pinned or path in self.inner):
            self.inner[path] = rec
            return
        self.inner.pop(path, None)  # a path that held an internal node may now hold a leaf
        hot = self.hot
        hot[path] = rec
        if len(hot) >= self._gen:
            self.cold = hot
            self.hot = {}

    def drop(self, path: bytes) -> None:
        self.inner.pop(path, None)
        self.hot.pop(path, None)
        self.cold.pop(path, None)

    def apply(self, nodes: Mapping[bytes, bytes], gone: tuple[bytes, ...], ops: tuple[WriteOp, ...],
              root_key: bytes) -> None:
        """Adopt a committed update (``nodes``/``gone``, or ``ops`` when those are absent)."""
        if not nodes and not gone:  # an update built by hand: derive from ops
            nodes = {k: v for k, v in ops if v is not None and k != root_key}
            gone = tuple(k for k, v in ops if v is None)
        for key in gone:
            self.drop(key)
        if not self.capacity:
            return
        inner, hot, cold, pinned = self.inner, self.hot, self.cold, self.pinned
        for path, rec in nodes.items():
            if rec[0] != _LEAF and (len(inner) < pinned or path in inner):
                inner[path] = rec
                if path in hot or path in cold:  # it held a leaf before
                    hot.pop(path, None)
                    cold.pop(path, None)
            else:
                if path in inner:
                    del inner[path]
                hot[path] = rec
        if len(hot) >= self._gen:
            self.cold = hot
            self.hot = {}

    def clear(self) -> None:
        self.inner = {}
        self.hot = {}
        self.cold = {}

    def __len__(self) -> int:
        return len(self.inner) + len(self.hot) + len(self.cold)


class _Batch:
    """Node writes and deletes accumulated by one ``prepare``.

    Every node recorded in ``writes`` is a node of the new tree at its final
    path; ``deletes`` holds paths whose old node is gone or moved (a write to
    the same path wins).
    """

    __slots__ = ("cache", "deletes", "dtab", "h", "skip", "store_get", "writes")

    def __init__(self, cache: _NodeCache, store_get: Callable[[bytes], bytes | None], dtab: list[bytes]) -> None:
        self.cache = cache
        self.store_get = store_get
        self.dtab = dtab
        self.skip = len(dtab[0])
        self.h = _new_hasher()
        self.writes: dict[bytes, bytes] = {}
        self.deletes: set[bytes] = set()

    def read(self, path: bytes) -> bytes:
        """Committed node at ``path`` (it must exist)."""
        cache = self.cache
        rec = cache.inner.get(path)
        if rec is not None:
            return rec
        rec = cache.hot.get(path)
        if rec is None:
            rec = cache.cold.get(path)
            if rec is None:
                rec = self.store_get(path)
                if rec is None:
                    raise TreeError(f"state tree node {path.hex()} is missing")
            cache.put(path, rec)
        return rec

    def stored_leaf(self, rec: bytes, at: bytes) -> _Leaf:
        return _Leaf(rec[1:33], rec[33:65], rec[65:], at, self.h(rec[:65]))

    def new_leaf(self, kh: bytes, vh: bytes, value: bytes) -> _Leaf:
        return _Leaf(kh, vh, value, None, self.h(_LEAF_TAG + kh + vh))

    def place(self, leaf: _Leaf, path: bytes) -> None:
        """Record ``leaf`` at its final ``path``."""
        if leaf.at == path:
            self.deletes.discard(path)
            return
        self.writes[path] = _LEAF_TAG + leaf.kh + leaf.vh + leaf.value
        if leaf.at is not None:
            self.deletes.add(leaf.at)

    # `items` is sorted by key hash; items[lo:hi] share the first `depth` nibbles and
    # `here` is the storage path of that prefix.
    def update(self, depth: int, here: bytes, rec: bytes | None, items: list[_Change], lo: int,
               hi: int) -> _Result:
        """Apply items[lo:hi] to the subtree ``rec`` (None: empty) stored at ``here``."""
        if rec is None:
            leaves = [self.new_leaf(kh, vh, v) for kh, vh, v in items[lo:hi] if v is not None and vh is not None]
            if len(leaves) <= 1:
                return leaves[0] if leaves else _UNCHANGED
            return self.build(depth, here, leaves)
        if rec[0] == _LEAF:
            return self.update_leaf(depth, here, rec, items, lo, hi)
        return self.update_internal(depth, here, rec, items, lo, hi)

    def update_leaf(self, depth: int, here: bytes, rec: bytes, items: list[_Change], lo: int,
                    hi: int) -> _Result:
        if hi - lo == 1:
            return self.leaf1(depth, here, rec, items[lo])
        kh0 = rec[1:33]
        vh0 = rec[33:65]
        leaves: list[_Leaf] = []
        found = False
        unchanged = True
        for kh, vh, v in items[lo:hi]:
            if kh == kh0:
                found = True
                if v is None or vh is None:
                    unchanged = False
                elif vh == vh0:
                    leaves.append(self.stored_leaf(rec, here))
                else:
                    unchanged = False
                    leaves.append(self.new_leaf(kh, vh, v))
            elif v is not None and vh is not None:
                unchanged = False
                leaves.append(self.new_leaf(kh, vh, v))
        if unchanged:
            return _UNCHANGED
        if not found:
            leaves.insert(bisect_left([x.kh for x in leaves], kh0), self.stored_leaf(rec, here))
        self.deletes.add(here)
        if len(leaves) <= 1:
            return leaves[0] if leaves else None
        return self.build(depth, here, leaves)

    def leaf1(self, depth: int, here: bytes, rec: bytes, item: _Change) -> _Result:
        """One change meets the leaf ``rec`` stored at ``here`` (the common case)."""
        kh, vh, v = item
        kh0 = rec[1:33]
        if kh == kh0:
            if vh is None or v is None:
                self.deletes.add(here)
                return None
            if vh == rec[33:65]:
                return _UNCHANGED
            self.deletes.add(here)  # the new leaf may end up elsewhere
            return self.new_leaf(kh, vh, v)
        if vh is None or v is None:
            return _UNCHANGED
        self.deletes.add(here)
        old = self.stored_leaf(rec, here)
        new = self.new_leaf(kh, vh, v)
        return self.build(depth, here, [old, new] if kh0 < kh else [new, old])

    def single(self, depth: int, here: bytes, rec: bytes, item: _Change) -> _Result:
        """One change below the internal node ``rec`` at ``here``: walk down, then splice up."""
        kh, vh, v = item
        read = self.read
        dtab = self.dtab
        skip = self.skip
        frames: list[tuple[int, bytes, bytes, int, int, bytes]] = []
        r: _Result
        while True:
            bitmap = (rec[1] << 8) | rec[2]
            if depth & 1:
                n = kh[depth >> 1] & 15
                cpath = dtab[depth + 1] + here[skip:-1] + _BYTE[here[-1] | n]
            else:
                n = kh[depth >> 1] >> 4
                cpath = dtab[depth + 1] + here[skip:] + _BYTE[n << 4]
            frames.append((depth, here, rec, bitmap, n, cpath))
            if not bitmap & _BIT[n]:
                if v is None or vh is None:
                    return _UNCHANGED
                r = self.new_leaf(kh, vh, v)
                break
            child = read(cpath)
            depth += 1
            if child[0] == _LEAF:
                r = self.leaf1(depth, cpath, child, item)
                if isinstance(r, _Unchanged):
                    return r
                break
            here = cpath
            rec = child
        writes = self.writes
        h = self.h
        for depth, here, rec, bitmap, n, cpath in reversed(frames):
            bit = _BIT[n]
            others = bitmap & ~bit
            if r is None:
                if others & (others - 1):  # two or more children remain: cut child n out
                    off = 3 + 32 * (bitmap & _BELOW[n]).bit_count()
                    out = _INTERNAL_TAG + others.to_bytes(2, "big") + rec[3:off] + rec[off + 32:]
                    writes[here] = out
                    r = h(out)
                else:  # may leave a lone leaf that moves up
                    r = self.finish(depth, here, rec, bitmap, [(n, r)])
            elif others:  # child n stays next to other children: splice its hash in
                if isinstance(r, _Leaf):
                    self.place(r, cpath)
                    hn = r.hash
                else:
                    assert isinstance(r, bytes)
                    hn = r
                off = 3 + 32 * (bitmap & _BELOW[n]).bit_count()
                if bitmap & bit:
                    out = rec[:off] + hn + rec[off + 32:]
                else:
                    out = _INTERNAL_TAG + (bitmap | bit).to_bytes(2, "big") + rec[3:off] + hn + rec[off:]
                writes[here] = out
                r = h(out)
            else:  # child n is the only child
                assert not isinstance(r, _Unchanged)
                r = self.finish(depth, here, rec, bitmap, [(n, r)])
        return r

    def update_internal(self, depth: int, here: bytes, rec: bytes, items: list[_Change], lo: int,
                        hi: int) -> _Result:
        if hi - lo == 1:
            return self.single(depth, here, rec, items[lo])
        bitmap = (rec[1] << 8) | rec[2]
        half = depth >> 1
        odd = depth & 1
        # a child's path is `cbase` plus one byte holding the last nibble (pair)
        if odd:
            cbase = self.dtab[depth + 1] + here[self.skip:-1]
            hib = here[-1]
        else:
            cbase = self.dtab[depth + 1] + here[self.skip:]
            hib = 0
        read = self.read
        changed: list[tuple[int, _Leaf | bytes | None]] = []
        i = lo
        while i < hi:
            b = items[i][0][half]
            n = b & 15 if odd else b >> 4
            j = i + 1
            if odd:
                while j < hi and items[j][0][half] & 15 == n:
                    j += 1
            else:
                while j < hi and items[j][0][half] >> 4 == n:
                    j += 1
            cpath = cbase + _BYTE[hib | n if odd else n << 4]
            if bitmap & _BIT[n]:
                child = read(cpath)
                if child[0] == _LEAF:
                    r = self.update_leaf(depth + 1, cpath, child, items, i, j)
                else:
                    r = self.update_internal(depth + 1, cpath, child, items, i, j)
            else:
                r = self.update(depth + 1, cpath, None, items, i, j)
            if not isinstance(r, _Unchanged):
                changed.append((n, r))
            i = j
        if not changed:
            return _UNCHANGED
        return self.finish(depth, here, rec, bitmap, changed)

    def finish(self, depth: int, here: bytes, rec: bytes, bitmap: int,
               changed: list[tuple[int, _Leaf | bytes | None]]) -> _Leaf | bytes | None:
        """Rebuild the internal node ``rec`` at ``here`` with the ``changed`` children."""
        if depth & 1:
            cbase = self.dtab[depth + 1] + here[self.skip:-1]
            hib = here[-1]
            odd = True
        else:
            cbase = self.dtab[depth + 1] + here[self.skip:]
            hib = 0
            odd = False
        new_bitmap = bitmap
        for n, r in changed:
            if r is None:
                new_bitmap &= ~_BIT[n]
            else:
                new_bitmap |= _BIT[n]
        if not new_bitmap:
            self.deletes.add(here)
            return None
        if not new_bitmap & (new_bitmap - 1):  # exactly one child left
            n1 = new_bitmap.bit_length() - 1
            only: _Leaf | bytes | None = None
            for n, r in changed:
                if n == n1:
                    only = r
                    break
            else:
                cpath = cbase + _BYTE[hib | n1 if odd else n1 << 4]
                child = self.read(cpath)
                if child[0] == _LEAF:
                    only = self.stored_leaf(child, cpath)
            if isinstance(only, _Leaf):
                self.deletes.add(here)  # a lone leaf moves up
                return only
        if new_bitmap == bitmap:  # same children: splice the new hashes in
            buf = bytearray(rec)
            for n, r in changed:
                off = 3 + 32 * (bitmap & _BELOW[n]).bit_count()
                if isinstance(r, _Leaf):
                    self.place(r, cbase + _BYTE[hib | n if odd else n << 4])
                    buf[off:off + 32] = r.hash
                elif r is not None:
                    buf[off:off + 32] = r
            out = bytes(buf)
            self.writes[here] = out
            return self.h(out)
        new_hashes: dict[int, bytes] = {}
        for n, r in changed:
            if isinstance(r, _Leaf):
                self.place(r, cbase + _BYTE[hib | n if odd else n << 4])
                new_hashes[n] = r.hash
            elif r is not None:
                new_hashes[n] = r
        parts = [_INTERNAL_TAG, new_bitmap.to_bytes(2, "big")]
        off = 3
        for n in range(16):
            bit = _BIT[n]
            if new_bitmap & bit:
                h = new_hashes.get(n)
                parts.append(rec[off:off + 32] if h is None else h)
            if bitmap & bit:
                off += 32
        out = b"".join(parts)
        self.writes[here] = out
        return self.h(out)

    def build(self, depth: int, here: bytes, leaves: list[_Leaf]) -> bytes:
        """The canonical internal node at ``here`` for ``leaves`` (>= 2, sorted by key hash)."""
        if depth >= _MAX_DEPTH:
            raise TreeError("two distinct keys with the same keccak256 hash")
        half = depth >> 1
        odd = depth & 1
        if odd:
            cbase = self.dtab[depth + 1] + here[self.skip:-1]
            hib = here[-1]
        else:
            cbase = self.dtab[depth + 1] + here[self.skip:]
            hib = 0
        bitmap = 0
        hashes: list[bytes] = []
        count = len(leaves)
        i = 0
        while i < count:
            b = leaves[i].kh[half]
            n = b & 15 if odd else b >> 4
            j = i + 1
            while j < count:
                b = leaves[j].kh[half]
                if (b & 15 if odd else b >> 4) != n:
                    break
                j += 1
            bitmap |= _BIT[n]
            cpath = cbase + _BYTE[hib | n if odd else n << 4]
            if j == i + 1:
                leaf = leaves[i]
                self.place(leaf, cpath)
                hashes.append(leaf.hash)
            else:
                hashes.append(self.build(depth + 1, cpath, leaves[i:j]))
            i = j
        out = _INTERNAL_TAG + bitmap.to_bytes(2, "big") + b"".join(hashes)
        self.writes[here] = out
        return self.h(out)


# -- public API ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeUpdate:
    """What :meth:`StateTree.prepare` computed: the new root and the store ops producing it."""

    root: bytes
    """State root after the changes."""
    ops: tuple[WriteOp, ...]
    """Node deletes, node writes and the stored root pointer (each key once)."""
    base_root: bytes = field(default=b"", compare=False)
    """Committed root the update was computed against (``commit`` checks it)."""
    nodes: Mapping[bytes, bytes] = field(default_factory=dict, compare=False, repr=False)
    """The node writes of ``ops`` by store key (``commit`` caches them; do not modify)."""
    gone: tuple[bytes, ...] = field(default=(), compare=False, repr=False)
    """The node deletes of ``ops``."""


@dataclass(frozen=True)
class ProofStep:
    """One internal node on the proof path: its bitmap and the hashes of its other children."""

    bitmap: int
    siblings: tuple[bytes, ...]


@dataclass(frozen=True)
class ProofLeaf:
    """The leaf a proof path ends at (the key's own, or another key's for exclusion)."""

    key_hash: bytes
    value_hash: bytes


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def _unhex(x: object, what: str, size: int | None = None) -> bytes:
    if not isinstance(x, str):
        raise ValueError(f"{what}: expected a hex string")
    s = x[2:] if x.startswith(("0x", "0X")) else x
    try:
        out = bytes.fromhex(s)
    except ValueError as e:
        raise ValueError(f"{what}: invalid hex") from e
    if size is not None and len(out) != size:
        raise ValueError(f"{what}: expected {size} bytes, got {len(out)}")
    return out


@dataclass(frozen=True)
class StateProof:
    """Inclusion (``value`` set) or exclusion (``value`` None) proof for ``key``."""

    key: bytes
    value: bytes | None
    steps: tuple[ProofStep, ...]
    """Internal nodes on the path, root first."""
    leaf: ProofLeaf | None
    """The leaf ending the path; None when it ends at an empty slot or the tree is empty."""

    def to_json(self) -> dict[str, object]:
        """JSON-ready form (byte strings as ``0x`` hex)."""
        return {
            "key": _hex(self.key),
            "value": None if self.value is None else _hex(self.value),
            "steps": [{"bitmap": s.bitmap, "siblings": [_hex(h) for h in s.siblings]} for s in self.steps],
            "leaf": None if self.leaf is None else {
                "key_hash": _hex(self.leaf.key_hash), "value_hash": _hex(self.leaf.value_hash)},
        }

    @staticmethod
    def from_json(obj: object) -> StateProof:
        """Parse :meth:`to_json` output; raises ValueError when malformed."""
        if not isinstance(obj, dict):
            raise ValueError("proof: expected an object")
        key = _unhex(obj.get("key"), "key")
        raw_value = obj.get("value")
        value = None if raw_value is None else _unhex(raw_value, "value")
        raw_steps = obj.get("steps")
        if not isinstance(raw_steps, list) or len(raw_steps) > _MAX_DEPTH:
            raise ValueError("steps: expected an array of at most 64 steps")
        steps: list[ProofStep] = []
        for i, s in enumerate(raw_steps):
            if not isinstance(s, dict):
                raise ValueError(f"steps[{i}]: expected an object")
            bitmap = s.get("bitmap")
            if not isinstance(bitmap, int) or isinstance(bitmap, bool) or not 0 <= bitmap <= 0xFFFF:
                raise ValueError(f"steps[{i}].bitmap: expected an integer in 0..65535")
            sibs = s.get("siblings")
            if not isinstance(sibs, list) or len(sibs) > 16:
                raise ValueError(f"steps[{i}].siblings: expected an array of at most 16 hashes")
            steps.append(ProofStep(bitmap, tuple(_unhex(h, f"steps[{i}].siblings", 32) for h in sibs)))
        raw_leaf = obj.get("leaf")
        leaf = None
        if raw_leaf is not None:
            if not isinstance(raw_leaf, dict):
                raise ValueError("leaf: expected an object or null")
            leaf = ProofLeaf(_unhex(raw_leaf.get("key_hash"), "leaf.key_hash", 32),
                             _unhex(raw_leaf.get("value_hash"), "leaf.value_hash", 32))
        return StateProof(key, value, tuple(steps), leaf)


def verify_proof(root: bytes, proof: StateProof) -> bool:
    """True iff ``proof`` shows ``proof.key -> proof.value`` (absence when None) under ``root``."""
    kh = _H(bytes(proof.key))
    steps = proof.steps
    m = len(steps)
    if m > _MAX_DEPTH:
        return False
    current: bytes | None
    if proof.leaf is None:
        if proof.value is not None:
            return False
        if m == 0:
            return root == EMPTY_ROOT
        current = None
    else:
        lk, lv = bytes(proof.leaf.key_hash), bytes(proof.leaf.value_hash)
        if len(lk) != 32 or len(lv) != 32:
            return False
        if proof.value is not None:
            if lk != kh or lv != _H(bytes(proof.value)):
                return False
        elif lk == kh:
            return False
        if any(_nibble(lk, d) != _nibble(kh, d) for d in range(m)):
            return False  # a leaf at this position must share the path
        current = _H(_LEAF_TAG + lk + lv)
    for d in range(m - 1, -1, -1):
        step = steps[d]
        bitmap = step.bitmap
        if not isinstance(bitmap, int) or not 0 < bitmap <= 0xFFFF:
            return False
        n = _nibble(kh, d)
        has = bool(bitmap & _BIT[n])
        if has != (current is not None):
            return False  # only the last step may lack the path's child
        if len(step.siblings) != bitmap.bit_count() - has:
            return False
        parts = [_INTERNAL_TAG, bitmap.to_bytes(2, "big")]
        sib = iter(step.siblings)
        for c in range(16):
            if bitmap & _BIT[c]:
                h = current if c == n else next(sib)
                if h is None or len(h) != 32:
                    return False
                parts.append(bytes(h))
        current = _H(b"".join(parts))
    return current == root


class StateTree:
    """The state tree persisted under ``prefix`` in ``store``.

    :meth:`prepare` computes the effect of changes against the committed tree
    without writing; the caller writes ``update.ops`` (inside its own atomic
    batch) and then calls :meth:`commit`. Until then the tree keeps answering
    for the previously committed state. ``cache_size`` bounds the leaf-record
    cache; internal nodes are pinned in memory up to ``4 × cache_size`` of them
    (0 disables both); results never depend on either.
    """

    def __init__(self, store: StateStore, prefix: bytes, *, cache_size: int = 1_000_000) -> None:
        self._store = store
        self._prefix = bytes(prefix)
        self._dtab = [self._prefix + d for d in _DEPTH]
        self._root_key = self._prefix + _ROOT_KEY
        self._cache = _NodeCache(cache_size)
        self._lock = threading.Lock()
        self._root = self._load_root()

    def _load_root(self) -> bytes:
        raw = self._store.get(self._root_key)
        if raw is None:
            return EMPTY_ROOT
        if len(raw) != 32:
            raise TreeError("stored state root pointer is corrupt")
        return raw

    def _read(self, key: bytes) -> bytes:
        rec = self._cache.get(key)
        if rec is None:
            rec = self._store.get(key)
            if rec is None:
                raise TreeError(f"state tree node {key.hex()} is missing")
            self._cache.put(key, rec)
        return rec

    def root(self) -> bytes:
        """Committed root (EMPTY_ROOT when the tree is empty)."""
        return self._root

    def prepare(self, changes: Mapping[bytes, bytes | None]) -> TreeUpdate:
        """New root and store ops for ``changes`` (None deletes) against the committed tree.

        Writes nothing. Deleting an absent key is a no-op. All changes are
        applied in one walk, so each touched node is re-hashed once.
        """
        h = _new_hasher()
        items: list[_Change] = []
        for key, value in changes.items():
            if value is None:
                items.append((h(bytes(key)), None, None))
            else:
                v = bytes(value)
                items.append((h(bytes(key)), h(v), v))
        items.sort(key=itemgetter(0))
        for i in range(1, len(items)):
            if items[i - 1][0] == items[i][0]:
                raise TreeError("two distinct keys with the same keccak256 hash")
        base = self._root
        batch = _Batch(self._cache, self._store.get, self._dtab)
        root = base
        if items:
            top = self._dtab[0]
            rec = None if base == EMPTY_ROOT else batch.read(top)
            r = batch.update(0, top, rec, items, 0, len(items))
            if r is None:
                root = EMPTY_ROOT
            elif isinstance(r, _Leaf):
                batch.place(r, top)
                root = r.hash
            elif isinstance(r, bytes):
                root = r
        writes = batch.writes
        gone = tuple(sorted(k for k in batch.deletes if k not in writes))
        # Deterministic order: sorted deletes, then writes in walk order, then the root pointer.
        ops: list[WriteOp] = [(k, None) for k in gone]
        ops.extend(writes.items())
        ops.append((self._root_key, root))
        return TreeUpdate(root, tuple(ops), base, writes, gone)

    def commit(self, update: TreeUpdate) -> None:
        """Adopt ``update`` as the committed state; call after its ops were written."""
        with self._lock:
            if update.base_root and update.base_root != self._root:
                self._cache.clear()
                self._root = self._load_root()
                raise TreeError("tree update was prepared against a different committed root")
            if update.nodes or update.gone or not update.base_root:
                self._cache.apply(update.nodes, update.gone, update.ops, self._root_key)
            self._root = update.root

    def clear_cache(self) -> None:
        """Forget cached nodes (they are re-read from the store on demand)."""
        self._cache.clear()

    def prove(self, key: bytes) -> StateProof:
        """Inclusion or exclusion proof for ``key`` against :meth:`root`."""
        key = bytes(key)
        if self._root == EMPTY_ROOT:
            return StateProof(key, None, (), None)
        kh = _H(key)
        rec = self._read(self._dtab[0])
        steps: list[ProofStep] = []
        depth = 0
        while True:
            if rec[0] == _LEAF:
                lk, lv = rec[1:33], rec[33:65]
                return StateProof(key, rec[65:] if lk == kh else None, tuple(steps), ProofLeaf(lk, lv))
            bitmap = (rec[1] << 8) | rec[2]
            n = _nibble(kh, depth)
            sibs: list[bytes] = []
            off = 3
            for c in range(16):
                if bitmap & _BIT[c]:
                    if c != n:
                        sibs.append(rec[off:off + 32])
                    off += 32
            steps.append(ProofStep(bitmap, tuple(sibs)))
            if not bitmap & _BIT[n]:
                return StateProof(key, None, tuple(steps), None)
            rec = self._read(self._prefix + _child_path(kh, depth, n))
            depth += 1

    def get(self, key: bytes) -> bytes | None:
        """Committed value of ``key`` read through the tree (for tools and tests)."""
        return self.prove(key).value
