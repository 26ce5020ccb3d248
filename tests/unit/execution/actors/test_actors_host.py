"""The pvm_host functions as actors see them: state, scan, crypto, events, balances, timers, messages."""

from __future__ import annotations

import pytest

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.host import MAX_EVENT_PAYLOAD_BYTES, SCAN_CYCLES_PER_LIMIT
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.timers import timer_state as timer_store
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS
from cowboy_protocol.crypto import ed25519, secp256k1
from tests.helpers import ALICE, ALICE_SK, BOB, transfer
from tests.unit.execution.actors.test_actors_helpers import Env, make_env, returned

HOST = '''import pvm_host

def put(payload):
    # payload: key 0x00 value
    i = payload.index(b"\\x00")
    pvm_host.set_state(payload[:i], payload[i + 1:])
    return b""

def scan(payload):
    limit = int.from_bytes(payload[:4], "big")
    out = b""
    for k, v in pvm_host.scan_state_prefix(payload[4:], limit):
        out += k + b"=" + v + b";"
    return out

def hash(payload):
    return pvm_host.keccak256(payload)

def verify(payload):
    # alg(1) | klen(1) | key | slen(1) | sig | message
    alg = payload[0]
    k = payload[1]
    key = payload[2:2 + k]
    s = payload[2 + k]
    sig = payload[3 + k:3 + k + s]
    msg = payload[3 + k + s:]
    try:
        return b"T" if pvm_host.verify_signature(alg, key, msg, sig) else b"F"
    except ValueError as e:
        return b"ValueError"

def emit(payload):
    # payload: name length (1) | name | data
    n = payload[0]
    try:
        first = pvm_host.emit_event(payload[1:1 + n].decode(), payload[1 + n:])
        second = pvm_host.emit_event("again", b"")
    except ValueError:
        return b"ValueError"
    except TypeError:
        return b"TypeError"
    return bytes([first["emit_id"], second["emit_id"], len(first["sync_outcomes"])])

def emit_text(payload):
    try:
        pvm_host.emit_event("t", "not bytes")
    except TypeError:
        return b"TypeError"
    return b"accepted"

def text_input(payload):
    pvm_host.set_state("k", b"v")
    try:
        pvm_host.emit_event("bad\\ud800", b"")
    except ValueError:
        return pvm_host.get_state(b"k")
    return b"accepted"

def pay(payload):
    amount = int.from_bytes(payload[20:], "big")
    pvm_host.transfer_balance(payload[:20], amount)
    return b""

def pay_negative(payload):
    try:
        pvm_host.transfer_balance(payload, -1)
    except ValueError:
        return b"ValueError"
    return b"accepted"

def reserved(payload):
    try:
        pvm_host.set_state(b"__INITIALIZED__", b"1")
    except ValueError:
        pass
    else:
        return b"set_state accepted a reserved key"
    try:
        pvm_host.set_reserved_state(b"other", b"1")
    except ValueError:
        pass
    else:
        return b"set_reserved_state accepted an ordinary key"
    pvm_host.set_reserved_state(b"__INITIALIZED__", b"\\x01")
    return pvm_host.get_state(b"__INITIALIZED__")

def bad_key(payload):
    try:
        pvm_host.get_state(123)
    except TypeError:
        return b"TypeError"
    return b"accepted"

def owner(payload):
    ctx = pvm_host.context()
    ctx["sender"] = b"forged"
    return pvm_host.actor_owner() + pvm_host.context()["sender"] + pvm_host.self_address()

def timer(payload):
    height = int.from_bytes(payload, "big")
    tid = pvm_host.schedule_timer(height, b"tick")
    pvm_host.set_state(b"timer", tid)
    return tid

def timer_ex(payload):
    height = int.from_bytes(payload, "big")
    return pvm_host.schedule_timer_ex(height, b"tock", b"", 50_000, 0, height + 5)

def extend(payload):
    pvm_host.extend_timer(payload[:-8], int.from_bytes(payload[-8:], "big"))
    return b"extended"

def cancel(payload):
    pvm_host.cancel_timer(payload)
    return b"cancelled"

def message(payload):
    pvm_host.send_message(payload[:20], payload[20:])
    return b"sent"

def message_then_fail(payload):
    pvm_host.send_message(payload[:20], payload[20:])
    raise RuntimeError("undo")
'''


def _host_env() -> tuple[Env, bytes]:
    env = make_env(height=10)
    r, addr = env.deploy(HOST)
    assert r.status == STATUS_SUCCESS, r
    return env, addr


