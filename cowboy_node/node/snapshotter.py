"""Takes a state snapshot every ``[snapshot] interval_blocks`` committed blocks and keeps the newest ``keep``
(issue 34 §1), off the event loop and off the block builder.

After a commit whose head is at least ``interval_blocks`` above the last snapshot (and holds its own finalization
certificate), a point-in-time store view is taken at once on the event loop (a LevelDB snapshot: cheap), and the
snapshot is written from it in this object's thread while blocks keep committing. One at a time: a commit while one
is being written starts nothing.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.observability.logging import get_logger
from cowboy_node.snapshot.create import create_snapshot, list_snapshots, prune_snapshots
from cowboy_node.snapshot.manifest import SnapshotError
from cowboy_node.state.kv_store import StateStore

log = get_logger("cowboy.snapshot")


class Snapshotter:
    """Periodic snapshots of one chain into ``directory``."""

    def __init__(self, chain: Chain, directory: Path, *, interval_blocks: int, keep: int) -> None:
        self._chain = chain
        self.directory = directory
        """``HOME/snapshots``."""
        self.interval_blocks = interval_blocks
        """Blocks between two snapshots (0: none taken)."""
        self.keep = keep
        """Snapshots kept (older ones are deleted after each new one)."""
        existing = list_snapshots(directory) if interval_blocks > 0 else []
        self._last = existing[-1].height if existing else 0
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")
        self._running: concurrent.futures.Future[Path | None] | None = None

    def after_commit(self) -> concurrent.futures.Future[Path | None] | None:
        """Start a snapshot of the head when one is due and none is being written; its future."""
        head = self._chain.height
        if self.interval_blocks <= 0 or head - self._last < self.interval_blocks:
            return None
        if self._running is not None and not self._running.done():
            return None
        if ConsensusRecords(self._chain.store).finalization_bytes(head) is None:
            return None  # final through a descendant only: the next certified head is taken
        view = self._chain.store.snapshot()
        self._last = head
        try:
            self._running = self._executor.submit(self._take, view, head)
        except RuntimeError:  # shut down: the node is stopping
            view.close()
            return None
        return self._running

    def _take(self, view: StateStore, height: int) -> Path | None:
        genesis = self._chain.genesis
        try:
            out = create_snapshot(view, height=height, chain_id=genesis.chain_id, genesis_hash=genesis.hash(),
                                  out_root=self.directory)
        except (SnapshotError, OSError) as e:
            log.error("taking a snapshot failed", height=height, error=str(e))
            return None
        finally:
            view.close()
        gone = prune_snapshots(self.directory, self.keep)
        log.info("snapshot taken", height=height, path=str(out), deleted=gone)
        return out

    def close(self) -> None:
        """Wait for the snapshot being written (the store closes after this)."""
        self._executor.shutdown(wait=True)
