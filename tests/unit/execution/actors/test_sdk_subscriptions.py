"""Event subscriptions (pvm_host.subscribe_event & co.): deliveries through the End of Block Mailbox, budget,
bid order, unsubscribe, and the forgery guard (an event delivery is never read as a runner reply)."""

from __future__ import annotations

from cowboy_node.execution.actors import subscriptions
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from cowboy_protocol.types.params import Cip11Flags
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis
from tests.unit.execution.jobs.test_jobs_e2e import Net

EMITTER = '''import pvm_host


def shout(payload):
    pvm_host.emit_event("price", payload)
    return b""
'''
SUBSCRIBER = '''import pvm_host


def follow(payload):
    sid = pvm_host.subscribe_event(payload[:20], "price", "on_price", int.from_bytes(payload[20:28], "big"),
                                   int.from_bytes(payload[28:], "big"))
    pvm_host.set_state(b"sid", sid)
    return sid


def on_price(payload):
    seen = pvm_host.get_state(b"seen") or b""
    pvm_host.set_state(b"seen", seen + payload + b"|" + pvm_host.context()["sender"][:1])
    return b""


def bump(payload):
    return str(pvm_host.update_bid(pvm_host.get_state(b"sid"), 5)).encode()


def top(payload):
    return str(pvm_host.topup_subscription(pvm_host.get_state(b"sid"), 1)).encode()


def leave(payload):
    return str(pvm_host.unsubscribe_event(pvm_host.get_state(b"sid"))).encode()
'''


def _net() -> tuple[Net, bytes, list[bytes]]:
    net = Net(make_dev_genesis(Cip11Flags.for_phase(2), balances={ALICE: 10**24}))
    net.block([net.tx(ALICE_SK, DeployActor(EMITTER, b"", "", b""))]
              + [net.tx(ALICE_SK, DeployActor(SUBSCRIBER, bytes([i]), "", b"")) for i in range(2)])
    emitter = derive_actor_address(ALICE, b"", EMITTER)
    subs = [derive_actor_address(ALICE, bytes([i]), SUBSCRIBER) for i in range(2)]
    net.block([net.tx(ALICE_SK, Transfer(a, 10**20)) for a in subs])
    return net, emitter, subs


def _call(net: Net, actor: bytes, handler: str, payload: bytes = b"") -> object:
    p = net.block([net.tx(ALICE_SK, CallActor(actor, handler, payload))])
    r = p.result.receipts[0]
    assert r.error_code is None, r
    return r


def _follow(net: Net, sub: bytes, emitter: bytes, gas: int, bid: int) -> None:
    _call(net, sub, "follow", emitter + gas.to_bytes(8, "big") + bid.to_bytes(8, "big"))


def test_events_reach_subscribers_in_end_of_block_until_the_budget_runs_out() -> None:
    net, emitter, (s0, s1) = _net()
    _follow(net, s0, emitter, 2_000_000, 0)
    _call(net, emitter, "shout", b"42")  # delivered in this block's End of Block Mailbox
    assert get_state(net.chain.world(), s0, b"seen") == b"42|" + s0[:1]  # run as the subscriber's own work
    assert get_state(net.chain.world(), s1, b"seen") is None  # not subscribed
    sub = subscriptions.get(net.chain.world(), get_state(net.chain.world(), s0, b"sid") or b"")
    assert sub is not None and sub.gas_remaining < 2_000_000
    # a budget below the minimum after a delivery ends the subscription
    _follow(net, s1, emitter, subscriptions.MIN_SUBSCRIPTION_GAS_PREPAID, 0)
    _call(net, emitter, "shout", b"43")
    assert get_state(net.chain.world(), s1, b"seen") == b"43|" + s1[:1]
    assert subscriptions.get(net.chain.world(), get_state(net.chain.world(), s1, b"sid") or b"") is None
    _call(net, emitter, "shout", b"44")
    assert get_state(net.chain.world(), s1, b"seen") == b"43|" + s1[:1]


