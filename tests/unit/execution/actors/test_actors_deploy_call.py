"""DeployActor / CallActor through execute_transaction, failures and their charging, EOB entry points."""

from __future__ import annotations

from dataclasses import replace

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import source_hash
from cowboy_node.execution.actors.executor import DEPLOY_BASE_CYCLES, DEPLOY_CYCLES_PER_SOURCE_BYTE
from cowboy_node.execution.actors.invoke import read_only_call, run_message, run_timer_fire
from cowboy_node.execution.fees import TX_BASE_CYCLES
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS
from cowboy_protocol.codec import decode, encode
from tests.helpers import ALICE, ALICE_FUNDS, BOB
from tests.unit.execution.actors.test_actors_helpers import make_env, returned

COUNTER = '''import pvm_host

def init(payload):
    pvm_host.set_state(b"count", payload)
    return b""

def inc(payload):
    raw = pvm_host.get_state(b"count")
    n = int.from_bytes(raw or b"", "big") + 1
    pvm_host.set_state(b"count", n.to_bytes(8, "big"))
    pvm_host.emit_event("counted", n.to_bytes(8, "big"))
    return n.to_bytes(8, "big")

def whoami(payload):
    ctx = pvm_host.context()
    return ctx["sender"] + ctx["actor_addr"] + ctx["tx_hash"]

def spin(payload):
    pvm_host.set_state(b"count", b"spinning")
    while True:
        pass

def not_bytes(payload):
    return "text"

def boom(payload):
    pvm_host.set_state(b"count", b"boom")
    raise ValueError("no way")
'''


def test_deploy_then_call_writes_state_and_emits_events() -> None:
    env = make_env()
    r, addr = env.deploy(COUNTER, init="init", init_payload=(5).to_bytes(8, "big"))
    assert r.status == STATUS_SUCCESS, r
    rec = store.get_actor(env.world, addr)
    assert rec is not None
    assert rec.creator == ALICE and rec.deployed_at == 1 and rec.source_hash == source_hash(COUNTER)
    assert rec.handlers == ("init", "inc", "whoami", "spin", "not_bytes", "boom")
    assert store.get_source(env.world, rec.source_hash) == COUNTER
    assert store.get_state(env.world, addr, b"count") == (5).to_bytes(8, "big")
    assert [e.topic for e in r.events] == ["actor.deployed"]
    assert decode(r.events[0].data) == {0: addr, 1: ALICE, 2: source_hash(COUNTER)}

    r = env.call(addr, "inc")
    assert r.status == STATUS_SUCCESS, r
    assert [(e.emitter, e.topic) for e in r.events] == [(addr, "counted"), (addr, "actor.returned")]
    assert r.events[0].data == (6).to_bytes(8, "big")
    assert r.events[1].data == encode((6).to_bytes(8, "big"))
    assert store.get_state(env.world, addr, b"count") == (6).to_bytes(8, "big")


def test_deploy_cycles_are_base_plus_per_source_byte() -> None:
    env = make_env()
    src = "def f(p):\n    return p\n"
    r, _ = env.deploy(src)
    assert r.status == STATUS_SUCCESS
    assert r.cycles_used == TX_BASE_CYCLES + DEPLOY_BASE_CYCLES + DEPLOY_CYCLES_PER_SOURCE_BYTE * len(src)


def test_context_reports_the_tx_sender_actor_and_tx_hash() -> None:
    env = make_env()
    _, addr = env.deploy(COUNTER)
    r = env.call(addr, "whoami")
    out = returned(r)
    assert out[:20] == ALICE and out[20:40] == addr and len(out) == 72 and out[40:] != bytes(32)


def test_same_address_is_refused_and_identical_source_is_stored_once() -> None:
    env = make_env()
    r1, a1 = env.deploy(COUNTER)
    r2, _ = env.deploy(COUNTER)
    assert r2.status == STATUS_FAILED and r2.error_code == "actor_exists"
    r3, a3 = env.deploy(COUNTER, salt=b"\x01")
    assert r3.status == STATUS_SUCCESS and a3 != a1
    # the second deployment shares code/<hash>: it pays only for its record (and its longer tx body)
    src_cells = len(store.code_key(source_hash(COUNTER))) + len(COUNTER.encode())
    assert r1.cells_used - r3.cells_used == src_cells - 1


def _assert_rejected(source: str, code: str) -> None:
    env = make_env()
    r, addr = env.deploy(source)
    assert r.status == STATUS_FAILED
    assert r.error_code == code
    assert r.fee_paid > 0
    assert get_account(env.world, ALICE).balance == ALICE_FUNDS - r.fee_paid
    assert get_account(env.world, ALICE).nonce == 1
    assert store.get_actor(env.world, addr) is None
    assert store.get_source(env.world, source_hash(source)) is None


def test_syntax_error_is_refused_with_the_rule_and_line_0() -> None:
    # The parser's line is CPython's and differs between versions: it is not consensus data (rejection.py).
    _assert_rejected("def ok(p):\n    return p\n\ndef bad(p)\n    return p\n", "actor_rejected:syntax_error:0")


def test_forbidden_construct_is_refused_with_line_and_rule() -> None:
    _assert_rejected("def ok(p):\n    return p\n\ndef leak(p):\n    return p.__class__\n",
                     "actor_rejected:dunder_attribute:5")
    _assert_rejected("import os\n\ndef f(p):\n    return p\n", "actor_rejected:import_not_allowed:1")


