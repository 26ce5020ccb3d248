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
Internal nodes live in the store under ``prefix ‖ path``: ``path`` is one byte
holding the nibble count, then the nibbles packed two per byte (a final odd
nibble in the high half, low half zero). An internal record is the hashed bytes
``0x01 ‖ bitmap ‖ hashes`` followed by ``leafmap ‖ khs``: ``leafmap`` (big-endian
u16, a subset of ``bitmap``) marks the children that are leaves and ``khs`` are
those leaves' key hashes ``H(k)`` in nibble order. Leaves are stored by key
hash, not by position: ``prefix ‖ 0xfe ‖ H(k)`` holds ``H(v) ‖ v`` (so a proof
can return the value). The root pointer ``prefix ‖ 0xff`` holds the root hash,
followed by the root leaf's key hash when the root is a single leaf.

So ``prepare`` never reads a leaf record (a parent knows each leaf child's key
hash and leaf hash), and a leaf that moves when a sibling is inserted or
deleted is neither rewritten nor re-hashed; only a changed key's own leaf
record is written. ``prepare`` reads only the internal nodes on the paths of
the changed keys (``O(changes · log16(keys))``, from the pinned node cache when
warm) and re-hashes each touched internal node once.

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

from cowboy_node.state.kv_store import StateStore, WriteOp

