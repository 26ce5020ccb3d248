"""Installing a verified snapshot into an empty data directory, atomically (issue 34 §1).

The install writes ``M/installing`` (synced) before anything else, and deletes it in the synced batch that finally
writes the chain's identity, head block, its certificate and seed, and ``M/earliest`` (no block below the snapshot
height is stored). A store holding the marker is never opened as a chain (``Chain`` refuses it), so nothing
half-installed is ever used; an install that finds the marker (a crash mid-install) deletes what the interrupted one
wrote and starts over. Every chunk is verified (``snapshot/verify.py``) before its entries are written; the state
tree is rebuilt from the entries and its root compared with the finalized header's once more at the end.

The vote journal's double-sign watch marker is written before the store is complete (``data/consensus-votes.watching``,
``consensus/journal.py``): a validator that joined from a snapshot does not vote until it has watched
``[consensus] double_sign_check_views`` views, whether or not a journal file exists (unless ``--fresh-key``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cowboy_node.chain.blockstore import KEY_HEAD, KEY_INSTALLING, STATE_PREFIX, TREE_PREFIX, identity_ops
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.genesis import Genesis
from cowboy_node.chain.pruning import KEY_EARLIEST
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, marker_path, write_marker
from cowboy_node.consensus.records import finalization_op, seed_op
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.snapshot.manifest import SnapshotError, decode_chunk, decode_manifest
from cowboy_node.snapshot.verify import check_digest, verify_chunk, verify_manifest
from cowboy_node.state.store import StateStore, WriteOp
from cowboy_node.state.tree import StateTree

_BE8 = struct.Struct(">Q")
_WIPE_BATCH = 10_000


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


def install_snapshot(store: StateStore, data_path: Path, genesis: Genesis, scheme: Scheme, manifest_bytes: bytes,
                     read_chunk: Callable[[int], bytes],
                     after_chunk: Callable[[int], None] | None = None, chunks_verified: bool = False) -> Installed:
    """Verify the snapshot and install it into ``store`` (the LevelDB of ``data_path``), which must hold no chain.

    ``read_chunk(i)`` returns chunk ``i``'s bytes (from a directory, or a peer); ``after_chunk(i)`` is called once
    chunk ``i`` is written (progress; tests crash the install there). ``chunks_verified``: every chunk already
    passed :func:`verify_chunk` (state sync verifies each as it arrives), so only its digest is checked here, which
    proves the bytes read back are those. Raises :class:`SnapshotError`
    (``not_empty`` when the store already holds a chain; the verification codes of ``snapshot/verify.py``)."""
    restarted = store.get(KEY_INSTALLING) is not None
    if not restarted and store.get(KEY_HEAD) is not None:
        raise SnapshotError("not_empty", f"{data_path} already holds a chain; a snapshot is installed only into "
                                         "an empty data directory")
    verified = verify_manifest(decode_manifest(manifest_bytes), genesis, scheme)
    m, block = verified.manifest, verified.block
    marker = marker_path(data_path / VOTE_JOURNAL_FILE)
    write_marker(marker, f"joined from the snapshot of height {m.height}: watching views before voting\n")
    if restarted:
        _wipe(store)
    store.write_batch([(KEY_INSTALLING, _BE8.pack(m.height))], sync=True)
    tree = StateTree(store, TREE_PREFIX, cache_size=0)
    for i in range(len(m.chunks)):
        raw = read_chunk(i)
        if chunks_verified:
            check_digest(m, i, raw)
            entries = decode_chunk(raw)
        else:
            entries = verify_chunk(m, i, raw)
        if entries:
            update = tree.prepare({k: v for k, v in entries})
            store.write_batch([*((STATE_PREFIX + k, v) for k, v in entries), *update.ops], sync=False)
            tree.commit(update)
        if after_chunk is not None:
            after_chunk(i)
    if tree.root() != block.header.state_root:  # every slot verified: only a bug here gets this far
        raise SnapshotError("root_mismatch", "the installed tree's root is not the block's state root")
    h = _BE8.pack(m.height)
    cert = verified.certificate
    final: list[WriteOp] = [*identity_ops(genesis.chain_id, genesis.hash()),
                            (b"B/" + h, m.block), (b"H/" + block.hash(), h),
                            *((b"T/" + tx.tx_hash(), struct.pack(">QI", m.height, i))
                              for i, tx in enumerate(block.transactions)),
                            finalization_op(m.height, cert), seed_op(block.header.round, cert.seed),
                            (KEY_EARLIEST, h), (KEY_HEAD, h), (KEY_INSTALLING, None)]
    store.write_batch(final, sync=True)
    chain = Chain(store, genesis)  # the node's own open: identity, head block, head root == tree root
    return Installed(chain.height, chain.head.header.state_root, m.entries, restarted)
