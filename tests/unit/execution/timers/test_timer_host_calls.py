"""The draft timer host calls (docs/actors.md §4, docs/timers.md §12.4): set_state_watch, set_interval,
cancel_watch and cancel_interval, from real actor source on a real chain (blocks produced and committed, End
of Block included), plus the exact metering and refusals on a bare ``Host``."""

from __future__ import annotations

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.frame import CallFrame, TxScope
from cowboy_node.execution.actors.host import Host
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.timers import interval, watch
from cowboy_node.execution.timers import timer_state as timer_store
from cowboy_node.execution.timers.policy import TimerPolicy, get_timer_policy, set_timer_policy
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import STATUS_SUCCESS, Receipt
from cowboy_protocol.types.instructions import CallActor, DeployActor
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, make_tx, run_under_hash_seeds, transfer
from tests.unit.chain.test_chain import produce
from tests.unit.eob_helpers import ACTOR, OTHER, SENDER, fund, make_ctx, make_world

SRC = '''import pvm_host

def _count(key):
    n = pvm_host.get_state(key)
    return 0 if n is None else int(n)

def watch(payload):
    tid = pvm_host.set_state_watch([(payload[:20], payload[20:])], "on_change", b"w")
    pvm_host.set_state(b"wid", tid)
    return tid

def on_change(payload):
    pvm_host.set_state(b"hits", str(_count(b"hits") + 1).encode())
    pvm_host.set_state(b"hit_data", payload)
    return b""

def unwatch(payload):
    return b"1" if pvm_host.cancel_watch(pvm_host.get_state(b"wid")) else b"0"

def every(payload):
    tid = pvm_host.set_interval(int(payload), "tick", b"i")
    pvm_host.set_state(b"iid", tid)
    return tid

def tick(payload):
    seen = pvm_host.get_state(b"ticks") or b""
    pvm_host.set_state(b"ticks", seen + str(pvm_host.current_block()).encode() + payload + b",")
    if _count(b"stop_") and len(seen.split(b",")) >= _count(b"stop_"):
        pvm_host.cancel_interval(pvm_host.get_state(b"iid"))
    return b""

def stop(payload):
    return b"1" if pvm_host.cancel_interval(pvm_host.get_state(b"iid")) else b"0"

def put(payload):
    pvm_host.set_state(payload[:5], payload[5:])
    return b""

def cancel_foreign_watch(payload):
    pvm_host.cancel_watch(payload)
    return b""

def cancel_foreign_interval(payload):
    pvm_host.cancel_interval(payload)
    return b""

def bad_watch(payload):
    pvm_host.set_state(b"before", b"1")
    pvm_host.set_state_watch([(payload, b"k")], "on_change")
    return b""

def bad_interval(payload):
    pvm_host.set_state(b"before", b"1")
    pvm_host.set_interval(int(payload), "tick")
    return b""
'''
FUNDS = 10**22


class Net:
    """A dev chain whose blocks ALICE's transactions fill; every block is produced and committed."""

    def __init__(self) -> None:
        self.dev = make_dev_genesis()
        self.chain = Chain(MemoryStore(), self.dev.genesis)
        self.nonce = 0
        self.a = derive_actor_address(ALICE, b"a", SRC)
        self.b = derive_actor_address(ALICE, b"b", SRC)
        self.block(self._tx(DeployActor(source=SRC, salt=b"a", init_handler="", init_payload=b"")),
                   self._tx(DeployActor(source=SRC, salt=b"b", init_handler="", init_payload=b"")),
                   self._transfer(self.a), self._transfer(self.b))

    def _tx(self, ins: DeployActor | CallActor):  # type: ignore[no-untyped-def]
        t = make_tx(ALICE_SK, self.nonce, ins, cycles_limit=2_000_000, cells_limit=200_000)
        self.nonce += 1
        return t

    def _transfer(self, to: bytes):  # type: ignore[no-untyped-def]
        t = transfer(ALICE_SK, self.nonce, to, FUNDS)
        self.nonce += 1
        return t

    def call(self, actor: bytes, handler: str, payload: bytes = b""):  # type: ignore[no-untyped-def]
        return self._tx(CallActor(actor=actor, handler=handler, payload=payload))

    def block(self, *txs) -> list[Receipt]:  # type: ignore[no-untyped-def]
        p = produce(self.chain, self.dev, list(txs), ts=1_700_000_000_000 + 1000 * (self.chain.height + 1))
        self.chain.commit(p)
        return list(p.result.receipts)

    def empty_blocks_until(self, height: int) -> None:
        while self.chain.height < height:
            self.block()

    def state(self, actor: bytes, key: bytes) -> bytes | None:
        return actor_store.get_state(self.chain.world(), actor, key)

    @property
    def height(self) -> int:
        return self.chain.height


