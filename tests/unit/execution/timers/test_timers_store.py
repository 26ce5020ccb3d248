"""CIP-5 timer store: key layout, FIFO height index as an ordered range, per-actor index and counters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import set_timer_config
from cowboy_node.execution.timers import schedule_timer
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, TimerConfig
from cowboy_protocol.types.validation_errors import DecodeError

ACTOR = bytes([0xA1]) * 20
OTHER = bytes([0xB2]) * 20
SENDER = bytes([0xC3]) * 20
PROPOSER = bytes([0xF0]) * 20
BIG_CAP = TimerConfig(max_timers_per_actor=1_000_000)


class CountingStore(MemoryStore):
    """A MemoryStore that counts the values handed out by get() and iterate()."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get(self, key: bytes) -> bytes | None:
        self.reads += 1
        return super().get(key)

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        for item in super().iterate(prefix, start=start, reverse=reverse):
            self.reads += 1
            yield item


def make_world(st: MemoryStore | None = None) -> WorldState:
    st = st if st is not None else MemoryStore()
    return WorldState(st, StateTree(st, b"n/"), data_prefix=b"s/")


def commit(world: WorldState) -> None:
    """Write the pending changes to the world's store (as a block commit does)."""
    _root, ops = world.prepare_commit()
    world._store.write_batch(ops)  # the world's own store, as the chain's commit does
    world.mark_committed()


def make_ctx(height: int, *, cycle_basefee: int = 10, cell_basefee: int = 1) -> BlockContext:
    env = BlockEnv(chain_id="t", height=height, timestamp_ms=0, fee_recipient=PROPOSER, beacon=b"",
                   parent_beacon=b"")
    return BlockContext(env=env, basefee_config=BasefeeConfig(), limits=ChainLimits(), flags=Cip11Flags(),
                        system_deployers=(), cycle_basefee=cycle_basefee, cell_basefee=cell_basefee)


def big_meter() -> Meter:
    return Meter(10**12, 10**12)


def sched(world: WorldState, at: int, height: int, payload: bytes = b"", actor: bytes = ACTOR, **kw: object) -> bytes:
    return schedule_timer(world, make_ctx(at), big_meter(), actor=actor, tx_sender=SENDER, height=height,
                          handler="handle_timer", payload=payload, **kw)  # type: ignore[arg-type]


# -- layout -------------------------------------------------------------------------------------

def test_key_layout_is_the_documented_one() -> None:
    tid = bytes([0x22]) * 32
    assert store.pointer_key(tid) == b"timer/t/" + tid
    assert store.parked_key(tid) == b"timer/g/" + tid
    assert store.pointer_value(258, 7) == bytes.fromhex("0000000000000102" "0000000000000007")
    assert store.height_key(258, 7) == b"timer/h/" + bytes.fromhex("0000000000000102") + bytes.fromhex(
        "0000000000000007")
    assert store.actor_key(ACTOR, tid) == b"timer/a/" + ACTOR + tid
    assert store.meta_key(ACTOR) == b"timer/m/" + ACTOR
    assert store.KEY_SEQ == b"timer/seq" and store.KEY_CURSOR == b"timer/cursor"


def test_state_encodings_golden_bytes() -> None:
    # ActorTimerMeta{0: live=1, 1: next_nonce=2}: map(2) 0→1 1→2
    assert store.ActorTimerMeta(1, 2).encode() == bytes.fromhex("a2" "0001" "0102")
    assert store.ActorTimerMeta.decode(bytes.fromhex("a200010102")) == store.ActorTimerMeta(1, 2)
    world = make_world()
    store.set_cursor(world, 300, 5)  # {0: 300 (19 012c), 1: 5}
    assert world.get(store.KEY_CURSOR) == bytes.fromhex("a2" "00" "19012c" "01" "05")
    assert store.get_cursor(world) == (300, 5)