def test_bids_order_deliveries_and_unsubscribe_returns_the_budget() -> None:
    net, emitter, (s0, s1) = _net()
    _follow(net, s0, emitter, 1_000_000, 1)
    _follow(net, s1, emitter, 1_000_000, 3)
    world = net.chain.world()
    order = [k[-33:] for k, _ in world.iterate(subscriptions.INDEX_PREFIX + emitter)]
    assert order == [get_state(world, s1, b"sid"), get_state(world, s0, b"sid")]  # higher bid first
    assert _call(net, s0, "bump").error_code is None  # type: ignore[attr-defined]
    world = net.chain.world()
    order = [k[-33:] for k, _ in world.iterate(subscriptions.INDEX_PREFIX + emitter)]
    assert order == [get_state(world, s0, b"sid"), get_state(world, s1, b"sid")]  # 1 + 5 > 3
    _call(net, s0, "top")
    p = net.block([net.tx(ALICE_SK, CallActor(s0, "leave", b""))])
    assert p.result.receipts[0].error_code is None
    assert subscriptions.get(net.chain.world(), get_state(net.chain.world(), s0, b"sid") or b"") is None
    _call(net, emitter, "shout", b"7")
    assert get_state(net.chain.world(), s0, b"seen") is None and get_state(net.chain.world(), s1, b"seen") is not None


def test_an_event_delivery_is_never_read_as_a_runner_reply() -> None:
    # a named-handler entry not sent by the Job Dispatcher (an event delivery, whose payload the emitter chose)
    # is never translated as a runner reply (actors/invoke.run_callback)
    from cowboy_node.execution.actors.invoke import run_callback
    from cowboy_node.execution.jobs import sdk_jobs
    from cowboy_node.execution.meter import Meter
    from cowboy_node.execution.system_state import JOB_DISPATCHER
    from cowboy_protocol.codec import encode
    from tests.unit.eob_helpers import make_ctx, make_world

    world, ctx = make_world(), make_ctx(10)
    target, emitter, cid, job = b"\x05" * 20, b"\x06" * 20, b"\x07" * 32, b"\x08" * 32
    world.set(sdk_jobs.PREFIX + job, sdk_jobs.SdkJob(target, cid, "f__resume", "http").encode())
    forged = encode({0: job, 1: True, 2: b"forged", 3: "verified", 4: "", 5: cid, 6: None})
    run_callback(world, ctx, sender=emitter, target=target, handler="on_price", payload=forged,
                 meter=Meter(1_000_000, 100_000))
    assert world.get(sdk_jobs.PREFIX + job) is not None  # not consumed: not read as a reply
    assert emitter != JOB_DISPATCHER


ON_EVENT = '''from cowboy_sdk import actor, on_event, public


@actor
class Follower:
    @public
    def init(self, payload):
        return b"ok"

    @on_event(emitter="0x%s", topic="price", gas=1_000_000, bid=2)
    def on_price(self, payload):
        self.storage["last"] = payload
        return b""
'''


def test_on_event_subscribes_in_init_and_receives_the_events() -> None:
    net, emitter, _ = _net()
    src = ON_EVENT % emitter.hex()
    net.block([net.tx(ALICE_SK, DeployActor(src, b"", "", b""))])
    follower = derive_actor_address(ALICE, b"", src)
    net.block([net.tx(ALICE_SK, Transfer(follower, 10**20))])
    _call(net, follower, "init", b"")
    [(key, _)] = list(net.chain.world().iterate(subscriptions.INDEX_PREFIX + emitter))
    sub = subscriptions.get(net.chain.world(), key[-33:])
    assert sub is not None and (sub.subscriber, sub.handler, sub.bid) == (follower, "on_price", 2)
    _call(net, emitter, "shout", b"9")
    from cowboy_sdk import codec as sdk_codec
    assert sdk_codec.decode(get_state(net.chain.world(), follower, b"last") or b"") == b"9"