def _ok(receipts: list[Receipt]) -> None:
    assert all(r.status == STATUS_SUCCESS for r in receipts), receipts


def _returned(r: Receipt) -> bytes:
    from tests.unit.execution.actors.test_actors_helpers import returned

    return returned(r)


# --- real actors on a real chain -------------------------------------------------------------------


def test_a_watch_fires_when_the_watched_key_changes_and_stops_when_cancelled() -> None:
    net = Net()
    # block 2: A watches B's keys starting with b"price"; B changes b"price" in the same block: no hit then
    _ok(net.block(net.call(net.a, "watch", net.b + b"price"), net.call(net.b, "put", b"price100")))
    wid = net.state(net.a, b"wid")
    assert wid is not None and watch.get_watch(net.chain.world(), wid) is not None
    assert net.state(net.a, b"hits") is None
    _ok(net.block(net.call(net.b, "put", b"price101")))  # block 3: a watched key changes -> one hit
    assert net.state(net.a, b"hits") == b"1" and net.state(net.a, b"hit_data") == b"w"
    _ok(net.block(net.call(net.b, "put", b"volum7")))  # block 4: another key of B: no hit
    _ok(net.block(net.call(net.a, "put", b"price9")))  # block 5: the same key name in A's own storage: no hit
    assert net.state(net.a, b"hits") == b"1"
    _ok(net.block(net.call(net.b, "put", b"pricex"), net.call(net.b, "put", b"pricey")))  # block 6: one hit
    assert net.state(net.a, b"hits") == b"2"
    r = net.block(net.call(net.a, "unwatch"))  # block 7
    _ok(r)
    assert _returned(r[0]) == b"1" and watch.get_watch(net.chain.world(), wid) is None
    assert timer_store.get_meta(net.chain.world(), net.a).live == 0
    _ok(net.block(net.call(net.b, "put", b"price102")))  # block 8: no watch left
    assert net.state(net.a, b"hits") == b"2"
    assert _returned(net.block(net.call(net.a, "unwatch"))[0]) == b"0"  # a second cancel finds nothing


def test_an_interval_fires_repeatedly_and_stops_when_cancelled() -> None:
    net = Net()
    _ok(net.block(net.call(net.a, "every", b"2")))  # block 2: first due at 4, then 6, 8...
    iid = net.state(net.a, b"iid")
    assert iid is not None and interval.get_interval(net.chain.world(), iid) is not None
    net.empty_blocks_until(7)
    assert net.state(net.a, b"ticks") == b"4i,6i,"
    r = net.block(net.call(net.a, "stop"))  # block 8: the timer due at 8 is cancelled before End of Block
    _ok(r)
    assert _returned(r[0]) == b"1"
    net.empty_blocks_until(12)
    assert net.state(net.a, b"ticks") == b"4i,6i,"
    world = net.chain.world()
    assert timer_store.get_timer(world, iid) is None and interval.get_interval(world, iid) is None
    assert timer_store.get_meta(world, net.a).live == 0