def test_schedule_writes_exactly_the_documented_entries() -> None:
    world = make_world()
    tid = sched(world, 10, 12, b"p")
    # The record, by hand from docs/timers.md §3 (map of 9, keys 0..8): actor, height 12, payload "p", the id,
    # "handle_timer", fee payer = the actor, gas = max_cycles_per_fire 550,000 (0x086470), expires_at = 10 +
    # max_ttl_blocks 2,592,000 = 2,592,010 (0x278d0a), seq 0.
    record = (bytes.fromhex("a9" "0054") + ACTOR + bytes.fromhex("010c" "024170" "035820") + tid
              + bytes.fromhex("046c") + b"handle_timer" + bytes.fromhex("0554") + ACTOR
              + bytes.fromhex("061a00086470" "071a00278d0a" "0800"))
    assert world.changes() == {
        b"timer/a/" + ACTOR + tid: bytes([12]),                          # CBOR uint 12
        # the height-index entry holds the record (layout of S16, issue 20 item 4)
        b"timer/h/" + bytes.fromhex("000000000000000c" "0000000000000000"): record,
        b"timer/m/" + ACTOR: bytes.fromhex("a2" "0001" "0101"),          # live 1, next_nonce 1
        b"timer/seq": bytes([1]),
        # the id's pointer: the 16 bytes after timer/h/ in the entry's key (height 12, seq 0), raw
        b"timer/t/" + tid: bytes.fromhex("000000000000000c" "0000000000000000"),
    }
    t = store.get_timer(world, tid)
    assert t is not None and t.seq == 0 and t.height == 12 and t.encode() == record


def test_schedule_charges_the_cells_it_stores() -> None:
    world = make_world()
    meter = big_meter()
    schedule_timer(world, make_ctx(10), meter, actor=ACTOR, tx_sender=SENDER, height=12, handler="handle_timer",
                   payload=b"p")
    # len(key) + len(value) of each write (docs/timers.md §2): the entry, key 8 + 16, value the record of the test
    # above (map head 1, then per field key byte + item: 22, 2, 3, 35, 14, 22, 6, 6, 2); the pointer, key 8 + 32,
    # value 16; the actor index 8 + 20 + 32 and 1; the counters 8 + 20 and 5; the sequence 9 and 1
    record_len = 1 + 22 + 2 + 3 + 35 + 14 + 22 + 6 + 6 + 2
    assert meter.cells_used == (24 + record_len) + (40 + 16) + (60 + 1) + (28 + 5) + (9 + 1)


def test_lookups_by_id_read_the_pointer_then_the_entry() -> None:
    st = CountingStore()
    world = make_world(st)
    tid = sched(world, 10, 12, b"p")
    commit(world)
    world = make_world(st)
    st.reads = 0
    t = store.get_timer(world, tid)
    assert t is not None and t.timer_id == tid and st.reads == 2
    assert store.has_timer(world, tid) and not store.has_timer(world, bytes(32))


def test_a_malformed_pointer_or_a_dangling_one_is_a_decode_error() -> None:
    world = make_world()
    tid = sched(world, 10, 12, b"p")
    world.set(store.pointer_key(tid), bytes(15))
    with pytest.raises(DecodeError):
        store.get_timer(world, tid)
    world.set(store.pointer_key(tid), store.pointer_value(12, 1))  # no entry at (12, 1)
    with pytest.raises(DecodeError):
        store.get_timer(world, tid)
    world.set(store.pointer_key(tid), store.pointer_value(12, 0))
    t = store.get_timer(world, tid)
    assert t is not None
    world.set(store.height_key(12, 5), t.encode())  # a record under another (height, seq) than its own
    world.set(store.pointer_key(tid), store.pointer_value(12, 5))
    with pytest.raises(DecodeError):
        store.get_timer(world, tid)


def test_get_timer_rejects_ids_no_timer_can_have() -> None:
    world = make_world()
    assert store.get_timer(world, b"") is None
    assert store.get_timer(world, b"x" * 257) is None
    assert store.get_timer(world, bytes(32)) is None


# -- height index -------------------------------------------------------------------------------

