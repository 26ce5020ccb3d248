"""Runs ``[storage] retain_blocks`` pruning off the event loop and off the block builder, one bounded step per
committed block (``chain/pruning.py``).

A step is started after a commit only when the previous one has finished, in its own thread: block production
never waits for pruning (LevelDB takes writes from both threads; the keys a step deletes are never those a commit
writes, as they belong to heights far below the head). A node that turns pruning on over a long archive catches up
at ``batch_blocks`` heights per committed block.
"""

from __future__ import annotations

import concurrent.futures
import threading

from cowboy_node.chain.pruning import PruneStep, prune_step
from cowboy_node.observability.logging import get_logger
from cowboy_node.state.kv_store import StateStore

log = get_logger("cowboy.storage")


class Pruner:
    """Deletes what falls out of the retention window, a batch at a time."""

    def __init__(self, store: StateStore, *, retain_blocks: int, batch_blocks: int) -> None:
        self._store = store
        self.retain_blocks = retain_blocks
        """Heights kept below and including the head (0: archive, nothing pruned)."""
        self.batch_blocks = batch_blocks
        """Heights one step deletes at most."""
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pruner")
        self._running: concurrent.futures.Future[PruneStep] | None = None
        self._lock = threading.Lock()
        self.steps = 0
        """Steps that deleted something (for tests and logs)."""
        self.deleted_keys = 0
        """Keys deleted so far."""

    def after_commit(self, head: int) -> concurrent.futures.Future[PruneStep] | None:
        """Start a step for the new ``head`` unless one is still running or pruning is off; the step's future."""
        if self.retain_blocks <= 0:
            return None
        with self._lock:
            if self._running is not None and not self._running.done():
                return None
            try:
                self._running = self._executor.submit(self._step, head)
            except RuntimeError:  # shut down: the node is stopping
                return None
            return self._running

    def wait(self) -> None:
        """Wait for the step in flight, if any (tests and benchmarks drive pruning to its end with it)."""
        with self._lock:
            running = self._running
        if running is not None:
            concurrent.futures.wait([running])

    def _step(self, head: int) -> PruneStep:
        try:
            step = prune_step(self._store, head=head, retain_blocks=self.retain_blocks, max_blocks=self.batch_blocks)
        except Exception as e:  # pruning must never stop the node: the next commit tries again
            log.exception("pruning step failed; retrying after the next block", head=head, error=repr(e))
            raise
        if step.deleted_keys:
            self.steps += 1
            self.deleted_keys += step.deleted_keys
            log.debug("pruned blocks", heights=f"{step.pruned_from}..{step.earliest - 1}", keys=step.deleted_keys,
                      earliest=step.earliest)
        return step

    def close(self) -> None:
        """Wait for the running step (the store closes after this) and refuse further ones."""
        self._executor.shutdown(wait=True)