def test_an_interval_cancelled_from_its_own_handler_fires_no_more() -> None:
    net = Net()
    _ok(net.block(net.call(net.a, "put", b"stop_2"), net.call(net.a, "every", b"1")))  # ticks at 3, 4 then stops
    net.empty_blocks_until(8)
    assert net.state(net.a, b"ticks") == b"3i,4i,"
    iid = net.state(net.a, b"iid")
    assert iid is not None and interval.get_interval(net.chain.world(), iid) is None


def test_cancelling_another_actors_watch_or_interval_is_refused_and_changes_nothing() -> None:
    net = Net()
    _ok(net.block(net.call(net.a, "watch", net.b + b"k"), net.call(net.a, "every", b"3")))  # block 2: due at 5
    wid, iid = net.state(net.a, b"wid"), net.state(net.a, b"iid")
    assert wid is not None and iid is not None
    root = net.chain.head.header.state_root
    r = net.block(net.call(net.b, "cancel_foreign_watch", wid), net.call(net.b, "cancel_foreign_interval", iid))
    assert [(x.status, x.error_code) for x in r] == [(1, "timer_unauthorized")] * 2
    world = net.chain.world()
    assert watch.get_watch(world, wid) is not None and interval.get_interval(world, iid) is not None
    assert timer_store.get_timer(world, iid) is not None
    assert net.chain.head.header.state_root != root  # fees were paid; the timers themselves are untouched
    net.empty_blocks_until(5)
    assert net.state(net.a, b"ticks") == b"5i,"


@pytest.mark.parametrize(("handler", "payload", "code"), [
    ("bad_watch", b"short", "timer_watch_prefixes_invalid"),
    ("bad_interval", b"0", "timer_interval_invalid"),
    ("bad_interval", b"2592001", "timer_interval_invalid"),
])
def test_bad_arguments_from_an_actor_fail_the_call_and_change_nothing(handler: str, payload: bytes,
                                                                      code: str) -> None:
    net = Net()
    r = net.block(net.call(net.a, handler, payload))
    assert (r[0].status, r[0].error_code) == (1, code)
    world = net.chain.world()
    assert actor_store.get_state(world, net.a, b"before") is None  # the handler's earlier write was reverted
    assert timer_store.get_meta(world, net.a).live == 0
    assert list(world.iterate(b"timer/w/")) == [] and list(world.iterate(b"timer/i/")) == []


def test_the_policy_can_disable_both_extensions_and_actors_then_get_a_typed_refusal() -> None:
    from tests.unit.execution.actors.test_actors_helpers import make_env

    env = make_env(height=5)
    r, a = env.deploy(SRC)
    assert r.status == STATUS_SUCCESS
    set_timer_policy(env.world, TimerPolicy(max_watch_prefixes=0, max_interval_blocks=0))
    before = timer_store.get_meta(env.world, a)
    for handler, payload in (("watch", a + b"k"), ("every", b"2")):
        rec = env.call(a, handler, payload)
        assert (rec.status, rec.error_code) == (1, "timer_extension_disabled"), rec
    assert timer_store.get_meta(env.world, a) == before
    set_timer_policy(env.world, TimerPolicy())  # re-enabled by governance: the same calls work
    assert env.call(a, "watch", a + b"k").status == STATUS_SUCCESS
    assert env.call(a, "every", b"2").status == STATUS_SUCCESS


def test_under_the_globalbox_policy_watches_and_intervals_fire_through_the_mailbox() -> None:
    from cowboy_protocol.types.instructions import UpdateTimerPolicy
    from cowboy_protocol.types.timer_policy import MODE_GLOBALBOX

    net = Net()
    _ok(net.block(net._tx(UpdateTimerPolicy(TimerPolicy(mode=MODE_GLOBALBOX)))))  # ALICE is a system deployer
    assert get_timer_policy(net.chain.world()).mode == MODE_GLOBALBOX
    _ok(net.block(net.call(net.a, "watch", net.b + b"price"), net.call(net.a, "put", b"stop_2"),
                  net.call(net.a, "every", b"2")))  # block 3: ticks due at 5 and 7, cancelled from the 2nd
    _ok(net.block(net.call(net.b, "put", b"price1")))  # block 4: a hit
    net.empty_blocks_until(10)
    assert net.state(net.a, b"hits") == b"1" and net.state(net.a, b"ticks") == b"5i,7i,"
    iid = net.state(net.a, b"iid")
    assert iid is not None and interval.get_interval(net.chain.world(), iid) is None


