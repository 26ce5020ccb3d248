"""CIP-1 ``set_timeout`` from real actor source on a real chain (blocks produced and committed, End of Block
included): GBAs are deployed actors whose ``get_gas_bid(context)`` runs read-only in the PVM. Covers the policy
gate, a priced fire paid by the owner with the tip to the proposer, cancel, and GBAs that loop, raise, return
garbage or bid above the owner's balance — each a typed outcome at a bounded cost while blocks keep coming."""

from __future__ import annotations

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.frame import CallFrame, TxScope
from cowboy_node.execution.actors.host import Host
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler import queue
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.timers.policy import get_timer_policy
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import STATUS_SUCCESS, Event, Receipt
from cowboy_protocol.codec import decode
from cowboy_protocol.types.instructions import CallActor, DeployActor, UpdateTimerPolicy
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.helpers import ALICE, ALICE_SK, FEE_RECIPIENT, make_dev_genesis, make_tx, run_under_hash_seeds, transfer
from tests.unit.chain.test_chain import produce
from tests.unit.eob_helpers import make_ctx
from tests.unit.execution.scheduler.cip1_helpers import cip1_world, gba_address, owner

OWNER_SRC = '''import pvm_host

def schedule(payload):
    gba, rest = payload[:20], payload[20:].split(b",")
    tid = pvm_host.set_timeout(int(rest[0]), gba, "on_timeout", b"d" + rest[0], 0, int(rest[1]))
    pvm_host.set_state(b"tid", tid)
    return tid

def on_timeout(payload):
    seen = pvm_host.get_state(b"fired") or b""
    pvm_host.set_state(b"fired", seen + str(pvm_host.current_block()).encode() + b":" + payload + b",")
    return b""

def cancel(payload):
    return b"1" if pvm_host.cancel_timeout(pvm_host.get_state(b"tid")) else b"0"
'''
GOOD_GBA = '''import json

def get_gas_bid(payload):
    ctx = json.loads(payload)
    late = ctx["current_block_height"] - ctx["trigger_block_height"]
    assert ctx["owner_actor_balance"] > 0 and ctx["basefee_cell"] >= 0 and ctx["last_block_cycle_usage"] >= 0
    return json.dumps({"max_fee_per_cycle": ctx["basefee_cycle"] + 100, "tip_per_cycle": 3 + late}).encode()
'''
LOOP_GBA = '''def get_gas_bid(payload):
    n = 0
    while True:
        n += 1
'''
RAISE_GBA = '''def get_gas_bid(payload):
    raise ValueError("no bid today")
'''
GARBAGE_GBA = '''def get_gas_bid(payload):
    return b"{'max_fee_per_cycle': lots}"
'''
GREEDY_GBA = '''def get_gas_bid(payload):
    return b'{"max_fee_per_cycle": 18000000000000000000, "tip_per_cycle": 17000000000000000000}'
'''
FUNDS = 10**22
GBA_CAP = 100_000


class Net:
    """A dev chain whose blocks ALICE's transactions fill; every block is produced and committed."""

    def __init__(self, *, cip1: bool = True) -> None:
        self.dev = make_dev_genesis()
        self.chain = Chain(MemoryStore(), self.dev.genesis)
        self.nonce = 0
        self.owner = derive_actor_address(ALICE, b"o", OWNER_SRC)
        self.gba = {name: derive_actor_address(ALICE, name.encode(), src)
                    for name, src in (("good", GOOD_GBA), ("loop", LOOP_GBA), ("raise", RAISE_GBA),
                                      ("garbage", GARBAGE_GBA), ("greedy", GREEDY_GBA))}
        sources = {"good": GOOD_GBA, "loop": LOOP_GBA, "raise": RAISE_GBA, "garbage": GARBAGE_GBA,
                   "greedy": GREEDY_GBA}
        txs = [self._tx(DeployActor(source=OWNER_SRC, salt=b"o", init_handler="", init_payload=b""))]
        txs += [self._tx(DeployActor(source=src, salt=name.encode(), init_handler="", init_payload=b""))
                for name, src in sources.items()]
        txs.append(self._transfer(self.owner))
        if cip1:
            txs.append(self._tx(UpdateTimerPolicy(TimerPolicy(mode=MODE_CIP1))))  # ALICE is a system deployer
        self.receipts, self.events = self.block(*txs)
        assert all(r.status == STATUS_SUCCESS for r in self.receipts), self.receipts

    def _tx(self, ins: DeployActor | CallActor | UpdateTimerPolicy):  # type: ignore[no-untyped-def]
        t = make_tx(ALICE_SK, self.nonce, ins, cycles_limit=2_000_000, cells_limit=200_000)
        self.nonce += 1
        return t

    def _transfer(self, to: bytes):  # type: ignore[no-untyped-def]
        t = transfer(ALICE_SK, self.nonce, to, FUNDS)
        self.nonce += 1
        return t

    def schedule(self, gba: str, height: int, expires_at: int = 0):  # type: ignore[no-untyped-def]
        return self._tx(CallActor(actor=self.owner, handler="schedule",
                                  payload=self.gba[gba] + b"%d,%d" % (height, expires_at)))

    def block(self, *txs) -> tuple[list[Receipt], list[Event]]:  # type: ignore[no-untyped-def]
        p = produce(self.chain, self.dev, list(txs), ts=1_700_000_000_000 + 1000 * (self.chain.height + 1))
        self.chain.commit(p)
        self.cycle_basefee = p.result.cycle_basefee
        return list(p.result.receipts), list(p.result.block_events)

    def fired(self) -> bytes | None:
        return actor_store.get_state(self.chain.world(), self.owner, b"fired")

    def balance(self, who: bytes) -> int:
        return get_account(self.chain.world(), who).balance