def test_set_state_charges_key_plus_value_cells() -> None:
    env, a = _host_env()
    r1 = env.call(a, "put", b"k\x00" + b"v")
    r2 = env.call(a, "put", b"k\x00" + b"v" * 101)
    assert r1.status == r2.status == STATUS_SUCCESS
    # 100 more value bytes written; the tx body carries 100 more payload bytes + 1 longer CBOR length header
    assert r2.cells_used - r1.cells_used == 100 + 101
    assert store.get_state(env.world, a, b"k") == b"v" * 101


def test_scan_returns_ascending_keys_up_to_the_limit_and_charges_by_limit() -> None:
    env, a = _host_env()
    for k in (b"user:b", b"user:a", b"other", b"user:c", b"user:"):
        env.call(a, "put", k + b"\x00" + k.upper())
    r = env.call(a, "scan", (10).to_bytes(4, "big") + b"user:")
    assert returned(r) == b"user:=USER:;user:a=USER:A;user:b=USER:B;user:c=USER:C;"
    r2 = env.call(a, "scan", (2).to_bytes(4, "big") + b"user:")
    assert returned(r2) == b"user:=USER:;user:a=USER:A;"
    assert store.scan_state(env.world, a, b"user:", 2) == [(b"user:", b"USER:"), (b"user:a", b"USER:A")]
    # cycles are charged by limit, not by what comes back; the limit is clamped to 1000
    r10, r20 = (env.call(a, "scan", n.to_bytes(4, "big") + b"zz") for n in (10, 20))
    assert r20.cycles_used - r10.cycles_used == 10 * SCAN_CYCLES_PER_LIMIT
    r1000, r5000 = (env.call(a, "scan", n.to_bytes(4, "big") + b"zz") for n in (1000, 5000))
    assert r1000.cycles_used == r5000.cycles_used
    # returned bytes are charged as cells: 4 entries (key and value of equal length) vs none; r's payload
    # prefix b"user:" is 3 bytes longer than b"zz" in the tx body; the actor.returned event carries
    # CBOR(r's 54-byte result) = 2 + 54 bytes vs CBOR(b"") = 1 byte
    entries = sum(2 * len(k) for k in (b"user:", b"user:a", b"user:b", b"user:c"))
    assert len(returned(r)) == 54
    assert r.cells_used - r10.cells_used == entries + 3 + (2 + 54 - 1)


def test_keccak256_matches_the_known_vector() -> None:
    env, a = _host_env()
    assert returned(env.call(a, "hash", b"")).hex() == \
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"


def _verify(env: Env, a: bytes, alg: int, key: bytes, sig: bytes, msg: bytes) -> bytes:
    return returned(env.call(a, "verify", bytes([alg, len(key)]) + key + bytes([len(sig)]) + sig + msg))


def test_verify_signature_ed25519() -> None:
    env, a = _host_env()
    seed = bytes(range(32))
    pub = ed25519.public_key_from_seed(seed)
    sig = ed25519.sign(seed, b"hello")
    assert _verify(env, a, 2, pub, sig, b"hello") == b"T"
    assert _verify(env, a, 2, pub, sig, b"hellO") == b"F"
    assert _verify(env, a, 2, pub, sig[:63], b"hello") == b"ValueError"
    assert _verify(env, a, 7, pub, sig, b"hello") == b"ValueError"


def test_verify_signature_secp256k1_recoverable() -> None:
    env, a = _host_env()
    from cowboy_protocol.crypto.keccak import keccak256

    sig = secp256k1.sign_recoverable(ALICE_SK, keccak256(b"hello"))
    pub = secp256k1.private_key_to_public_key(ALICE_SK, compressed=True)
    assert _verify(env, a, 1, ALICE, sig, b"hello") == b"T"
    assert _verify(env, a, 1, pub, sig, b"hello") == b"T"
    assert _verify(env, a, 1, BOB, sig, b"hello") == b"F"
    assert _verify(env, a, 1, ALICE, sig, b"hellO") == b"F"
    assert _verify(env, a, 1, ALICE, sig[:64] + b"\x07", b"hello") == b"F"
    assert _verify(env, a, 1, ALICE, sig[:64], b"hello") == b"ValueError"


def test_emit_event_limits_and_result() -> None:
    env, a = _host_env()
    r = env.call(a, "emit", b"\x04ping" + b"data")
    assert returned(r) == bytes([1, 2, 0])
    assert [(e.topic, e.data, e.emitter) for e in r.events[:2]] == [("ping", b"data", a), ("again", b"", a)]
    assert returned(env.call(a, "emit", bytes([64]) + b"n" * 64)) == bytes([1, 2, 0])
    assert returned(env.call(a, "emit", bytes([65]) + b"n" * 65)) == b"ValueError"
    assert returned(env.call(a, "emit", b"\x00")) == b"ValueError"
    big = env.call(a, "emit", b"\x01n" + b"x" * (MAX_EVENT_PAYLOAD_BYTES + 1), cells=400_000)
    assert returned(big) == b"ValueError"
    assert returned(env.call(a, "emit_text")) == b"TypeError"


