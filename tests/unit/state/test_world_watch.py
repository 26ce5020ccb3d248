"""WorldState's hooks for derived caches: the watch log of a prefix, the memo, and the prepare hooks."""

from __future__ import annotations

from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState, add_prepare_hook, watch_prefix

PREFIX = b"test-watch/"


def world() -> WorldState:
    st = MemoryStore()
    return WorldState(st, StateTree(st, b"n/"), data_prefix=b"s/")


def test_watch_log_records_writes_and_deletes_under_the_prefix_only() -> None:
    watch_prefix(PREFIX)
    w = world()
    w.set(PREFIX + b"a", b"1")
    w.set(b"other/a", b"1")
    w.delete(PREFIX + b"b")
    assert w.watch_log == [PREFIX + b"a", PREFIX + b"b"]


def test_a_revert_logs_every_key_it_restores() -> None:
    watch_prefix(PREFIX)
    w = world()
    w.set(PREFIX + b"a", b"1")
    cp = w.checkpoint()
    w.set(PREFIX + b"a", b"2")
    w.set(PREFIX + b"c", b"3")
    w.set(b"other/x", b"3")
    del w.watch_log[:]
    w.revert(cp)
    assert sorted(w.watch_log) == [PREFIX + b"a", PREFIX + b"c"]
    assert w.get(PREFIX + b"a") == b"1" and w.get(PREFIX + b"c") is None


def test_mark_committed_restarts_the_log_and_bumps_the_epoch() -> None:
    watch_prefix(PREFIX)
    w = world()
    w.set(PREFIX + b"a", b"1")
    epoch = w.epoch
    _root, ops = w.prepare_commit()
    w._store.write_batch(ops)
    w.mark_committed()
    assert w.watch_log == [] and w.epoch == epoch + 1


def test_prepare_hooks_see_base_and_new_root_and_cannot_change_them() -> None:
    seen: list[tuple[bytes, bytes]] = []

    def hook(w: WorldState, base: bytes, new: bytes) -> None:
        if w.memo.get("test") == "watch-me":
            seen.append((base, new))

    add_prepare_hook(hook)
    add_prepare_hook(hook)  # idempotent
    plain, hooked = world(), world()
    hooked.memo["test"] = "watch-me"
    for w in (plain, hooked):
        w.set(b"k", b"v")
    base = hooked.tree.root()
    root_hooked, ops_hooked = hooked.prepare_commit()
    root_plain, ops_plain = plain.prepare_commit()
    assert seen == [(base, root_hooked)]
    assert (root_hooked, ops_hooked) == (root_plain, ops_plain)
    hooked.prepare_commit()  # nothing changed since: the prepared result is reused, the hook not re-run
    assert len(seen) == 1