def _topics(events: list[Event], topic: str) -> list[dict[int, object]]:
    return [decode(e.data) for e in events if e.topic == topic]


def test_set_timeout_is_refused_under_the_default_fifo_policy() -> None:
    net = Net(cip1=False)
    r, _ev = net.block(net.schedule("good", 5))
    assert (r[0].status, r[0].error_code) == (1, "timer_extension_disabled")
    assert list(net.chain.world().iterate(b"cip1/")) == []


def test_a_timeout_fires_at_its_height_priced_by_its_gba_and_paid_by_its_owner() -> None:
    net = Net()
    assert get_timer_policy(net.chain.world()).mode == MODE_CIP1
    r, _ev = net.block(net.schedule("good", 5))  # block 2
    assert r[0].status == STATUS_SUCCESS, r
    tid = actor_store.get_state(net.chain.world(), net.owner, b"tid")
    assert tid is not None and queue.get_timer(net.chain.world(), tid) is not None
    _r, ev = net.block()  # block 3
    _r, ev = net.block()  # block 4
    assert net.fired() is None
    owner_before, proposer_before = net.balance(net.owner), net.balance(FEE_RECIPIENT)
    _r, ev = net.block()  # block 5: due
    assert net.fired() == b"5:d5,"
    fired = _topics(ev, "timer.fired")
    assert len(fired) == 1 and fired[0][0] == tid and fired[0][1] is True
    cycles = fired[0][2]
    assert isinstance(cycles, int) and cycles > 0
    # an empty block: the proposer's only income is cycles x the GBA's tip (3: not late)
    assert net.balance(FEE_RECIPIENT) - proposer_before == 3 * cycles
    (bid,) = _topics(ev, "cip1.bid")
    assert bid[0] == tid and bid[1] == 3 and isinstance(bid[2], int) and 0 < bid[2] <= GBA_CAP
    paid = int.from_bytes(bid[3], "big") + int.from_bytes(fired[0][4], "big")  # type: ignore[arg-type]
    assert owner_before - net.balance(net.owner) == paid and queue.get_timer(net.chain.world(), tid) is None


def test_a_cancelled_timeout_never_fires() -> None:
    net = Net()
    net.block(net.schedule("good", 4))
    r, _ev = net.block(net._tx(CallActor(actor=net.owner, handler="cancel", payload=b"")))
    assert r[0].status == STATUS_SUCCESS
    for _ in range(3):
        net.block()
    assert net.fired() is None and queue.get_meta(net.chain.world(), net.owner).live == 0