SDK_SRC = '''import pvm_host
from cowboy_sdk import runtime

def start(payload):
    runtime.set_interval(2, "tick", b"s")
    return b""

def _tick(data):
    seen = pvm_host.get_state(b"ticks") or b""
    pvm_host.set_state(b"ticks", seen + str(pvm_host.current_block()).encode() + data + b",")

def handle_timer(payload):
    runtime.dispatch_interval(payload, {"tick": _tick})
    return b""
'''


def test_the_sdks_own_runtime_set_interval_keeps_its_rearming_semantics() -> None:
    """``cowboy_sdk.runtime.set_interval`` is the SDK's one-shot + re-arm, not ``pvm_host.set_interval``:
    one pending timer at a time, no interval record, a fire every 2 blocks (docs/actors.md §8)."""
    net = Net()
    addr = derive_actor_address(ALICE, b"s", SDK_SRC)
    _ok(net.block(net._tx(DeployActor(source=SDK_SRC, salt=b"s", init_handler="", init_payload=b"")),
                  net._transfer(addr)))
    _ok(net.block(net.call(addr, "start")))  # block 3: due at 5, re-armed for 7, 9...
    net.empty_blocks_until(9)
    assert net.state(addr, b"ticks") == b"5s,7s,9s,"
    world = net.chain.world()
    assert timer_store.get_meta(world, addr).live == 1 and list(world.iterate(b"timer/i/")) == []


# --- exact metering and refusals on a bare Host ---------------------------------------------------


def _host(world, ctx=None, actor: bytes = ACTOR) -> tuple[Host, Meter]:  # type: ignore[no-untyped-def]
    meter = Meter(10**9, 10**9)
    frame = CallFrame(actor=actor, sender=SENDER, tx_sender=SENDER, tx_hash=bytes(32), depth=1)
    host = Host(world, ctx or make_ctx(10), frame, meter, [], TxScope(), SENDER,
                lambda *args: b"")
    return host, meter


def _written(world, before: dict[bytes, bytes | None]) -> int:  # type: ignore[no-untyped-def]
    """Bytes of every key/value the call added or changed (what cells must charge)."""
    out = 0
    for k, v in world.changes().items():
        if before.get(k, b"absent") != v and v is not None:
            out += len(k) + len(v)
    return out


def test_set_state_watch_costs_200_cycles_and_the_bytes_it_writes() -> None:
    world = make_world()
    before = dict(world.changes())
    host, meter = _host(world)
    wid = host.set_state_watch([(OTHER, b"price"), (OTHER, "vol")], "on_change", b"data")
    assert meter.cycles_used == 200
    assert meter.cells_used == _written(world, before) > 0
    w = watch.get_watch(world, wid)
    assert w is not None and w.prefixes == (b"actor/" + OTHER + b"/kv/price", b"actor/" + OTHER + b"/kv/vol")
    assert (w.handler, w.payload, w.fee_payer, w.actor_address) == ("on_change", b"data", ACTOR, ACTOR)
    before = dict(world.changes())
    host, meter = _host(world)
    assert host.cancel_watch(wid) is True and (meter.cycles_used, meter.cells_used) == (200, 0)
    assert host.cancel_watch(wid) is False and meter.cycles_used == 400
    assert watch.get_watch(world, wid) is None and list(world.iterate(b"timer/x")) == []