__all__ = [
    "EMPTY_ROOT",
    "ProofLeaf",
    "ProofStep",
    "StateProof",
    "StateTree",
    "TreeError",
    "TreeUpdate",
    "keccak256",
    "new_hasher",
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

            def prefix(data: bytes, size: int) -> bytes:
                if not 0 <= size <= len(data):
                    raise ValueError("keccak prefix out of range")
                if oneshot(data, size, ptr, 32, 64, 24, 1):
                    raise ValueError("keccak failed")
                return bytes(out)

            single.prefix = prefix  # type: ignore[attr-defined]
            return single

        single = factory()
        for probe in (b"", b"abc", bytes(range(256)) * 3):
            expected = _keccak_public(probe)
            if safe(probe) != expected or single(probe) != expected:
                return None
            if _prefix_hasher(single)(probe + b"tail", len(probe)) != expected:
                return None
        return safe, factory
    except Exception:
        return None


def _public_factory() -> Callable[[bytes], bytes]:
    return _keccak_public


def _prefix_hasher(h: Callable[[bytes], bytes]) -> Callable[[bytes, int], bytes]:
    """``f(data, size) == h(data[:size])``: the native hasher's variant that hashes the first ``size``
    bytes in place (a record's hashed part is its prefix; slicing it off would copy ~500 bytes per node),
    else a slicing wrapper around ``h``."""
    prefix: Callable[[bytes, int], bytes] | None = getattr(h, "prefix", None)
    if prefix is not None:
        return prefix

    def sliced(data: bytes, size: int) -> bytes:
        return h(data[:size])

    return sliced


_native = _native_keccak()
_H: Callable[[bytes], bytes] = _native[0] if _native else _keccak_public
"""Thread-safe Keccak-256 used internally; always called with ``bytes``."""
_new_hasher: Callable[[], Callable[[bytes], bytes]] = _native[1] if _native else _public_factory
"""A Keccak-256 function for use by one thread at a time (one ``prepare``)."""


def keccak256(data: bytes) -> bytes:
    """Keccak-256 (original padding, as in Ethereum) of ``data``."""
    return _H(bytes(data))


def new_hasher() -> Callable[[bytes], bytes]:
    """A Keccak-256 function for one thread at a time: the same digests as :func:`keccak256`, faster over many small
    inputs (it owns its output buffer). Takes ``bytes`` only."""
    return _new_hasher()


EMPTY_ROOT = _keccak_public(b"cowboy-state-empty-v1")
"""Root of the empty tree."""

_LEAF_TAG = b"\x00"
_INTERNAL_TAG = b"\x01"
_ROOT_KEY = b"\xff"
_LEAF_KEY = b"\xfe"
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


def _checked(path: bytes, rec: bytes | None) -> bytes:
    """``rec`` read from the store at ``path``, if it is a well-formed internal record (else TreeError).

    Checked once per store read (cached records were checked when read or built); catches a missing node,
    a damaged record and a store written with another node layout.
    """
    if rec is None:
        raise TreeError(f"state tree node {path.hex()} is missing")
    if len(rec) >= 5 and rec[0] == 1:
        end = 3 + 32 * ((rec[1] << 8) | rec[2]).bit_count()
        if len(rec) >= end + 2:
            leafmap = (rec[end] << 8) | rec[end + 1]
            bitmap = (rec[1] << 8) | rec[2]
            if bitmap and not leafmap & ~bitmap and len(rec) == end + 2 + 32 * leafmap.bit_count():
                return rec
    raise TreeError(f"state tree node {path.hex()} is corrupt (or written with another node layout)")


# -- update machinery ---------------------------------------------------------------------------
class _Leaf:
    """A leaf as its parent sees it: the key hash and the leaf hash (its record lives at ``L ‖ kh``)."""

    __slots__ = ("hash", "kh")

    def __init__(self, kh: bytes, leaf_hash: bytes) -> None:
        self.kh = kh
        self.hash = leaf_hash


class _Unchanged:
    __slots__ = ()


_UNCHANGED = _Unchanged()
_Result = _Leaf | bytes | _Unchanged | None
"""A subtree after the changes: one leaf (the caller puts it in its slot), an internal
node's hash (node already recorded), unchanged, or empty."""
_Change = tuple[bytes, bytes | None, bytes | None]
"""(key hash, value hash, value); both None for a delete."""


def _splice(rec: bytes, changed: list[tuple[int, _Leaf | bytes | None]]) -> tuple[bytes, int]:
    """The internal record ``rec`` with its children at the ``changed`` nibbles (ascending) replaced
    (None: removed), in one pass; returns (whole record, length of its hashed part).

    The result may have no child or a lone leaf child; the caller decides what that means.
    """
    bitmap = old_b = (rec[1] << 8) | rec[2]
    end = 3 + 32 * bitmap.bit_count()
    leafmap = old_l = (rec[end] << 8) | rec[end + 1]
    hparts: list[bytes] = [_INTERNAL_TAG, b""]
    kparts: list[bytes] = [b""]
    hpos = 3
    kpos = end + 2
    for n, r in changed:
        bit = _BIT[n]
        off = 3 + 32 * (old_b & _BELOW[n]).bit_count()
        koff = end + 2 + 32 * (old_l & _BELOW[n]).bit_count()
        hparts.append(rec[hpos:off])
        kparts.append(rec[kpos:koff])
        hpos = off + 32 if old_b & bit else off
        kpos = koff + 32 if old_l & bit else koff
        if r is None:
            bitmap &= ~bit
            leafmap &= ~bit
        elif isinstance(r, _Leaf):
            bitmap |= bit
            leafmap |= bit
            hparts.append(r.hash)
            kparts.append(r.kh)
        else:
            bitmap |= bit
            leafmap &= ~bit
            hparts.append(r)
    hparts.append(rec[hpos:end])
    kparts.append(rec[kpos:])
    hparts[1] = bitmap.to_bytes(2, "big")
    kparts[0] = leafmap.to_bytes(2, "big")
    hparts.extend(kparts)
    return b"".join(hparts), 3 + 32 * bitmap.bit_count()


class _NodeCache:
    """Bounded cache of committed internal-node records by path (capacity 0 disables it).

    Leaf records are never needed by ``prepare`` (a parent record carries its leaf children's key
    hashes), so only internal nodes are cached. They are *pinned* in ``inner`` (up to ``capacity``
    records, never evicted): every write walks the internal nodes above its slot, and they are few
    (about one per three keys) and small. Past that bound, records go to an approximate LRU of up to
    ``capacity`` more, made of two plain dicts (cheaper than an OrderedDict): new and recently used
    records live in ``hot``; when ``hot`` reaches half the capacity it becomes ``cold`` and the previous
    ``cold`` is dropped. A hit in ``cold`` moves the record back to ``hot``.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._gen = max(1, self.capacity // 2)
        self.pinned = self.capacity
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
        inner = self.inner
        if len(inner) < self.pinned or path in inner:
            inner[path] = rec
            return
        hot = self.hot
        hot[path] = rec
        if len(hot) >= self._gen:
            self.cold = hot
            self.hot = {}

    def drop(self, path: bytes) -> None:
        self.inner.pop(path, None)
        self.hot.pop(path, None)
        self.cold.pop(path, None)

    def apply(self, nodes: Mapping[bytes, bytes], gone: tuple[bytes, ...]) -> None:
        """Adopt a committed update's internal-node writes ``nodes`` and deletes ``gone``."""
        for key in gone:
            self.drop(key)
        if not self.capacity:
            return
        inner, hot, pinned = self.inner, self.hot, self.pinned
        if len(inner) + len(nodes) <= pinned:  # the common case: room for all of them
            inner.update(nodes)
            if hot or self.cold:
                for path in nodes:
                    hot.pop(path, None)
                    self.cold.pop(path, None)
            return
        for path, rec in nodes.items():
            if len(inner) < pinned or path in inner:
                inner[path] = rec
            else:
                hot[path] = rec
                self.cold.pop(path, None)
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

    ``writes``/``deletes`` are internal-node records by path: every record in ``writes`` is a node of
    the new tree at its final path; ``deletes`` holds paths whose node is gone (a write to the same path
    wins). ``leaf_ops`` are the leaf-record writes and deletes by store key, one per changed key.
    """

    __slots__ = ("cache", "deletes", "dtab", "h", "hp", "leaf_ops", "lkey", "skip", "store_get", "writes")

    def __init__(self, cache: _NodeCache, store_get: Callable[[bytes], bytes | None], dtab: list[bytes],
                 leaf_prefix: bytes) -> None:
        self.cache = cache
        self.store_get = store_get
        self.dtab = dtab
        self.skip = len(dtab[0])
        self.lkey = leaf_prefix
        self.h = _new_hasher()
        self.hp = _prefix_hasher(self.h)
        self.writes: dict[bytes, bytes] = {}
        self.deletes: set[bytes] = set()
        self.leaf_ops: dict[bytes, bytes | None] = {}

    def read(self, path: bytes) -> bytes:
        """Committed internal node at ``path`` (it must exist)."""
        cache = self.cache
        rec = cache.inner.get(path)
        if rec is not None:
            return rec
        rec = cache.hot.get(path)
        if rec is None:
            rec = cache.cold.get(path)
            if rec is None:
                rec = _checked(path, self.store_get(path))
            cache.put(path, rec)
        return rec

    def child_path(self, depth: int, here: bytes, n: int) -> bytes:
        """Storage path of child ``n`` of the node at ``here`` (``depth`` nibbles)."""
        if depth & 1:
            return self.dtab[depth + 1] + here[self.skip:-1] + _BYTE[here[-1] | n]
        return self.dtab[depth + 1] + here[self.skip:] + _BYTE[n << 4]

    def new_leaf(self, kh: bytes, vh: bytes, value: bytes) -> _Leaf:
        """A new or changed leaf: records its leaf-record write."""
        self.leaf_ops[self.lkey + kh] = vh + value
        return _Leaf(kh, self.h(_LEAF_TAG + kh + vh))

    # `items` is sorted by key hash; items[lo:hi] share the first `depth` nibbles and
    # `here` is the storage path of that prefix.
    def update_empty(self, depth: int, here: bytes, items: list[_Change], lo: int, hi: int) -> _Result:
        """Apply items[lo:hi] to the empty slot at ``here`` (deletes are no-ops there)."""
        leaves = [self.new_leaf(kh, vh, v) for kh, vh, v in items[lo:hi] if v is not None and vh is not None]
        if len(leaves) <= 1:
            return leaves[0] if leaves else _UNCHANGED
        return self.build(depth, here, leaves)

    def update_leaf(self, depth: int, here: bytes, kh0: bytes, h0: bytes, items: list[_Change], lo: int,
                    hi: int) -> _Result:
        """Apply items[lo:hi] to the slot at ``here`` holding the leaf (``kh0``, hash ``h0``)."""
        leaves: list[_Leaf] = []
        found = False
        changed = False
        for kh, vh, v in items[lo:hi]:
            if kh == kh0:
                found = True
                if v is None or vh is None:
                    self.leaf_ops[self.lkey + kh] = None
                    changed = True
                    continue
                nh = self.h(_LEAF_TAG + kh + vh)
                if nh != h0:
                    self.leaf_ops[self.lkey + kh] = vh + v
                    changed = True
                leaves.append(_Leaf(kh, nh))
            elif v is not None and vh is not None:
                changed = True
                leaves.append(self.new_leaf(kh, vh, v))
        if not changed:
            return _UNCHANGED
        if not found:
            leaves.insert(bisect_left([x.kh for x in leaves], kh0), _Leaf(kh0, h0))
        if len(leaves) <= 1:
            return leaves[0] if leaves else None
        return self.build(depth, here, leaves)

    def single(self, depth: int, here: bytes, rec: bytes, item: _Change) -> _Result:
        """One change below the internal node ``rec`` at ``here``: walk down, then splice up.

        The common cases -- a new leaf in an empty slot, a leaf's new value, a leaf split by a new key --
        leave every node above the bottom one with the same shape and only one child hash changed, so
        those are rebuilt by replacing 32 bytes of their record. A delete goes through :meth:`finish`
        at every level (nodes may disappear or collapse).
        """
        kh = item[0]
        cached = self.cache.inner.get
        read = self.read
        dtab = self.dtab
        # (path, record, child nibble, offset of that child's hash, end of the hashed part) per level
        frames: list[tuple[bytes, bytes, int, int, int]] = []
        while True:
            half = depth >> 1
            n = kh[half] & 15 if depth & 1 else kh[half] >> 4
            bitmap = (rec[1] << 8) | rec[2]
            end = 3 + 32 * bitmap.bit_count()
            off = 3 + 32 * (bitmap & _BELOW[n]).bit_count()
            frames.append((here, rec, n, off, end))
            bit = _BIT[n]
            if not bitmap & bit or ((rec[end] << 8) | rec[end + 1]) & bit:
                break  # slot n is empty or holds a leaf
            # the child's path is the first depth + 1 nibbles of kh
            here = dtab[depth + 1] + (kh[:half + 1] if depth & 1 else kh[:half] + _BYTE[kh[half] & 0xF0])
            rec = cached(here) or read(here)
            depth += 1
        frames.pop()
        vh, v = item[1], item[2]
        h = self.h
        hp = self.hp
        writes = self.writes
        leafmap = (rec[end] << 8) | rec[end + 1]
        koff = end + 2 + 32 * (leafmap & _BELOW[n]).bit_count()
        if not bitmap & bit:  # a new leaf in an empty slot
            if v is None or vh is None:
                return _UNCHANGED
            self.leaf_ops[self.lkey + kh] = vh + v
            new = b"".join((_INTERNAL_TAG, (bitmap | bit).to_bytes(2, "big"), rec[3:off], h(_LEAF_TAG + kh + vh),
                            rec[off:end], (leafmap | bit).to_bytes(2, "big"), rec[end + 2:koff], kh, rec[koff:]))
            end += 32
        else:
            kh0 = rec[koff:koff + 32]
            if kh0 == kh:
                if v is None or vh is None:  # delete: the shape above may change
                    self.leaf_ops[self.lkey + kh] = None
                    r: _Result = self.finish(here, rec, [(n, None)])
                    for here, rec, n, off, end in reversed(frames):
                        if isinstance(r, bytes):  # the child stayed an internal node
                            new = rec[:off] + r + rec[off + 32:]
                            writes[here] = new
                            r = hp(new, end)
                        else:
                            assert not isinstance(r, _Unchanged)
                            r = self.finish(here, rec, [(n, r)])
                    return r
                nh = h(_LEAF_TAG + kh + vh)
                if nh == rec[off:off + 32]:
                    return _UNCHANGED
                self.leaf_ops[self.lkey + kh] = vh + v
                new = rec[:off] + nh + rec[off + 32:]
            else:  # a new key meets another key's leaf: both go into a new internal node below
                if v is None or vh is None:
                    return _UNCHANGED
                self.leaf_ops[self.lkey + kh] = vh + v
                lh = h(_LEAF_TAG + kh + vh)
                h0 = rec[off:off + 32]  # the old leaf moves down; its record (by key hash) stays as it is
                cpath = self.child_path(depth, here, n)
                d1 = depth + 1
                if d1 & 1:
                    n0, n1 = kh0[d1 >> 1] & 15, kh[d1 >> 1] & 15
                else:
                    n0, n1 = kh0[d1 >> 1] >> 4, kh[d1 >> 1] >> 4
                if n0 != n1:  # the usual case: a node with the two leaves as its only children
                    pair = (_BIT[n0] | _BIT[n1]).to_bytes(2, "big")
                    if n0 < n1:
                        sub_rec = b"".join((_INTERNAL_TAG, pair, h0, lh, pair, kh0, kh))
                    else:
                        sub_rec = b"".join((_INTERNAL_TAG, pair, lh, h0, pair, kh, kh0))
                    writes[cpath] = sub_rec
                    sub = hp(sub_rec, 67)
                else:  # they share the next nibble too: a one-child chain
                    old, new_leaf = _Leaf(kh0, h0), _Leaf(kh, lh)
                    sub = self.build(d1, cpath, [old, new_leaf] if kh0 < kh else [new_leaf, old])
                new = b"".join((rec[:off], sub, rec[off + 32:end], (leafmap & ~bit).to_bytes(2, "big"),
                                rec[end + 2:koff], rec[koff + 32:]))
        writes[here] = new
        r = hp(new, end)
        # Above the bottom node only one internal child's hash changed: replace those 32 bytes.
        for here, rec, _, off, end in reversed(frames):
            new = rec[:off] + r + rec[off + 32:]
            writes[here] = new
            r = hp(new, end)
        return r

    def update_internal(self, depth: int, here: bytes, rec: bytes, items: list[_Change], lo: int,
                        hi: int) -> _Result:
        """Apply items[lo:hi] to the internal node ``rec`` stored at ``here``."""
        if hi - lo == 1:
            return self.single(depth, here, rec, items[lo])
        bitmap = (rec[1] << 8) | rec[2]
        end = 3 + 32 * bitmap.bit_count()
        leafmap = (rec[end] << 8) | rec[end + 1]
        half = depth >> 1
        odd = depth & 1
        # a child's path is `cbase` plus one byte holding the last nibble (pair)
        if odd:
            cbase = self.dtab[depth + 1] + here[self.skip:-1]
            hib = here[-1]
        else:
            cbase = self.dtab[depth + 1] + here[self.skip:]
            hib = 0
        changed: list[tuple[int, _Leaf | bytes | None]] = []
        r: _Result
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
            bit = _BIT[n]
            cpath = cbase + _BYTE[hib | n if odd else n << 4]
            if not bitmap & bit:
                r = self.update_empty(depth + 1, cpath, items, i, j)
            elif leafmap & bit:
                ko = end + 2 + 32 * (leafmap & _BELOW[n]).bit_count()
                ho = 3 + 32 * (bitmap & _BELOW[n]).bit_count()
                r = self.update_leaf(depth + 1, cpath, rec[ko:ko + 32], rec[ho:ho + 32], items, i, j)
            elif j - i == 1:
                r = self.single(depth + 1, cpath, self.read(cpath), items[i])
            else:
                r = self.update_internal(depth + 1, cpath, self.read(cpath), items, i, j)
            if not isinstance(r, _Unchanged):
                changed.append((n, r))
            i = j
        if not changed:
            return _UNCHANGED
        return self.finish(here, rec, changed)

    def finish(self, here: bytes, rec: bytes, changed: list[tuple[int, _Leaf | bytes | None]]) -> _Leaf | bytes | None:
        """Rebuild the internal node ``rec`` at ``here`` with the ``changed`` children.

        A node left without children disappears; one left with a lone leaf child disappears and the
        leaf moves up (its record, stored by key hash, is not rewritten).
        """
        rec, end = _splice(rec, changed)
        bitmap = (rec[1] << 8) | rec[2]
        if not bitmap:
            self.deletes.add(here)
            return None
        if not bitmap & (bitmap - 1) and (rec[end] | rec[end + 1]):
            self.deletes.add(here)
            return _Leaf(rec[end + 2:end + 34], rec[3:35])
        self.writes[here] = rec
        return self.hp(rec, end)

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
        leafmap = 0
        hashes: list[bytes] = []
        khs: list[bytes] = []
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
            bit = _BIT[n]
            bitmap |= bit
            if j == i + 1:
                leaf = leaves[i]
                leafmap |= bit
                hashes.append(leaf.hash)
                khs.append(leaf.kh)
            else:
                hashes.append(self.build(depth + 1, cbase + _BYTE[hib | n if odd else n << 4], leaves[i:j]))
            i = j
        size = 3 + 32 * len(hashes)
        hashes.append(leafmap.to_bytes(2, "big"))
        hashes.extend(khs)
        self.writes[here] = rec = _INTERNAL_TAG + bitmap.to_bytes(2, "big") + b"".join(hashes)
        return self.hp(rec, size)


# -- public API ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeUpdate:
    """What :meth:`StateTree.prepare` computed: the new root and the store ops producing it."""

    root: bytes
    """State root after the changes."""
    ops: tuple[WriteOp, ...]
    """Internal-node deletes and writes, leaf-record writes and deletes, then the root pointer (each key once)."""
    base_root: bytes = field(default=b"", compare=False)
    """Committed root the update was computed against (``commit`` checks it)."""
    nodes: Mapping[bytes, bytes] = field(default_factory=dict, compare=False, repr=False)
    """The internal-node writes of ``ops`` by store key (``commit`` caches them; do not modify)."""
    gone: tuple[bytes, ...] = field(default=(), compare=False, repr=False)
    """The internal-node deletes of ``ops``."""


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
    for the previously committed state. ``cache_size`` bounds the internal-node
    cache: up to ``cache_size`` records pinned in memory plus up to as many in an
    LRU (0 disables it); results never depend on it. ``prepare`` never reads a
    leaf record.
    """

    def __init__(self, store: StateStore, prefix: bytes, *, cache_size: int = 1_000_000) -> None:
        self._store = store
        self._prefix = bytes(prefix)
        self._dtab = [self._prefix + d for d in _DEPTH]
        self._root_key = self._prefix + _ROOT_KEY
        self._leaf_prefix = self._prefix + _LEAF_KEY
        self._cache = _NodeCache(cache_size)
        self._lock = threading.Lock()
        self._root, self._root_leaf = self._load_root()

    def _load_root(self) -> tuple[bytes, bytes | None]:
        return self._parse_pointer(self._store.get(self._root_key))

    @staticmethod
    def _parse_pointer(raw: bytes | None) -> tuple[bytes, bytes | None]:
        """(root hash, key hash of the root leaf when the root is a single leaf)."""
        if raw is None:
            return EMPTY_ROOT, None
        if len(raw) == 32:
            return raw, None
        if len(raw) == 64:
            return raw[:32], raw[32:]
        raise TreeError("stored state root pointer is corrupt")

    def _read(self, key: bytes) -> bytes:
        rec = self._cache.get(key)
        if rec is None:
            rec = _checked(key, self._store.get(key))
            self._cache.put(key, rec)
        return rec

    def _read_leaf(self, kh: bytes) -> bytes:
        rec = self._store.get(self._leaf_prefix + kh)
        if rec is None or len(rec) < 32:
            raise TreeError(f"state tree leaf {kh.hex()} is missing")
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
        base, base_leaf = self._root, self._root_leaf
        batch = _Batch(self._cache, self._store.get, self._dtab, self._leaf_prefix)
        root, root_leaf = base, base_leaf
        if items:
            top = self._dtab[0]
            r: _Result
            if base == EMPTY_ROOT:
                r = batch.update_empty(0, top, items, 0, len(items))
            elif base_leaf is not None:
                r = batch.update_leaf(0, top, base_leaf, base, items, 0, len(items))
            else:
                r = batch.update_internal(0, top, batch.read(top), items, 0, len(items))
            if r is None:
                root, root_leaf = EMPTY_ROOT, None
            elif isinstance(r, _Leaf):
                root, root_leaf = r.hash, r.kh
            elif isinstance(r, bytes):
                root, root_leaf = r, None
        writes = batch.writes
        gone = tuple(sorted(k for k in batch.deletes if k not in writes))
        # Deterministic order: sorted node deletes, node writes in walk order, leaf ops in key-hash order
        # (items are sorted), then the root pointer.
        ops: list[WriteOp] = [(k, None) for k in gone]
        ops.extend(writes.items())
        ops.extend(batch.leaf_ops.items())
        ops.append((self._root_key, root if root_leaf is None else root + root_leaf))
        return TreeUpdate(root, tuple(ops), base, writes, gone)

    def commit(self, update: TreeUpdate) -> None:
        """Adopt ``update`` as the committed state; call after its ops were written."""
        with self._lock:
            if update.base_root and update.base_root != self._root:
                self._cache.clear()
                self._root, self._root_leaf = self._load_root()
                raise TreeError("tree update was prepared against a different committed root")
            pointer = next((v for k, v in reversed(update.ops) if k == self._root_key), None)
            nodes, gone = update.nodes, update.gone
            if not update.base_root and not nodes and not gone:  # an update built by hand: derive from ops
                skip = len(self._prefix)
                nodes = {k: v for k, v in update.ops if v is not None and k[skip] < _LEAF_KEY[0]}
                gone = tuple(k for k, v in update.ops if v is None and k[skip] < _LEAF_KEY[0])
            self._cache.apply(nodes, gone)
            self._root = update.root
            self._root_leaf = self._parse_pointer(pointer)[1] if pointer is not None else None

    def clear_cache(self) -> None:
        """Forget cached nodes (they are re-read from the store on demand)."""
        self._cache.clear()

    def prove(self, key: bytes) -> StateProof:
        """Inclusion or exclusion proof for ``key`` against :meth:`root`."""
        key = bytes(key)
        if self._root == EMPTY_ROOT:
            return StateProof(key, None, (), None)
        kh = _H(key)
        steps: list[ProofStep] = []
        lk = self._root_leaf
        if lk is None:
            path = self._dtab[0]
            rec = self._read(path)
            depth = 0
            while True:
                bitmap = (rec[1] << 8) | rec[2]
                end = 3 + 32 * bitmap.bit_count()
                leafmap = (rec[end] << 8) | rec[end + 1]
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
                if leafmap & _BIT[n]:
                    ko = end + 2 + 32 * (leafmap & _BELOW[n]).bit_count()
                    lk = rec[ko:ko + 32]
                    break
                path = self._prefix + _child_path(kh, depth, n)
                rec = self._read(path)
                depth += 1
        leaf = self._read_leaf(lk)
        return StateProof(key, leaf[32:] if lk == kh else None, tuple(steps), ProofLeaf(lk, leaf[:32]))

    def get(self, key: bytes) -> bytes | None:
        """Committed value of ``key`` read through the tree (for tools and tests)."""
        return self.prove(key).value