def test_bad_gbas_get_typed_outcomes_at_bounded_cost_and_blocks_keep_coming() -> None:
    net = Net()
    r, _ev = net.block(net.schedule("loop", 4), net.schedule("raise", 4), net.schedule("garbage", 4),
                       net.schedule("greedy", 4, 6), net.schedule("good", 4))  # block 2
    assert all(x.status == STATUS_SUCCESS for x in r), r
    net.block()  # block 3
    owner_before = net.balance(net.owner)
    _r, ev = net.block()  # block 4: all five due
    refused = {e[1]: e for e in _topics(ev, "cip1.bid_refused")}
    assert set(refused) == {"gba_out_of_cycles", "gba_failed", "gba_bad_bid", "gba_bid_exceeds_balance"}
    loop = refused["gba_out_of_cycles"]
    # stopped at the cap, charged exactly the cap at the block's basefee, dropped
    assert loop[2] == GBA_CAP and loop[3] == (GBA_CAP * net.cycle_basefee).to_bytes(16, "big") and loop[4] is True
    assert refused["gba_failed"][4] is True and refused["gba_bad_bid"][4] is True
    assert refused["gba_bid_exceeds_balance"][4] is False  # a market refusal: deferred, asked again next block
    accepted = _topics(ev, "cip1.bid")
    assert len(accepted) == 1 and accepted[0][1] == 3  # the good GBA: tip 3 (not late)
    gba_fees = sum(int.from_bytes(e[3], "big") for e in [*refused.values(), *accepted])  # type: ignore[arg-type]
    fired = _topics(ev, "timer.fired")
    assert len(fired) == 1 and net.fired() == b"4:d4,"  # the good one still runs in the same block
    fire_fee = int.from_bytes(fired[0][4], "big")  # type: ignore[arg-type]
    assert owner_before - net.balance(net.owner) == gba_fees + fire_fee  # every fee, from the owner only
    _r, ev = net.block()  # block 5: only the greedy one is left, refused again
    assert [e[1] for e in _topics(ev, "cip1.bid_refused")] == ["gba_bid_exceeds_balance"]
    _r, ev = net.block()  # block 6: its last height
    _r, ev = net.block()  # block 7: past expires_at -> removed
    assert [e[1] for e in _topics(ev, "timer.expired")] == [6]
    assert queue.get_meta(net.chain.world(), net.owner).live == 0
    assert net.chain.height == 7




# --- the host calls on a bare Host: exact metering and refusals -------------------------------------------

def _host(world: WorldState, actor: bytes) -> tuple[Host, Meter]:
    meter = Meter(10**9, 10**9)
    frame = CallFrame(actor=actor, sender=actor, tx_sender=actor, tx_hash=bytes(32), depth=1)
    return Host(world, make_ctx(10), frame, meter, [], TxScope(), actor, lambda *args: b""), meter


def test_host_set_timeout_charges_200_cycles_and_the_bytes_written() -> None:
    world = cip1_world()
    host, meter = _host(world, owner(1))
    before = dict(world.changes())
    tid = host.set_timeout(20, bytearray(gba_address(0)), "on_timeout", bytearray(b"x"), 0, 0)
    written = sum(len(k) + len(v) for k, v in world.changes().items() if v is not None and before.get(k) != v)
    assert meter.cycles_used == 200 and meter.cells_used == written
    t = queue.get_timer(world, tid)
    assert t is not None
    assert (t.gba, t.payload, t.gas_limit, t.expires_at) == (gba_address(0), b"x", 550_000, 10 + 2_592_000)
    other, other_meter = _host(world, owner(2))
    with pytest.raises(TxFailed) as e:
        other.cancel_timeout(tid)
    assert e.value.code == "timer_unauthorized" and other_meter.cycles_used == 200
    assert host.cancel_timeout(tid) is True and host.cancel_timeout(tid) is False
    assert meter.cycles_used == 600


def test_host_set_timeout_refusals_are_typed_and_cost_200_cycles() -> None:
    host, meter = _host(cip1_world(TimerPolicy()), owner(1))
    with pytest.raises(TxFailed) as e:
        host.set_timeout(20, gba_address(0))
    assert e.value.code == "timer_extension_disabled" and meter.cycles_used == 200
    host, meter = _host(cip1_world(), owner(1))
    with pytest.raises(TxFailed) as e:
        host.set_timeout(20, gba_address(0), "h", b"", False)  # a bool is not a gas limit
    assert e.value.code == "timer_invalid_input" and meter.cycles_used == 200


CHAIN_SCRIPT = """
from tests.unit.execution.scheduler.test_cip1_actors import Net
net = Net()
net.block(net.schedule("loop", 4), net.schedule("raise", 4), net.schedule("garbage", 4),
          net.schedule("greedy", 4, 6), net.schedule("good", 4), net.schedule("good", 5))
for _ in range(5):
    net.block()
print(net.chain.head.header.state_root.hex(), net.chain.head.hash().hex())
"""


def test_a_cip1_chain_with_pvm_gbas_has_the_same_roots_under_two_hash_seeds() -> None:
    outs = run_under_hash_seeds(CHAIN_SCRIPT, timeout=180)
    assert outs[0] == outs[1] and len(outs[0].split()) == 2
