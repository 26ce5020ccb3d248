"""pvm_host functions cowboy_sdk/mock_host.py defines that the node adds for SDK actors (docs/actors.md §8)."""

from __future__ import annotations

import json

from cowboy_node.execution.actors.host import GET_TIMERS_CYCLES_PER_TIMER
from cowboy_node.types.receipt import STATUS_SUCCESS
from tests.unit.execution.test_actors_helpers import make_env, returned

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