def test_failing_init_reverts_the_whole_deployment() -> None:
    env = make_env()
    r, addr = env.deploy(COUNTER, init="boom")
    assert r.status == STATUS_FAILED and r.error_code == "handler_error"
    assert store.get_actor(env.world, addr) is None
    assert store.get_state(env.world, addr, b"count") is None
    assert r.events == ()


def test_out_of_cycles_reverts_writes_and_charges_the_whole_limit() -> None:
    env = make_env()
    _, addr = env.deploy(COUNTER, init="init", init_payload=b"\x01")
    before = get_account(env.world, ALICE).balance
    r = env.call(addr, "spin", cycles=200_000)
    assert r.status == STATUS_FAILED and r.error_code == "out_of_cycles"
    assert r.cycles_used == 200_000
    assert store.get_state(env.world, addr, b"count") == b"\x01"
    # make_tx prices: max_fee 200_000 (≥ basefee + tip), tip 1_000, basefee 100_000
    assert r.fee_paid == 200_000 * 101_000 + r.cells_used * 101_000
    assert get_account(env.world, ALICE).balance == before - r.fee_paid


def test_bad_return_and_raising_handlers_fail_with_the_pvm_code() -> None:
    env = make_env()
    _, addr = env.deploy(COUNTER, init="init", init_payload=b"\x01")
    r = env.call(addr, "not_bytes")
    assert (r.status, r.error_code) == (STATUS_FAILED, "bad_return_type")
    r = env.call(addr, "boom")
    assert (r.status, r.error_code) == (STATUS_FAILED, "handler_error")
    assert store.get_state(env.world, addr, b"count") == b"\x01"
    r = env.call(addr, "missing")
    assert r.error_code == "no_such_handler"
    r = env.call(BOB, "inc")
    assert r.error_code == "actor_not_found"


def test_read_only_call_never_writes() -> None:
    env = make_env()
    _, addr = env.deploy(COUNTER, init="init", init_payload=(1).to_bytes(8, "big"))
    out, err, used = read_only_call(env.world, env.ctx, actor=addr, handler="inc", payload=b"", cycles_limit=100_000)
    assert out == (2).to_bytes(8, "big") and err is None and used > 0
    assert store.get_state(env.world, addr, b"count") == (1).to_bytes(8, "big")
    out, err, used = read_only_call(env.world, env.ctx, actor=addr, handler="spin", payload=b"", cycles_limit=5_000)
    assert out is None and err == "out_of_cycles" and used == 5_000
    assert store.get_state(env.world, addr, b"count") == (1).to_bytes(8, "big")


def test_timer_fire_and_message_entry_points_never_raise() -> None:
    env = make_env()
    _, addr = env.deploy(COUNTER, init="init", init_payload=(1).to_bytes(8, "big"))
    timer = Timer(actor_address=addr, height=1, payload=b"", timer_id=bytes(32), handler="whoami", fee_payer=addr,
                  gas_limit_per_fire=100_000, expires_at=10, seq=0)
    out = run_timer_fire(env.world, env.ctx, timer, Meter(100_000, 10_000))
    assert out.ok and out.error_code is None and out.cycles_used > 0

    out = run_timer_fire(env.world, env.ctx, replace(timer, handler="inc"), Meter(100_000, 10_000))
    assert out.ok and [e.topic for e in out.events] == ["counted"]
    assert store.get_state(env.world, addr, b"count") == (2).to_bytes(8, "big")

    failed = run_timer_fire(env.world, env.ctx, replace(timer, handler="spin"), Meter(7_000, 10_000))
    assert not failed.ok and failed.error_code == "out_of_cycles" and failed.cycles_used == 7_000
    gone = run_message(env.world, env.ctx, sender=BOB, target=BOB, payload=b"x", meter=Meter(10_000, 1_000))
    assert not gone.ok and gone.error_code == "actor_not_found"
    # COUNTER has no handle_message
    nohandler = run_message(env.world, env.ctx, sender=BOB, target=addr, payload=b"x", meter=Meter(10_000, 1_000))
    assert not nohandler.ok and nohandler.error_code == "no_such_handler"


def test_message_runs_handle_message_with_the_sender() -> None:
    env = make_env()
    src = ("import pvm_host\n\ndef handle_message(payload):\n"
           "    pvm_host.set_state(b\"from\", pvm_host.context()[\"sender\"] + payload)\n    return b\"\"\n")
    _, addr = env.deploy(src)
    out = run_message(env.world, env.ctx, sender=BOB, target=addr, payload=b"hi", meter=Meter(100_000, 10_000))
    assert out.ok, out
    assert store.get_state(env.world, addr, b"from") == BOB + b"hi"


def test_code_load_is_charged_per_source_byte_once_per_run() -> None:
    from cowboy_node.execution.actors.invoke import LOAD_CYCLES_PER_SOURCE_BYTE

    env = make_env()
    target = "def ping(p):\n    return p\n"
    padded = target + "# " + "x" * 998 + "\n"  # same statements, 1,001 more bytes
    _, t1 = env.deploy(target)
    _, t2 = env.deploy(padded)
    caller = ("import pvm_host\n\ndef twice(p):\n    pvm_host.call_actor(p, \"ping\", b\"\", 100_000)\n"
              "    return pvm_host.call_actor(p, \"ping\", b\"\", 100_000)\n")
    _, c = env.deploy(caller)
    r1, r2 = env.call(c, "twice", t1), env.call(c, "twice", t2)
    assert r1.status == r2.status == STATUS_SUCCESS
    assert r2.cycles_used - r1.cycles_used == LOAD_CYCLES_PER_SOURCE_BYTE * 1_001
