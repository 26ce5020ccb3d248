"""End of Block with real actors (actors.invoke): a timer fire and a Mailbox message, end to end."""

from __future__ import annotations

from cowboy_node.execution import mailbox
from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.end_of_block import run_end_of_block
from cowboy_node.execution.system_state import get_account, put_account
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import STATUS_SUCCESS, Event
from tests.unit.execution.actors.test_actors_helpers import make_env

SOURCE = '''import pvm_host

def arm(payload):
    pvm_host.schedule_timer(pvm_host.current_block() + 1, b"tick")
    return b"ok"

def handle_timer(payload):
    pvm_host.set_state(b"fired", payload)
    return b""

def send(payload):
    pvm_host.send_message(payload[:20], payload[20:])
    return b"sent"

def handle_message(payload):
    pvm_host.set_state(b"got", payload)
    return b""
'''


def test_timer_and_message_run_through_the_real_pipeline() -> None:
    env = make_env(height=10)
    r, a = env.deploy(SOURCE)
    assert r.status == STATUS_SUCCESS, r
    r2, b = env.deploy(SOURCE, salt=b"b")
    assert r2.status == STATUS_SUCCESS, r2
    for who in (a, b):
        put_account(env.world, who, Account(10**24, get_account(env.world, who).nonce))
    assert env.call(a, "arm").status == STATUS_SUCCESS
    assert env.call(a, "send", b + b"hello").status == STATUS_SUCCESS
    ctx = env.ctx
    run_end_of_block(env.world, ctx)  # block 10: the message runs; the timer is due at 11
    assert actor_store.get_state(env.world, b, b"got") == b"hello"
    assert ctx.eob.mailbox_delivered == 1 and ctx.eob.timers_fired == 0
    delivered = [e for e in ctx.events if isinstance(e, Event) and e.topic == "mailbox.delivered"]
    assert len(delivered) == 1 and delivered[0].emitter == b
    assert list(mailbox.pending(env.world)) == []

    from cowboy_node.execution.block import begin_block
    from cowboy_node.execution.context import BlockEnv

    ctx11 = begin_block(env.world, BlockEnv(chain_id=ctx.env.chain_id, height=11, timestamp_ms=1,
                                            fee_recipient=ctx.env.fee_recipient, beacon=b"", parent_beacon=b""))
    run_end_of_block(env.world, ctx11)
    assert actor_store.get_state(env.world, a, b"fired") == b"tick"
    assert ctx11.eob.timers_fired == 1 and ctx11.burned > 0
