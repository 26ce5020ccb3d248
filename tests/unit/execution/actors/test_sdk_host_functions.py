"""pvm_host functions cowboy_sdk/mock_host.py defines that the node adds for SDK actors (docs/actors.md §8)."""

from __future__ import annotations

import json

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import source_hash
from cowboy_node.execution.actors.host import GET_TIMERS_CYCLES_PER_TIMER
from cowboy_node.execution.system_state import get_account, put_account
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import STATUS_SUCCESS
from cowboy_protocol.crypto.keccak import keccak256
from tests.unit.execution.actors.test_actors_helpers import make_env, returned

TIMERS = '''import json
import pvm_host


def add(payload):
    return pvm_host.schedule_timer_ex(int.from_bytes(payload, "big"), b"tick", b"", 50000, 0, 0)


def listing(payload):
    timers = pvm_host.get_timers()
    rows = []
    for tid in timers:
        t = timers[tid]
        rows.append([tid.hex(), t["height"], t["payload"].hex(), t["fee_payer"].hex(), t["gas_limit"],
                     t["access_limit"], t["expires_at"]])
    return json.dumps(rows).encode()
'''


def test_get_timers_lists_this_actors_live_timers_like_the_mock() -> None:
    env = make_env()
    _, a = env.deploy(TIMERS)
    _, b = env.deploy(TIMERS, salt=b"b")
    ids = [returned(env.call(a, "add", (h).to_bytes(8, "big"))) for h in (15, 20)]
    env.call(b, "add", (30).to_bytes(8, "big"))  # another actor's timer is not listed
    r = env.call(a, "listing", b"")
    assert r.status == STATUS_SUCCESS, r
    rows = json.loads(returned(r))
    assert [row[0] for row in rows] == sorted(t.hex() for t in ids)
    by_id = {row[0]: row for row in rows}
    for tid, height in zip(ids, (15, 20), strict=True):
        assert by_id[tid.hex()][1:] == [height, b"tick".hex(), a.hex(), 50_000, None, by_id[tid.hex()][6]]
        assert by_id[tid.hex()][6] >= height
    env.call(a, "add", (25).to_bytes(8, "big"))
    more = env.call(a, "listing", b"")
    assert len(json.loads(returned(more))) == 3
    # each further live timer costs GET_TIMERS_CYCLES_PER_TIMER plus its payload bytes and the actor's own loop
    assert more.cycles_used - r.cycles_used >= GET_TIMERS_CYCLES_PER_TIMER


LIFECYCLE = '''import pvm_host
from cowboy_sdk import fork


def put(payload):
    pvm_host.set_state(b"k", payload)
    return b""


def get(payload):
    return pvm_host.get_state(b"k") or b"-"


def clone(payload):
    return bytes(fork(int.from_bytes(payload, "big")).as_ref())


def on_fork(parent):
    pvm_host.set_state(b"parent", parent)
    pvm_host.set_state(b"self", pvm_host.context()["sender"])
    return b""


def upgrade(payload):
    pvm_host.upgrade_self(payload)
    return b"v1"


def upgrade_with_routes(payload):
    pvm_host.upgrade_self(payload, None, b"routes")
    return b""
'''
V2 = 'def get(payload):\n    return b"v2"\n'


def test_fork_clones_code_and_storage_at_the_sdk_address_and_runs_on_fork_in_the_child() -> None:
    env = make_env()
    _, a = env.deploy(LIFECYCLE)
    env.call(a, "put", b"state")
    put_account(env.world, a, Account(10**18, 0))
    children = []
    for n in range(2):
        r = env.call(a, "clone", (1000).to_bytes(8, "big"))
        assert r.status == STATUS_SUCCESS, r
        child = returned(r)
        # cowboy_sdk.fork: parent[:2] ‖ keccak256("cip27.fork.addr.v1" ‖ parent ‖ count u64 ‖ code_hash)[14:32]
        expected = a[:2] + keccak256(b"cip27.fork.addr.v1" + a + n.to_bytes(8, "big") + source_hash(LIFECYCLE))[14:]
        assert child == expected
        children.append(child)
        rec = store.get_actor(env.world, child)
        assert rec is not None and rec.source_hash == source_hash(LIFECYCLE) and rec.creator == a
        assert store.get_state(env.world, child, b"k") == b"state"  # storage copied
        assert store.get_state(env.world, child, b"parent") == a  # on_fork ran in the child...
        assert store.get_state(env.world, child, b"self") == child  # ...as the child itself (SELF)
        assert store.get_state(env.world, a, b"parent") is None
        assert get_account(env.world, child).balance == 1000
    assert children[0] != children[1]
    assert get_account(env.world, a).balance == 10**18 - 2000
    assert returned(env.call(children[0], "get", b"")) == b"state"  # the child runs the same code


def test_fork_without_funds_fails_and_leaves_nothing() -> None:
    env = make_env()
    _, a = env.deploy(LIFECYCLE)
    r = env.call(a, "clone", (10**30).to_bytes(16, "big"))
    assert r.error_code == "insufficient_balance"
    assert list(env.world.iterate(store.ACTOR_PREFIX + a + b"/forks")) == []


def test_upgrade_self_takes_effect_from_the_next_call() -> None:
    env = make_env()
    _, a = env.deploy(LIFECYCLE)
    env.call(a, "put", b"kept")
    r = env.call(a, "upgrade", V2.encode())
    assert r.status == STATUS_SUCCESS and returned(r) == b"v1"  # the running frame kept its code
    assert returned(env.call(a, "get", b"")) == b"v2"
    assert store.get_actor(env.world, a).source_hash == source_hash(V2)  # type: ignore[union-attr]
    assert store.get_state(env.world, a, b"k") == b"kept"
    assert env.call(a, "put", b"x").error_code == "no_such_handler"  # the new code has only `get`


def test_upgrade_self_refuses_bad_code_and_routes() -> None:
    env = make_env()
    _, a = env.deploy(LIFECYCLE)
    r = env.call(a, "upgrade", b"import os\n")
    assert r.error_code == "actor_rejected:import_not_allowed:1"
    r = env.call(a, "upgrade_with_routes", V2.encode())
    assert r.error_code == "handler_error" and "routes is not supported" in (r.error_message or "")
    assert returned(env.call(a, "get", b"")) == b"-"  # still the old code
