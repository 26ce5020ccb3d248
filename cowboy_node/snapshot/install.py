"""Installing a verified snapshot into an empty data directory, atomically (issue 34 §1).

The install writes ``M/installing`` (synced) before anything else, and deletes it in the synced batch that finally
writes the chain's identity, head block, its certificate and seed, and ``M/earliest`` (no block below the snapshot
height is stored). A store holding the marker is never opened as a chain (``Chain`` refuses it), so nothing
half-installed is ever used; an install that finds the marker (a crash mid-install) deletes what the interrupted one
wrote and starts over. Every chunk is verified before its entries are written, by building its slots' part of the
state tree (``snapshot/chunk_tree.py``: each key, value and node hashed once, for the check and the install alike);
the records above the slots are written last, in the final batch, once their root is the finalized header's.
A snapshot carries committed keys only: the derived ones (``state/derived.py``, the timer indexes) are rebuilt from
the installed timer records just before that batch (:func:`rebuild_derived`).

The steps are separate (:func:`begin_install`, :func:`write_chunk`, :func:`finish_install`) so that state sync can
verify chunks in worker processes and write them as they come, in any order (the chunks' writes are disjoint);
:func:`install_snapshot` runs them in order, for ``snapshot import`` and the tests.

The vote journal's double-sign watch marker is written before the store is complete (``data/consensus-votes.watching``,
``consensus/journal.py``): a validator that joined from a snapshot does not vote until it has watched
``[consensus] double_sign_check_views`` views, whether or not a journal file exists (unless ``--fresh-key``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cowboy_node.chain.blockstore import KEY_HEAD, KEY_INSTALLING, STATE_PREFIX, identity_ops
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.genesis import Genesis
from cowboy_node.chain.pruning import KEY_EARLIEST
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, marker_path, write_marker
from cowboy_node.consensus.records import finalization_op, seed_op
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.execution.timers import timer_state
from cowboy_node.snapshot.chunk_tree import ChunkWrites, top_ops, verify_and_build
from cowboy_node.snapshot.manifest import SnapshotError, decode_manifest
from cowboy_node.snapshot.verify import VerifiedManifest, verify_manifest
from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_protocol.types.validation_errors import DecodeError

_BE8 = struct.Struct(">Q")
_WIPE_BATCH = 10_000
_REBUILD_BATCH = 10_000
"""Derived keys written per (unsynced) batch while rebuilding them."""


@dataclass(frozen=True, slots=True)
class Installed:
    """What :func:`install_snapshot` did."""

    height: int
    """The head height of the data directory now."""
    state_root: bytes
    """Its state root (the finalized header's)."""
    entries: int
    """State entries written."""
    restarted: bool
    """An interrupted install was found and started over."""
    derived: int = 0
    """Derived keys (``state/derived.py``: the timer indexes) rebuilt from the installed records."""


def _wipe(store: StateStore) -> None:
    """Delete every key (what an interrupted install wrote), in bounded batches, the marker last."""
    while True:
        keys: list[bytes] = []
        for key, _ in store.iterate(b""):  # the iterator reads a point-in-time view: stop before deleting
            if key != KEY_INSTALLING:
                keys.append(key)
                if len(keys) >= _WIPE_BATCH:
                    break
        if not keys:
            return
        store.write_batch([(k, None) for k in keys], sync=False)


def begin_install(store: StateStore, data_path: Path, genesis: Genesis, scheme: Scheme,
                  manifest_bytes: bytes) -> tuple[VerifiedManifest, bool]:
    """Verify the manifest, write the double-sign watch marker and ``M/installing`` (after deleting what an
    interrupted install wrote); the verified manifest and whether an interrupted install was found. Raises
    :class:`SnapshotError` (``not_empty`` when the store already holds a chain; ``snapshot/verify.py``'s codes)."""
    restarted = store.get(KEY_INSTALLING) is not None
    if not restarted and store.get(KEY_HEAD) is not None:
        raise SnapshotError("not_empty", f"{data_path} already holds a chain; a snapshot is installed only into "
                                         "an empty data directory")
    verified = verify_manifest(decode_manifest(manifest_bytes), genesis, scheme)
    marker = marker_path(data_path / VOTE_JOURNAL_FILE)
    write_marker(marker, f"joined from the snapshot of height {verified.manifest.height}: watching views before "
                         "voting\n")
    if restarted:
        _wipe(store)
    store.write_batch([(KEY_INSTALLING, _BE8.pack(verified.manifest.height))], sync=True)
    return verified, restarted


def write_chunk(store: StateStore, chunk: ChunkWrites) -> None:
    """Write one verified chunk (not synced: the final batch is, and a crash before it restarts the install)."""
    if chunk.ops:
        store.write_batch(chunk.ops, sync=False)


def rebuild_derived(store: StateStore) -> int:
    """Write the derived keys (``state/derived.py``) that the installed timer records imply, in bounded batches (not
    synced: the final batch is, and a crash before it restarts the install); how many were written.

    A record that does not decode is a :class:`SnapshotError` ``bad_state`` (it verified against the root, so the
    finalized state itself holds it: this node cannot use that state)."""
    plen = len(STATE_PREFIX)

    def records() -> Iterator[tuple[bytes, bytes]]:
        for prefix in (timer_state.HEIGHT_PREFIX, timer_state.PARKED_PREFIX):
            for key, value in store.iterate(STATE_PREFIX + prefix):  # a point-in-time view: writes do not show
                yield key[plen:], value

    batch: list[WriteOp] = []
    written = 0
    try:
        for key, value in timer_state.derived_writes(records()):
            batch.append((STATE_PREFIX + key, value))
            if len(batch) >= _REBUILD_BATCH:
                store.write_batch(batch, sync=False)
                written += len(batch)
                batch = []
    except DecodeError as e:
        raise SnapshotError("bad_state", f"a timer record of the snapshot's state does not decode: {e}") from None
    if batch:
        store.write_batch(batch, sync=False)
        written += len(batch)
    return written


def finish_install(store: StateStore, genesis: Genesis, verified: VerifiedManifest, leaf_keys: dict[int, bytes],
                   restarted: bool) -> Installed:
    """Once every chunk is written: the records above the slots, the chain's identity, head block, certificate,
    seed and ``M/earliest``, and the marker's removal, in one synced batch; then the store opens as a chain."""
    m, block = verified.manifest, verified.block
    root, tree_ops = top_ops(m.slots, leaf_keys)
    if root != block.header.state_root:  # the manifest's slots gave this root: only a bug gets this far
        raise SnapshotError("root_mismatch", "the installed tree's root is not the block's state root")
    derived = rebuild_derived(store)
    h = _BE8.pack(m.height)
    cert = verified.certificate
    final: list[WriteOp] = [*tree_ops, *identity_ops(genesis.chain_id, genesis.hash()),
                            (b"B/" + h, m.block), (b"H/" + block.hash(), h),
                            *((b"T/" + tx.tx_hash(), struct.pack(">QI", m.height, i))
                              for i, tx in enumerate(block.transactions)),
                            finalization_op(m.height, cert), seed_op(block.header.round, cert.seed),
                            (KEY_EARLIEST, h), (KEY_HEAD, h), (KEY_INSTALLING, None)]
    store.write_batch(final, sync=True)
    chain = Chain(store, genesis)  # the node's own open: identity, head block, head root == tree root
    return Installed(chain.height, chain.head.header.state_root, m.entries, restarted, derived)


def install_snapshot(store: StateStore, data_path: Path, genesis: Genesis, scheme: Scheme, manifest_bytes: bytes,
                     read_chunk: Callable[[int], bytes],
                     after_chunk: Callable[[int], None] | None = None) -> Installed:
    """Verify the snapshot and install it into ``store`` (the LevelDB of ``data_path``), which must hold no chain.

    ``read_chunk(i)`` returns chunk ``i``'s bytes (from a directory, or a peer); ``after_chunk(i)`` is called once
    chunk ``i`` is written (progress; tests crash the install there). Raises :class:`SnapshotError`
    (``not_empty`` when the store already holds a chain; the verification codes of ``snapshot/verify.py``)."""
    verified, restarted = begin_install(store, data_path, genesis, scheme, manifest_bytes)
    m = verified.manifest
    leaf_keys: dict[int, bytes] = {}
    for i in range(len(m.chunks)):
        chunk = verify_and_build(m, i, read_chunk(i))
        write_chunk(store, chunk)
        leaf_keys.update(chunk.leaf_keys)
        if after_chunk is not None:
            after_chunk(i)
    return finish_install(store, genesis, verified, leaf_keys, restarted)
