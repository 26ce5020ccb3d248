"""State-watch timers: layout, golden bytes, prefix matching, same-block prohibition, expiry, cancel."""

from __future__ import annotations

import pytest

from cowboy_node.execution import mailbox
from cowboy_node.execution.eob.deliver_timers import deliver_timers
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers import watch
from cowboy_node.execution.timers.watch import WatchTimer, set_state_watch
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.types.receipt import Event
from tests.unit.eob_helpers import ACTOR, OTHER, SENDER, FakeRunner, big_meter, commit, make_ctx, make_world

T1 = bytes([0x01]) * 32


def _watch(world, at: int = 1, prefixes=(b"actor/k",), **kw):  # type: ignore[no-untyped-def]
    return set_state_watch(world, make_ctx(at), big_meter(), actor=ACTOR, tx_sender=SENDER,
                           prefixes=list(prefixes), handler="handle_timer", payload=b"p", **kw)


def test_key_layout_and_record_golden_bytes() -> None:
    assert watch.watch_key(T1) == b"timer/w/" + T1
    assert watch.index_key(b"ab", T1) == b"timer/x/" + bytes.fromhex("0002") + b"ab" + T1
    assert watch.length_key(2) == b"timer/xl/" + bytes.fromhex("0002")
    w = WatchTimer(ACTOR, (b"ab",), "h", b"", ACTOR, 5, 100, 3, 1)
    expected = (bytes.fromhex("a9 00 54") + ACTOR + bytes.fromhex("01 81 42 6162 02 61 68 03 40 04 54") + ACTOR
                + bytes.fromhex("05 05 06 1864 07 03 08 01"))
    assert w.encode() == expected and WatchTimer.decode(expected) == w


def test_id_is_domain_separated_and_counts_against_the_actor_cap() -> None:
    world = make_world()
    wid = _watch(world)
    assert wid == watch.derive_watch_id(ACTOR, 0)
    assert store.get_meta(world, ACTOR).live == 1 and store.get_meta(world, ACTOR).next_nonce == 1


@pytest.mark.parametrize("prefixes", [[], [b""], [b"a", b"a"], [b"x" * 257], [bytes([i]) for i in range(9)]])
def test_bad_prefix_lists_are_rejected(prefixes: list[bytes]) -> None:
    with pytest.raises(TxFailed) as e:
        _watch(make_world(), prefixes=prefixes)
    assert e.value.code == "timer_watch_prefixes_invalid"


def test_hits_match_prefixes_of_modified_keys_only() -> None:
    world = make_world()
    a = _watch(world, prefixes=(b"actor/k",))
    b = _watch(world, prefixes=(b"actor/key2", b"zzz"))
    assert watch.hits(world, (b"actor/k1",)) == [a]
    assert watch.hits(world, (b"actor/key2/x",)) == sorted([a, b])
    assert watch.hits(world, (b"actor/j", b"zz")) == []


def test_no_hit_in_the_creating_block_and_expired_watch_is_removed() -> None:
    world = make_world()
    wid = _watch(world, at=5, expires_at=6)
    world.set(b"actor/k1", b"v")  # same block as the registration
    ctx = make_ctx(5)
    deliver_timers(world, ctx, run_fire=FakeRunner().fire)
    assert list(mailbox.pending(world)) == []
    commit(world)
    world.set(b"actor/k1", b"w")
    ctx = make_ctx(7)
    deliver_timers(world, ctx, run_fire=FakeRunner().fire)
    assert watch.get_watch(world, wid) is None and ctx.eob.timers_expired == 1
    assert [e.topic for e in ctx.events if isinstance(e, Event)] == ["timer.expired"]
    assert watch.hits(world, (b"actor/k1",)) == [] and store.get_meta(world, ACTOR).live == 0


def test_cancel_watch_checks_the_owner() -> None:
    world = make_world()
    wid = _watch(world)
    with pytest.raises(TxFailed) as e:
        watch.cancel_watch(world, actor=OTHER, timer_id=wid)
    assert e.value.code == "timer_unauthorized"
    assert watch.cancel_watch(world, actor=ACTOR, timer_id=wid) is True
    assert watch.cancel_watch(world, actor=ACTOR, timer_id=wid) is False
    assert world.get(watch.length_key(len(b"actor/k"))) is None