def test_set_interval_costs_200_cycles_and_the_bytes_it_writes() -> None:
    world = make_world()
    before = dict(world.changes())
    host, meter = _host(world)
    tid = host.set_interval(3, "tick", bytearray(b"d"), b"", 5_000, 0)
    assert meter.cycles_used == 200 and meter.cells_used == _written(world, before) > 0
    t = timer_store.get_timer(world, tid)
    assert t is not None and (t.height, t.handler, t.payload, t.gas_limit_per_fire) == (13, "tick", b"d", 5_000)
    assert tid in _host(world)[0].get_timers()  # an interval timer is a height timer
    host, meter = _host(world)
    assert host.cancel_interval(tid) is True and (meter.cycles_used, meter.cells_used) == (200, 0)
    assert timer_store.get_timer(world, tid) is None and interval.get_interval(world, tid) is None


def test_cancel_interval_of_a_fired_timer_checks_its_owner() -> None:
    """Between its fire and its roll an interval timer is not pending; the fired list proves its owner."""
    world = make_world()
    tid = _host(world)[0].set_interval(1, "tick")
    fired = timer_store.get_timer(world, tid)
    assert isinstance(fired, Timer)
    timer_store.remove_timer(world, fired)  # as DeliverTimers does before running it
    ctx = make_ctx(11)
    ctx.eob.fired_timers.append(fired)
    other, _ = _host(world, ctx, actor=OTHER)
    with pytest.raises(TxFailed) as e:
        other.cancel_interval(tid)
    assert e.value.code == "timer_unauthorized" and interval.get_interval(world, tid) is not None
    assert _host(world, make_ctx(11), actor=OTHER)[0].cancel_interval(tid) is False  # not provably its own
    assert interval.get_interval(world, tid) is not None
    assert _host(world, ctx)[0].cancel_interval(tid) is True and interval.get_interval(world, tid) is None


K = (OTHER, b"k")


@pytest.mark.parametrize(("call", "code"), [
    (lambda h: h.set_state_watch([], "h"), "timer_watch_prefixes_invalid"),
    (lambda h: h.set_state_watch(K, "h"), "timer_watch_prefixes_invalid"),  # a pair, not a list of pairs
    (lambda h: h.set_state_watch([K] * 9, "h"), "timer_watch_prefixes_invalid"),  # over max_watch_prefixes
    (lambda h: h.set_state_watch([K, K], "h"), "timer_watch_prefixes_invalid"),  # duplicates
    (lambda h: h.set_state_watch([(OTHER[:19], b"k")], "h"), "timer_watch_prefixes_invalid"),
    (lambda h: h.set_state_watch([(OTHER, 5)], "h"), "timer_watch_prefixes_invalid"),
    (lambda h: h.set_state_watch([(OTHER, b"k" * 227)], "h"), "timer_watch_prefixes_invalid"),
    (lambda h: h.set_state_watch([(OTHER, "\udc80")], "h"), "timer_watch_prefixes_invalid"),
    (lambda h: h.set_state_watch([K], ""), "timer_handler_invalid"),
    (lambda h: h.set_state_watch([K], "\udc80"), "timer_handler_invalid"),
    (lambda h: h.set_state_watch([K], 7), "timer_handler_invalid"),
    (lambda h: h.set_state_watch([K], "h", "text"), "timer_invalid_input"),
    (lambda h: h.set_state_watch([K], "h", b"x" * ((1 << 20) + 1)), "timer_payload_too_large"),
    (lambda h: h.set_state_watch([K], "h", b"", OTHER), "timer_fee_payer_not_allowed"),
    (lambda h: h.set_state_watch([K], "h", b"", b"short"), "timer_invalid_input"),
    (lambda h: h.set_state_watch([K], "h", b"", b"", 10**9), "timer_gas_limit_too_high"),
    (lambda h: h.set_state_watch([K], "h", b"", b"", False), "timer_invalid_input"),
    (lambda h: h.set_state_watch([K], "h", b"", b"", 0, 10), "timer_expiry_not_future"),
    (lambda h: h.set_state_watch([K], "h", b"", b"", 0, 10**12), "timer_expiry_too_far"),
    (lambda h: h.set_state_watch([K], "h", b"", b"", 0, "11"), "timer_invalid_input"),
    (lambda h: h.set_interval(0, "h"), "timer_interval_invalid"),
    (lambda h: h.set_interval(True, "h"), "timer_interval_invalid"),
    (lambda h: h.set_interval("2", "h"), "timer_interval_invalid"),
    (lambda h: h.set_interval(2, ""), "timer_handler_invalid"),
    (lambda h: h.set_interval(2, "h", None), "timer_invalid_input"),
    (lambda h: h.set_interval(2, "h", b"", OTHER), "timer_fee_payer_not_allowed"),
    (lambda h: h.set_interval(2, "h", b"", b"", -1), "timer_invalid_input"),
    (lambda h: h.cancel_watch(b""), "timer_invalid_input"),
    (lambda h: h.cancel_watch("id"), "timer_invalid_input"),
    (lambda h: h.cancel_interval(b"x" * 257), "timer_invalid_input"),
])
def test_bad_arguments_raise_typed_timer_codes_and_write_nothing(call, code: str) -> None:  # type: ignore[no-untyped-def]
    world = make_world()
    fund(world, ACTOR)
    before = dict(world.changes())
    host, meter = _host(world)
    with pytest.raises(TxFailed) as e:
        call(host)
    assert e.value.code == code
    assert dict(world.changes()) == before
    assert (meter.cycles_used, meter.cells_used) == (200, 0)  # a refused call costs what a valid one does


