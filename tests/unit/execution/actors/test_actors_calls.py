"""Synchronous actor-to-actor calls: chains, depth limit, failure isolation, re-entrancy."""

from __future__ import annotations

import pytest

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.invoke import MAX_CALL_DEPTH, invoke
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS
from tests.helpers import ALICE
from tests.unit.execution.actors.test_actors_helpers import Env, make_env, returned

# A and B are the same source deployed twice (different salts); the payload routes the calls.
PINGPONG = '''import pvm_host

def start(payload):
    # payload: address of B; A -> B.relay -> A.leaf
    pvm_host.set_state(b"mark", b"A-before-call")
    out = pvm_host.call_actor(payload, "relay", pvm_host.self_address(), 1_000_000)
    return b"start<" + out

def relay(payload):
    # payload: the address to call back
    me = pvm_host.context()
    pvm_host.emit_event("relay", me["sender"])
    return b"relay<" + pvm_host.call_actor(payload, "leaf", b"", 1_000_000)

def leaf(payload):
    ctx = pvm_host.context()
    return b"leaf:" + ctx["sender"] + (pvm_host.get_state(b"mark") or b"-")

def down(payload):
    n = payload[0]
    if n <= 1:
        return b"bottom"
    try:
        return pvm_host.call_actor(pvm_host.self_address(), "down", bytes([n - 1]), 50_000_000)
    except pvm_host.HostError as e:
        return ("caught:" + e.name + ":" + str(e.code) + "@" + str(n)).encode()

def write_then_call(payload):
    pvm_host.set_state(b"caller", b"kept")
    try:
        pvm_host.call_actor(payload[:20], payload[20:].decode(), b"", 1_000_000)
    except pvm_host.HostError as e:
        return ("caught:" + e.name).encode()
    return b"ok"

def write_then_fail(payload):
    pvm_host.set_state(b"callee", b"should vanish")
    pvm_host.emit_event("lost", b"")
    raise RuntimeError("callee gives up")

def write_and_spin(payload):
    pvm_host.set_state(b"callee", b"should vanish")
    while True:
        pass

def call_uncaught(payload):
    pvm_host.set_state(b"caller", b"reverted too")
    return pvm_host.call_actor(payload, "write_then_fail", b"", 1_000_000)
'''


def _two() -> tuple[Env, bytes, bytes]:
    env = make_env()
    ra, a = env.deploy(PINGPONG, salt=b"A")
    rb, b = env.deploy(PINGPONG, salt=b"B")
    assert ra.status == rb.status == STATUS_SUCCESS
    return env, a, b


def test_a_calls_b_calls_back_a_with_senders_and_uncommitted_writes_visible() -> None:
    env, a, b = _two()
    r = env.call(a, "start", b)
    assert r.status == STATUS_SUCCESS, r
    # re-entrancy into A is allowed and sees A's write made earlier in the same transaction
    assert returned(r) == b"start<relay<leaf:" + b + b"A-before-call"
    relay = [e for e in r.events if e.topic == "relay"]
    assert len(relay) == 1 and relay[0].emitter == b and relay[0].data == a


def test_depth_32_is_allowed_and_33_is_refused_catchably() -> None:
    env, a, _ = _two()
    r = env.call(a, "down", bytes([MAX_CALL_DEPTH]), cycles=30_000_000)
    assert returned(r) == b"bottom"
    r = env.call(a, "down", bytes([MAX_CALL_DEPTH + 1]), cycles=30_000_000)
    # frame 32 (n=2) tried to open frame 33 and caught the refusal (pvm-host code 5 = Forbidden)
    assert returned(r) == b"caught:call_depth_exceeded:5@2"


def test_invoke_beyond_max_depth_raises() -> None:
    env, a, _ = _two()
    with pytest.raises(TxFailed) as info:
        invoke(env.world, env.ctx, actor=a, handler="leaf", payload=b"", sender=ALICE,
               tx_sender=ALICE, tx_hash=bytes(32), meter=Meter(100_000, 1_000), events=[], depth=MAX_CALL_DEPTH + 1)
    assert info.value.code == "call_depth_exceeded"


def test_callee_failure_reverts_only_the_callee_and_is_catchable() -> None:
    env, a, b = _two()
    r = env.call(a, "write_then_call", b + b"write_then_fail")
    assert r.status == STATUS_SUCCESS, r
    assert returned(r) == b"caught:handler_error"
    assert store.get_state(env.world, a, b"caller") == b"kept"
    assert store.get_state(env.world, b, b"callee") is None
    assert "lost" not in [e.topic for e in r.events]


def test_callee_out_of_cycles_is_charged_to_the_caller() -> None:
    env, a, b = _two()
    r = env.call(a, "write_then_call", b + b"write_and_spin")
    assert returned(r) == b"caught:out_of_cycles"
    assert r.cycles_used > 1_000_000  # the callee's whole allowance is on the caller's bill
    assert store.get_state(env.world, b, b"callee") is None


def test_calling_a_missing_actor_is_not_found() -> None:
    env, a, _ = _two()
    r = env.call(a, "write_then_call", bytes(19) + b"\x42" + b"leaf")
    assert returned(r) == b"caught:actor_not_found"


def test_uncaught_callee_failure_fails_the_transaction_and_reverts_everything() -> None:
    env, a, b = _two()
    r = env.call(a, "call_uncaught", b)
    assert r.status == STATUS_FAILED and r.error_code == "handler_error"
    assert store.get_state(env.world, a, b"caller") is None
    assert store.get_state(env.world, b, b"callee") is None


DEEP = '''import pvm_host

def rec(n, k):
    if n == 0:
        if k <= 1:
            return b"x"
        return pvm_host.call_actor(pvm_host.self_address(), "down", bytes([k - 1]), 10_000_000)
    return rec(n - 1, k)

def down(payload):
    return rec(62, payload[0]) + b"."
'''


def test_full_depth_chain_with_deep_recursion_does_not_depend_on_the_node_stack() -> None:
    env = make_env()
    _, addr = env.deploy(DEEP)

    def nested(k: int) -> tuple[int, int, bytes]:
        if k:
            return nested(k - 1)
        r = env.call(addr, "down", bytes([MAX_CALL_DEPTH]), cycles=30_000_000)
        return r.status, r.cycles_used, returned(r)

    shallow = nested(0)
    deep = nested(800)  # as if the node were already 800 frames deep
    assert shallow == deep
    assert shallow[0] == STATUS_SUCCESS and shallow[2] == b"x" + b"." * MAX_CALL_DEPTH