def test_str_keys_are_utf8_and_lone_surrogates_are_refused() -> None:
    env, a = _host_env()
    r = env.call(a, "text_input")
    assert returned(r) == b"v" and store.get_state(env.world, a, b"k") == b"v"


def test_transfer_balance_moves_funds_and_refuses_overdraft() -> None:
    env, a = _host_env()
    r = env.call(a, "pay", BOB + (1).to_bytes(8, "big"))
    assert r.status == STATUS_FAILED and r.error_code == "insufficient_balance"
    tx = transfer(ALICE_SK, env.nonce, a, 1_000)
    env.nonce += 1
    from cowboy_node.execution.transactions import execute_transaction

    assert execute_transaction(env.world, tx, env.ctx).status == STATUS_SUCCESS
    r = env.call(a, "pay", BOB + (400).to_bytes(8, "big"))
    assert r.status == STATUS_SUCCESS, r
    assert get_account(env.world, a).balance == 600 and get_account(env.world, BOB).balance == 400
    assert any(e.topic == "transfer" and e.emitter == a for e in r.events)
    r = env.call(a, "pay", BOB + (601).to_bytes(8, "big"))
    assert r.error_code == "insufficient_balance"
    assert get_account(env.world, a).balance == 600
    assert returned(env.call(a, "pay_negative", BOB)) == b"ValueError"


def test_reserved_keys_and_argument_types() -> None:
    env, a = _host_env()
    assert returned(env.call(a, "reserved")) == b"\x01"
    assert returned(env.call(a, "bad_key")) == b"TypeError"


def test_context_is_a_fresh_copy_and_owner_is_the_deployer() -> None:
    env, a = _host_env()
    assert returned(env.call(a, "owner")) == ALICE + ALICE + a


def test_schedule_timer_through_an_actor() -> None:
    env, a = _host_env()
    r = env.call(a, "timer", (15).to_bytes(8, "big"))
    assert r.status == STATUS_SUCCESS, r
    tid = returned(r)
    t = timer_store.get_timer(env.world, tid)
    assert t is not None and t.actor_address == a and t.height == 15 and t.payload == b"tick"
    assert t.fee_payer == a and t.handler == "handle_timer"
    r = env.call(a, "timer_ex", (20).to_bytes(8, "big"))
    t2 = timer_store.get_timer(env.world, returned(r))
    assert t2 is not None and t2.gas_limit_per_fire == 50_000 and t2.expires_at == 25
    # extend: an existing timer is extended; a missing one is a silent no-op
    r = env.call(a, "extend", tid + (40).to_bytes(8, "big"))
    assert r.status == STATUS_SUCCESS
    assert timer_store.get_timer(env.world, tid).expires_at >= 40  # type: ignore[union-attr]
    r = env.call(a, "extend", b"\x99" * 32 + (40).to_bytes(8, "big"))
    assert r.status == STATUS_SUCCESS and returned(r) == b"extended"
    r = env.call(a, "cancel", tid)
    assert r.status == STATUS_SUCCESS and timer_store.get_timer(env.world, tid) is None


def test_timer_violation_fails_the_transaction_with_the_timer_code() -> None:
    env, a = _host_env()
    before = timer_store.get_meta(env.world, a)
    r = env.call(a, "timer", (10).to_bytes(8, "big"))  # not above the current height 10
    assert r.status == STATUS_FAILED and r.error_code == "timer_height_not_future"
    assert timer_store.actor_timers(env.world, a) == []
    assert timer_store.get_meta(env.world, a) == before
    assert store.get_state(env.world, a, b"timer") is None
    r = env.call(a, "extend", b"\x99" * 32 + (5).to_bytes(8, "big"))
    assert r.error_code == "timer_expiry_not_future"


def test_cancel_timer_of_another_actor_is_unauthorized() -> None:
    env, a = _host_env()
    _, b = env.deploy(HOST, salt=b"b")
    tid = returned(env.call(a, "timer", (15).to_bytes(8, "big")))
    r = env.call(b, "cancel", tid)
    assert r.status == STATUS_FAILED and r.error_code == "timer_unauthorized"
    assert timer_store.get_timer(env.world, tid) is not None