@pytest.mark.parametrize("call", [lambda h: h.set_state_watch([K], "h"), lambda h: h.set_interval(2, "h")])
def test_a_disabled_extension_is_refused_for_its_base_cost(call) -> None:  # type: ignore[no-untyped-def]
    world = make_world()
    set_timer_policy(world, TimerPolicy(max_watch_prefixes=0, max_interval_blocks=0))
    before = dict(world.changes())
    host, meter = _host(world)
    with pytest.raises(TxFailed) as e:
        call(host)
    assert e.value.code == "timer_extension_disabled"
    assert (meter.cycles_used, meter.cells_used) == (200, 0) and dict(world.changes()) == before


def test_zero_limits_are_the_governed_disabled_setting_with_golden_bytes() -> None:
    """0 used to be refused by ``TimerPolicy.validate``; it now means "extension disabled" (docs/timers.md §12)."""
    off = TimerPolicy(max_watch_prefixes=0, max_interval_blocks=0)
    raw = bytes.fromhex("a8 0000 0101 0200 03190100 0410 0500 06190100 0700")  # by hand: keys 5 and 7 -> uint 0
    assert off.encode() == raw and TimerPolicy.decode(raw) == off
    world = make_world()
    set_timer_policy(world, off)  # validates


def test_calls_after_the_frame_ended_are_refused() -> None:
    host, _ = _host(make_world())
    host._close()
    for call in (lambda: host.set_state_watch([K], "h"), lambda: host.set_interval(2, "h"),
                 lambda: host.cancel_watch(b"x"), lambda: host.cancel_interval(b"x")):
        with pytest.raises(TxFailed) as e:
            call()
        assert e.value.code == "forbidden"


# --- determinism ------------------------------------------------------------------------------------

SCRIPT = r'''
from tests.unit.execution.timers.test_timer_host_calls import Net
net = Net()
net.block(net.call(net.a, "watch", net.b + b"p"), net.call(net.a, "every", b"2"))
net.block(net.call(net.b, "put", b"pxxxx1"))
net.block(net.call(net.b, "put", b"pxxxx2"), net.call(net.a, "unwatch"))
net.block(net.call(net.a, "stop"))
assert net.state(net.a, b"hits") == b"1" and net.state(net.a, b"ticks") == b"4i,", (
    net.state(net.a, b"hits"), net.state(net.a, b"ticks"))
print(net.chain.head.header.state_root.hex(), net.chain.head.hash().hex())
'''


def test_timer_host_call_workload_state_root_does_not_depend_on_hash_seed() -> None:
    outs = run_under_hash_seeds(SCRIPT)
    assert outs[0] == outs[1] and len(outs[0].split()) == 2
