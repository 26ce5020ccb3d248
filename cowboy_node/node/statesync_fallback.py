"""Automatic fall-back from block sync to state sync (issue 34 §2).

A running validator that cannot catch up by block sync switches to state sync by itself:

- **pruned**: every peer announcing blocks above this node's head has answered ``SyncPruned`` with an earliest
  retained height above ``head + 1`` (nobody serves the next block this node needs), or
- **behind**: a peer announces a height at least ``[snapshot] fallback_behind_blocks`` above the head (replaying
  that many blocks would take longer than joining from a snapshot; 0 turns this trigger off).

The decision (:func:`decide`) is a pure function of the head and what the peers said, fed every sync tick by the
sync client (``node/sync_client.py``). When it fires, :class:`FallbackTrigger` logs why, writes the request file
``<data>.statesync-requested`` (so a crash or kill from here still ends in a state sync) and stops the node; the
start-up then runs :func:`state_sync_if_requested` before opening the chain: it asks the peers for their
snapshots (every offer verified against the finalized header), and

- when a verified snapshot above the head is offered, marks the store ``M/installing`` (from here the store is never
  opened as a chain until the install completes; a crash restarts it), installs the snapshot
  (``node/statesync.py``; the old blocks are dropped: the earliest retained height becomes the snapshot's) and
  removes the request: block sync resumes from the snapshot height;
- otherwise (no snapshot, or none above the head) it keeps the chain, renames the request to
  ``<data>.statesync-declined`` and block sync goes on; that run does not fall back again (a peer announcing a
  false height cannot make the node restart in a loop). The next start clears it.

The double-sign guard applies as on the manual path: the install writes the vote journal's watch marker, so the
validator watches ``[consensus] double_sign_check_views`` views before it votes again (``--fresh-key`` is not
carried over the restart). ``[snapshot] auto_state_sync = false`` turns all of this off.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cowboy_node.chain.blockstore import KEY_INSTALLING, BlockStore
from cowboy_node.chain.genesis import Genesis
from cowboy_node.node.config import NodeConfig
from cowboy_node.node.statesync_link import state_sync_link, validator_index
from cowboy_node.observability.logging import get_logger
from cowboy_node.p2p.peers import PeerInfo
from cowboy_node.snapshot.manifest import SnapshotError
from cowboy_node.state.kv_store import StateStore

log = get_logger("cowboy.statesync")

REQUEST_SUFFIX = ".statesync-requested"
"""Beside the data directory: a fall-back to state sync is due (its text says why)."""
DECLINED_SUFFIX = ".statesync-declined"
"""Beside the data directory: the last fall-back found no snapshot above the head (this run does not retry)."""
DEFAULT_BEHIND_BLOCKS = 10_000
"""``[snapshot] fallback_behind_blocks`` by default: about 80 minutes of 0.5 s blocks."""


@dataclass(frozen=True, slots=True)
class FallbackPolicy:
    """When a running validator falls back to state sync."""

    enabled: bool = True
    """``[snapshot] auto_state_sync``."""
    behind_blocks: int = DEFAULT_BEHIND_BLOCKS
    """``[snapshot] fallback_behind_blocks``: a peer this far ahead triggers it (0: only pruned peers do)."""


@dataclass(frozen=True, slots=True)
class PeerSyncView:
    """What the sync client knows of one peer."""

    claimed: int
    """The height of its last Status."""
    pruned_below: int
    """The earliest retained height of its last ``SyncPruned`` (0: it never said it pruned)."""


def decide(policy: FallbackPolicy, head: int, peers: Mapping[int, PeerSyncView]) -> str | None:
    """Why this node should fall back to state sync now (a log line), or None."""
    if not policy.enabled:
        return None
    ahead = {p: v for p, v in peers.items() if v.claimed > head}
    if not ahead:
        return None
    if all(v.pruned_below > head + 1 for v in ahead.values()):
        lowest = min(v.pruned_below for v in ahead.values())
        return (f"pruned: every peer ahead keeps blocks only from height {lowest} up, this node needs "
                f"{head + 1}")
    top = max(v.claimed for v in ahead.values())
    if policy.behind_blocks > 0 and top - head >= policy.behind_blocks:
        return (f"behind: a peer is at height {top}, {top - head} blocks above this node's {head} "
                f"(fallback_behind_blocks = {policy.behind_blocks})")
    return None


def request_path(data_path: Path) -> Path:
    """The request file of the data directory ``data_path``."""
    return data_path.parent / (data_path.name + REQUEST_SUFFIX)


def declined_path(data_path: Path) -> Path:
    """The declined-request file of ``data_path``."""
    return data_path.parent / (data_path.name + DECLINED_SUFFIX)


class FallbackTrigger:
    """Fires at most once per run: logs why, writes the request file, calls ``stop`` (the node's stop)."""

    def __init__(self, policy: FallbackPolicy, data_path: Path, stop: Callable[[], None]) -> None:
        declined = declined_path(data_path)
        self.policy = policy if not declined.exists() else FallbackPolicy(enabled=False)
        """In force for this run (off after a declined fall-back)."""
        if declined.exists():
            log.warning("the last fall-back to state sync found no snapshot above the head; not falling back again "
                        "in this run", file=str(declined))
            declined.unlink()
        self._data_path = data_path
        self._stop = stop
        self.reason: str | None = None
        """Why it fired (None: it did not)."""

    def check(self, head: int, peers: Mapping[int, PeerSyncView]) -> None:
        """Called by the sync client each tick (on the event loop)."""
        if self.reason is not None:
            return
        reason = decide(self.policy, head, peers)
        if reason is None:
            return
        self.reason = reason
        log.warning("block sync cannot catch up; falling back to state sync (the node restarts into it)",
                    reason=reason, head=head)
        path = request_path(self._data_path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(reason + "\n")
        os.replace(tmp, path)
        self._stop()


def pending_request(data_path: Path, store: StateStore) -> str | None:
    """The reason of a pending fall-back (None: none)."""
    path = request_path(data_path)
    if not path.exists():
        return None
    if BlockStore(store).head_height() is None and store.get(KEY_INSTALLING) is None:
        path.unlink()  # an empty store: the ordinary start-up state sync (if on) covers it
        return None
    return path.read_text().strip() or "requested"


def finish_request(data_path: Path, installed: bool) -> None:
    """The fall-back is over: the request removed (installed), or kept as declined (no snapshot above the head)."""
    path = request_path(data_path)
    if installed:
        path.unlink(missing_ok=True)
    elif path.exists():
        os.replace(path, declined_path(data_path))




async def state_sync_if_requested(cfg: NodeConfig, home: Path, genesis: Genesis, store: StateStore,
                                  ed25519_seed: bytes, *, peers: Callable[[int], list[PeerInfo]], cert_path: Path,
                                  key_path: Path, idle_timeout_s: float) -> bool:
    """Start-up step of a pending fall-back (see the module docstring): True when a snapshot was installed. Raises
    :class:`SnapshotError` when the sync failed after the install began (a restart retries it). ``peers(me)``,
    ``cert_path``, ``key_path``, ``idle_timeout_s``: the start-up's peer list and TLS files (``node/startup.py``)."""
    reason = pending_request(cfg.data_path, store)
    if reason is None or len(genesis.validators) == 1:
        return False
    installing = store.get(KEY_INSTALLING) is not None
    head = 0 if installing else (BlockStore(store).head_height() or 0)
    me = validator_index(genesis, ed25519_seed)
    if me is None:
        return False  # the node refuses this key right after, naming it
    sync, net = state_sync_link(cfg, genesis, ed25519_seed, me, config_path=str(home / "config.toml"), peers=peers,
                                cert_path=cert_path, key_path=key_path, idle_timeout_s=idle_timeout_s)
    log.warning("falling back to state sync", reason=reason, head=head, data=str(cfg.data_path))
    await net.start()
    try:
        try:
            verified, sources = await sync.choose()
        except SnapshotError as e:
            if installing:
                raise
            log.warning("fall-back to state sync: no snapshot offered; block sync goes on", code=e.code, head=head)
            finish_request(cfg.data_path, installed=False)
            return False
        height = verified.manifest.height
        if height <= head and not installing:
            log.warning("fall-back to state sync: no snapshot above the head; block sync goes on", head=head,
                        snapshot=height)
            finish_request(cfg.data_path, installed=False)
            return False
        # From here the store is not a chain until the install's final batch: a crash restarts the install.
        store.write_batch([(KEY_INSTALLING, height.to_bytes(8, "big"))], sync=True)
        done = await sync.fetch_and_install(verified, sources, store, cfg.data_path)
        finish_request(cfg.data_path, installed=True)
        log.warning("fall-back to state sync: installed; block sync resumes from the snapshot", height=done.height,
                    entries=done.entries, previous_head=head)
        return True
    finally:
        await net.stop()


__all__ = ["DEFAULT_BEHIND_BLOCKS", "FallbackPolicy", "FallbackTrigger", "PeerSyncView", "decide",
           "finish_request", "pending_request", "request_path", "state_sync_if_requested"]