def test_send_message_enqueues_in_the_mailbox() -> None:
    from cowboy_node.execution import mailbox

    env, a = _host_env()
    assert list(mailbox.pending(env.world)) == []
    r = env.call(a, "message", BOB + b"payload")
    assert r.status == STATUS_SUCCESS, r
    entries = [e for _, e in mailbox.pending(env.world)]
    assert [(e.sender, e.target, e.payload, e.handler) for e in entries] == [(a, BOB, b"payload", "handle_message")]
    # a failed handler leaves no message behind
    r = env.call(a, "message_then_fail", BOB + b"undone")
    assert r.status == STATUS_FAILED and r.error_code == "handler_error"
    assert len(list(mailbox.pending(env.world))) == 1


def test_failed_handler_leaves_no_host_side_effects() -> None:
    env, a = _host_env()
    r = env.call(a, "put", b"no separator")
    assert r.status == STATUS_FAILED and r.error_code == "handler_error"
    assert store.scan_state(env.world, a, b"", 10) == []
    assert get_account(env.world, ALICE).nonce == env.nonce


FUZZ = '''import pvm_host

BAD = [None, -1, 0, 2 ** 70, True, "s", "", b"", b"x" * 70, bytearray(b"ab"), [1], {"a": 1}, (1, 2), 1.5]

def poke(payload):
    name = payload.decode()
    fn = {
        "get_state": lambda a: pvm_host.get_state(a),
        "set_state": lambda a: pvm_host.set_state(a, a),
        "delete_state": lambda a: pvm_host.delete_state(a),
        "scan_state_prefix": lambda a: pvm_host.scan_state_prefix(a, a),
        "keccak256": lambda a: pvm_host.keccak256(a),
        "verify_signature": lambda a: pvm_host.verify_signature(a, a, a, a),
        "emit_event": lambda a: pvm_host.emit_event(a, a, a),
        "call_actor": lambda a: pvm_host.call_actor(a, a, a, a, a),
        "send_message": lambda a: pvm_host.send_message(a, a),
        "transfer_balance": lambda a: pvm_host.transfer_balance(a, a),
        "schedule_timer": lambda a: pvm_host.schedule_timer(a, a),
        "schedule_timer_ex": lambda a: pvm_host.schedule_timer_ex(a, a, a, a, a, a),
        "extend_timer": lambda a: pvm_host.extend_timer(a, a),
        "cancel_timer": lambda a: pvm_host.cancel_timer(a),
        "set_reserved_state": lambda a: pvm_host.set_reserved_state(a, a),
    }[name]
    caught = 0
    for a in BAD:
        try:
            fn(a)
        except Exception:
            caught += 1
    return bytes([caught])
'''

FUZZ_NAMES = ["get_state", "set_state", "delete_state", "scan_state_prefix", "keccak256", "verify_signature",
              "emit_event", "call_actor", "send_message", "transfer_balance", "schedule_timer",
              "schedule_timer_ex", "extend_timer", "cancel_timer", "set_reserved_state"]


@pytest.mark.parametrize("name", FUZZ_NAMES)
def test_bad_arguments_never_escape_as_node_errors(name: str) -> None:
    env = make_env(height=10)
    r, a = env.deploy(FUZZ)
    assert r.status == STATUS_SUCCESS, r
    r = env.call(a, "poke", name.encode())  # must return a receipt, whatever happens inside
    if r.status == STATUS_FAILED:
        # only a halt code may fail the transaction: a timer constraint (the SDK contract) or a balance rule
        assert r.error_code is not None
        assert r.error_code.startswith("timer_") or r.error_code in ("insufficient_balance", "out_of_cells")
    else:
        assert returned(r)[0] >= 1


def test_host_refuses_calls_after_its_frame_ended() -> None:
    from cowboy_node.execution.actors.frame import CallFrame, TxScope
    from cowboy_node.execution.actors.host import Host
    from cowboy_node.execution.actors.invoke import run_frame
    from cowboy_node.execution.meter import Meter
    from cowboy_node.execution.validity_errors import TxFailed

    env = make_env()
    frame = CallFrame(actor=BOB, sender=ALICE, tx_sender=ALICE, tx_hash=bytes(32), depth=1)
    host = Host(env.world, env.ctx, frame, Meter(10_000, 1_000), [], TxScope(), ALICE, run_frame)
    assert host.current_block() == 1
    host._close()
    with pytest.raises(TxFailed) as info:
        host.set_state(b"k", b"v")
    assert info.value.code == "forbidden"
    assert store.get_state(env.world, BOB, b"k") is None
