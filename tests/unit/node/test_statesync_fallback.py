"""The automatic fall-back from block sync to state sync (issue 34 §2, ``node/statesync_fallback.py``): when it fires
(every peer ahead pruned the next block, or one is ``fallback_behind_blocks`` ahead), when it does not (an archive
peer still serves it, the trigger is off, a peer only slightly ahead), and what firing leaves behind (the request
file that the next start acts on, the node's stop, once per run; a declined fall-back is not retried that run)."""

from __future__ import annotations

from pathlib import Path

from cowboy_node.chain.chain import Chain
from cowboy_node.node.statesync_fallback import (
    FallbackPolicy,
    FallbackTrigger,
    PeerSyncView,
    decide,
    finish_request,
    pending_request,
    request_path,
)
from cowboy_node.state.memory import MemoryStore
from tests.unit.node.sync_chain import NET

ON = FallbackPolicy(enabled=True, behind_blocks=1000)


def test_every_peer_ahead_having_pruned_the_next_block_triggers_it() -> None:
    peers = {0: PeerSyncView(500, 301), 1: PeerSyncView(480, 200), 2: PeerSyncView(10, 0)}  # 2 is behind us
    reason = decide(ON, 150, peers)
    assert reason is not None and reason.startswith("pruned") and "200" in reason and "151" in reason


def test_one_peer_ahead_that_still_serves_the_next_block_keeps_block_sync() -> None:
    peers = {0: PeerSyncView(500, 301), 1: PeerSyncView(480, 0)}  # 1 is an archive (never said it pruned)
    assert decide(ON, 150, peers) is None
    assert decide(ON, 150, {0: PeerSyncView(500, 151)}) is None  # it keeps exactly the block needed next


def test_a_peer_far_enough_ahead_triggers_it_and_one_just_below_does_not() -> None:
    assert decide(ON, 100, {0: PeerSyncView(1099, 0)}) is None
    reason = decide(ON, 100, {0: PeerSyncView(1100, 0)})
    assert reason is not None and reason.startswith("behind")
    assert decide(FallbackPolicy(enabled=True, behind_blocks=0), 100, {0: PeerSyncView(10**6, 0)}) is None


def test_nothing_triggers_it_when_disabled_or_when_no_peer_is_ahead() -> None:
    off = FallbackPolicy(enabled=False, behind_blocks=1000)
    assert decide(off, 150, {0: PeerSyncView(500, 301)}) is None
    assert decide(off, 100, {0: PeerSyncView(10**6, 0)}) is None
    assert decide(ON, 150, {0: PeerSyncView(150, 400)}) is None  # not ahead: nothing to catch up on
    assert decide(ON, 150, {}) is None


def test_firing_writes_the_request_stops_the_node_once_and_the_next_start_sees_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stops: list[int] = []
    trigger = FallbackTrigger(ON, data, stop=lambda: stops.append(1))
    trigger.check(150, {0: PeerSyncView(500, 301)})
    trigger.check(150, {0: PeerSyncView(500, 301)})
    assert stops == [1] and trigger.reason is not None
    assert request_path(data).read_text().startswith("pruned")
    store = MemoryStore()
    Chain(store, NET.genesis)  # a node at genesis, say
    assert pending_request(data, store) == trigger.reason
    assert pending_request(data, MemoryStore()) is None  # an empty store: the ordinary start-up path covers it


def test_a_declined_fall_back_is_not_retried_in_the_next_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    FallbackTrigger(ON, data, stop=lambda: None).check(100, {0: PeerSyncView(5000, 0)})
    finish_request(data, installed=False)  # the start-up found no snapshot above the head
    assert not request_path(data).exists()
    stops: list[int] = []
    again = FallbackTrigger(ON, data, stop=lambda: stops.append(1))
    again.check(100, {0: PeerSyncView(5000, 0)})
    assert stops == [] and again.reason is None
    third = FallbackTrigger(ON, data, stop=lambda: stops.append(1))  # the run after that may fall back again
    third.check(100, {0: PeerSyncView(5000, 0)})
    assert stops == [1]