def test_height_index_keeps_insertion_order_across_transactions() -> None:
    world = make_world()
    ids: list[bytes] = []
    for i in range(6):  # six transactions in one block, alternating actors, all due at height 50
        cp = world.checkpoint()
        ids.append(sched(world, 10, 50, bytes([i]), actor=ACTOR if i % 2 else OTHER))
        sched(world, 10, 40 + i, b"noise" + bytes([i]))
        world.release(cp)
    commit(world)
    ids.append(sched(world, 11, 50, b"next block"))  # a later block appends at the end
    assert store.timers_at(world, 50) == ids


def test_fifo_does_not_follow_timer_id_order() -> None:
    world = make_world()
    ids = [sched(world, 1, 9, bytes([i])) for i in range(20)]
    assert sorted(ids) != ids  # ids are hashes: FIFO must come from the sequence, not the id
    assert store.timers_at(world, 9) == ids


def test_scanning_a_height_reads_only_that_heights_keys() -> None:
    st = CountingStore()
    world = make_world(st)
    set_timer_config(world, BIG_CAP)
    for i in range(3_000):  # many timers at other heights, on both sides of 1_000
        sched(world, 1, 500 + (i % 1_000) * 2 + 1, i.to_bytes(4, "big"))  # odd heights 501..2499
    due = [sched(world, 1, 1_000, i.to_bytes(4, "big")) for i in range(5)]
    commit(world)
    world = make_world(st)
    st.reads = 0
    assert store.timers_at(world, 1_000) == due
    assert st.reads == len(due)  # the range holds exactly the due entries
    st.reads = 0
    assert store.timers_at(world, 1_002) == []
    assert st.reads == 0


def test_iter_index_from_a_start_reads_only_what_it_visits() -> None:
    st = CountingStore()
    world = make_world(st)
    set_timer_config(world, BIG_CAP)
    for i in range(2_000):
        sched(world, 1, 10 + i, b"")
    commit(world)
    world = make_world(st)
    st.reads = 0
    it = store.iter_index(world, (1_500, 0))
    got = [next(it) for _ in range(3)]
    assert [h for h, _s, _t in got] == [1_500, 1_501, 1_502]
    assert st.reads == 3


# -- per-actor index and counters -----------------------------------------------------------------

def test_per_actor_index_and_live_count_track_insert_and_remove() -> None:
    world = make_world()
    a = sched(world, 1, 5, b"a")
    b = sched(world, 1, 6, b"b")
    sched(world, 1, 7, b"c", actor=OTHER)
    assert sorted(store.actor_timers(world, ACTOR)) == sorted([(a, 5), (b, 6)])
    assert store.get_meta(world, ACTOR) == store.ActorTimerMeta(live=2, next_nonce=2)
    t = store.get_timer(world, a)
    assert t is not None
    store.remove_timer(world, t)
    assert store.actor_timers(world, ACTOR) == [(b, 6)]
    assert store.timers_at(world, 5) == []
    assert store.get_timer(world, a) is None
    # the nonce is never reused after a removal
    assert store.get_meta(world, ACTOR) == store.ActorTimerMeta(live=1, next_nonce=2)
    assert store.get_meta(world, OTHER) == store.ActorTimerMeta(live=1, next_nonce=1)


def test_sequence_counter_is_global_and_monotonic() -> None:
    world = make_world()
    ids = [sched(world, 1, 3, b"", actor=ACTOR), sched(world, 1, 3, b"", actor=OTHER), sched(world, 1, 2, b"")]
    seqs = [t.seq for t in (store.get_timer(world, i) for i in ids) if isinstance(t, Timer)]
    assert seqs == [0, 1, 2]
    assert store.next_seq(world) == 3


def test_timer_writes_are_journaled_and_undone_by_revert() -> None:
    world = make_world()
    kept = sched(world, 1, 5, b"kept")
    commit(world)
    cp = world.checkpoint()
    dropped = sched(world, 1, 5, b"dropped")
    assert store.timers_at(world, 5) == [kept, dropped]
    world.revert(cp)
    assert store.timers_at(world, 5) == [kept]
    assert store.get_timer(world, dropped) is None
    assert world.changes() == {}
    cp = world.checkpoint()
    t = store.get_timer(world, kept)
    assert t is not None
    store.remove_timer(world, t)
    world.revert(cp)
    assert store.timers_at(world, 5) == [kept] and store.get_timer(world, kept) == t
