"""``POST /simulate``, ``GET /events`` and ``GET /actor/{address}/timers/history`` against a real in-process node
whose blocks the test produces one by one; and the event index under them (``chain/event_index.py``).

Bad input gets a typed 4xx and changes nothing (``read_only_client`` checks height, state root and mempool).
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from typing import Any

import pytest

from cowboy_node.chain.event_index import IndexedEvent, index_ops, scan_events, topic_hash
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.meter import InterruptHandle
from cowboy_node.node.node import Node
from cowboy_node.rpc.simulate import MAX_SIMULATE_CYCLES, SimulateRequest
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import STATUS_SUCCESS, Event, Receipt
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.instructions import CallActor, DeployActor
from tests.helpers import ALICE, ALICE_SK
from tests.unit.node_harness import (
    Nonces,
    expect_error,
    expect_ok,
    make_node,
    produce,
    read_only_client,
    roomy_read_pool,
)

SOURCE = '''import pvm_host


def bump(payload):
    raw = pvm_host.get_state(b"n")
    n = 0 if raw is None else int(raw)
    pvm_host.set_state(b"n", str(n + 1).encode())
    pvm_host.emit_event("bumped", payload)
    return str(n + 1).encode()


def spin(payload):
    while True:
        pass


def arm(payload):
    pvm_host.schedule_timer(pvm_host.current_block() + 1, b"x")
    return b""
'''
ACTOR = derive_actor_address(ALICE, b"", SOURCE)
A = to_checksum_address(ACTOR)


@pytest.fixture(scope="module")
def node() -> Node:
    """Block 1 deploys; blocks 2..4 call bump with payloads 01, 02, 03; block 5 arms a timer the actor cannot
    pay for, removed unrun in block 6."""
    n = make_node()
    nonces = Nonces()
    [r] = produce(n, [nonces.tx(ALICE_SK, DeployActor(source=SOURCE, salt=b"", init_handler="", init_payload=b""))])
    assert r.status == STATUS_SUCCESS, r
    for i in (1, 2, 3):
        [r] = produce(n, [nonces.tx(ALICE_SK, CallActor(actor=ACTOR, handler="bump", payload=bytes([i])))])
        assert r.status == STATUS_SUCCESS, r
    [r] = produce(n, [nonces.tx(ALICE_SK, CallActor(actor=ACTOR, handler="arm", payload=b""))])
    assert r.status == STATUS_SUCCESS, r
    produce(n, [])
    return n


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- POST /simulate --------------------------------------------------------------------------------------------
def test_simulate_a_call_returns_what_a_transaction_would_do_and_commits_nothing(node: Node) -> None:
    async def go() -> dict[str, Any]:
        async with read_only_client(node, roomy_read_pool()) as c:
            return await expect_ok(await c.post("/simulate", json={"call": {"actor": A, "handler": "bump",
                                                                            "payload": "0x07"}}))
    out = _run(go())
    assert out["status"] == "success" and out["result"] == "0x" + b"4".hex()
    assert [e["topic"] for e in out["events"]] == ["bumped", "actor.returned"]
    assert out["height"] == node.chain.height and out["cycles_limit"] == MAX_SIMULATE_CYCLES


def test_a_dry_run_uses_what_the_real_transaction_then_uses() -> None:
    n = make_node()
    nonces = Nonces()
    produce(n, [nonces.tx(ALICE_SK, DeployActor(source=SOURCE, salt=b"", init_handler="", init_payload=b""))])
    ins = CallActor(actor=ACTOR, handler="bump", payload=b"\x07")
    sim = n.api.simulate(SimulateRequest(ALICE, ins, 5_000_000, 200_000))  # the harness transactions' limits
    [r] = produce(n, [nonces.tx(ALICE_SK, ins)])
    assert r.status == STATUS_SUCCESS and sim["status"] == "success"
    assert r.cycles_used == sim["cycles_used"]
    # cells: the intrinsic charge counts the body, whose fee fields differ (the dry run prices at the basefee,
    # no tip): a few CBOR bytes
    assert abs(r.cells_used - sim["cells_used"]) <= 8
    assert [e.to_json() for e in r.events] == sim["events"]


def test_simulate_deploy_reports_the_address_and_a_rejected_source_reports_why(node: Node) -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with read_only_client(node, roomy_read_pool()) as c:
            ok = await expect_ok(await c.post("/simulate", json={
                "sender": A, "deploy": {"source": "def f(p):\n    return p\n", "salt": "0x01"}}))
            bad = await expect_ok(await c.post("/simulate", json={"deploy": {"source": "import os\n"}}))
            return ok, bad
    ok, bad = _run(go())
    assert ok["status"] == "success"
    assert ok["address"] == to_checksum_address(derive_actor_address(ACTOR, b"\x01", "def f(p):\n    return p\n"))
    assert bad["status"] == "failed" and bad["error_code"] == "actor_rejected:import_not_allowed:1"
    assert bad["error_message"] == "line 1: import_not_allowed: import of 'os' is not allowed"


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"call": {"actor": A, "handler": "bump"}, "deploy": {"source": "x"}}, 400, "invalid_body"),
    ({}, 400, "invalid_body"),
    ({"call": {"actor": A, "handler": "bump"}, "gas": 5}, 400, "invalid_body"),
    ({"call": {"actor": A, "handler": "bump", "extra": 1}}, 400, "invalid_body"),
    ({"call": {"actor": "0x12", "handler": "bump"}}, 400, "invalid_address"),
    ({"sender": 5, "call": {"actor": A, "handler": "bump"}}, 400, "invalid_address"),
    ({"call": {"actor": A}}, 400, "invalid_handler"),
    ({"call": {"actor": A, "handler": ""}}, 400, "invalid_instruction"),
    ({"call": {"actor": A, "handler": "bump", "payload": "0xabc"}}, 400, "invalid_body"),
    ({"call": {"actor": A, "handler": "bump"}, "cycles_limit": MAX_SIMULATE_CYCLES + 1}, 400, "invalid_cycles_limit"),
    ({"call": {"actor": A, "handler": "bump"}, "cycles_limit": 0}, 400, "invalid_cycles_limit"),
    ({"call": {"actor": A, "handler": "bump"}, "cycles_limit": True}, 400, "invalid_cycles_limit"),
    ({"call": {"actor": A, "handler": "bump"}, "cells_limit": 10**12}, 400, "cells_limit_too_high"),
    ({"deploy": {"source": "x = 1\n" * 30_000}}, 400, "invalid_instruction"),  # over the 128 KiB source limit
    ({"call": {"actor": A, "handler": "bump", "payload": "0x" + "00" * 200_000}}, 400, "tx_too_large"),
    ({"deploy": {"source": "x", "init_payload": "0x01"}}, 400, "invalid_instruction"),  # payload without init
])
def test_simulate_bad_input_is_a_typed_error_and_runs_nothing(node: Node, body: dict[str, Any], status: int,
                                                              code: str) -> None:
    async def go() -> None:
        async with read_only_client(node, roomy_read_pool()) as c:
            await expect_error(await c.post("/simulate", json=body), status, code)
    _run(go())


def test_simulate_refuses_a_body_over_the_limit_and_non_json(node: Node) -> None:
    async def go() -> None:
        async with read_only_client(node, roomy_read_pool()) as c:
            await expect_error(await c.post("/simulate", data=io.BytesIO(b"{" + b" " * 2_000_000 + b"}"),
                                            headers={"Content-Type": "application/json"}), 413, "body_too_large")
            await expect_error(await c.post("/simulate", data=b"nope", headers={"Content-Type": "application/json"}),
                               400, "invalid_body")
            await expect_error(await c.post("/simulate", data=b"{}", headers={"Content-Type": "text/plain"}),
                               400, "invalid_body")
            deep = b"[" * 200 + b"]" * 200
            await expect_error(await c.post("/simulate", data=deep, headers={"Content-Type": "application/json"}),
                               400, "invalid_body")
    _run(go())


def test_a_dry_run_does_not_hold_the_state_lock_while_it_runs(node: Node) -> None:
    """A dry run that can only end by its interrupt (a cycles limit no request may ask for): once it runs, the
    state lock is free (blocks keep committing); the interrupt ends it with its code. The timeouts only stop a
    broken test from hanging."""
    started = threading.Event()
    meters: list[Any] = []

    class Seen(InterruptHandle):
        def bind(self, meter: Any) -> None:
            super().bind(meter)
            meters.append(meter)
            started.set()

    handle = Seen()
    out: dict[str, Any] = {}
    req = SimulateRequest(ALICE, CallActor(actor=ACTOR, handler="spin", payload=b""), 10**15, None)
    t = threading.Thread(target=lambda: out.update(node.api.simulate(req, interrupt=handle)))
    t.start()
    try:
        assert started.wait(timeout=30)
        deadline = time.monotonic() + 30
        while meters[0].cycles_used < 1_000_000 and time.monotonic() < deadline:  # it is running actor code
            time.sleep(0.001)
        assert meters[0].cycles_used >= 1_000_000
        assert node.tree_lock.acquire(timeout=30)
        node.tree_lock.release()
        assert t.is_alive()  # still spinning: it ran without the lock
    finally:
        handle.interrupt("read_timeout", "stopped by the test")
        t.join(timeout=60)
    assert not t.is_alive()
    assert out["error_code"] == "read_timeout" and out["error_message"].startswith("stopped by the test at line ")


# -- GET /events -----------------------------------------------------------------------------------------------
def test_events_of_an_actor_by_topic_in_order_with_pages(node: Node) -> None:
    async def go() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with read_only_client(node, roomy_read_pool()) as c:
            whole = await expect_ok(await c.get(f"/events?actor={A}&topic=bumped"))
            pages: list[dict[str, Any]] = []
            url = f"/events?actor={A}&topic=bumped&limit=1"
            while True:
                page = await expect_ok(await c.get(url))
                pages.append(page)
                if page["next"] is None:
                    break
                url = f"/events?actor={A}&topic=bumped&limit=1&cursor={page['next']}"
            return whole, pages
    whole, pages = _run(go())
    assert [(e["height"], e["data"]) for e in whole["events"]] == [(2, "0x01"), (3, "0x02"), (4, "0x03")]
    assert all(e["tx_index"] == 0 and e["emitter"] == A for e in whole["events"])
    assert [e for p in pages for e in p["events"]] == whole["events"] and len(pages) == 3


def test_events_height_range_and_block_level_events(node: Node) -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with read_only_client(node, roomy_read_pool()) as c:
            ranged = await expect_ok(await c.get(f"/events?actor={A}&from=3&to=3"))
            eob = await expect_ok(await c.get(f"/events?actor={A}&topic=timer.cancelled_insufficient_funds"))
            return ranged, eob
    ranged, eob = _run(go())
    assert [e["topic"] for e in ranged["events"]] == ["bumped", "actor.returned"]
    assert [(e["height"], e["tx_index"]) for e in eob["events"]] == [(6, None)]


@pytest.mark.parametrize(("query", "code"), [
    ("", "invalid_query"), (f"actor={A}&bogus=1", "invalid_query"), ("actor=0x12", "invalid_address"),
    (f"actor={A}&limit=0", "invalid_limit"), (f"actor={A}&limit=1001", "invalid_limit"),
    (f"actor={A}&cursor=x", "invalid_cursor"), (f"actor={A}&cursor=1:99999999999", "invalid_cursor"),
    (f"actor={A}&from=5&to=4", "invalid_range"), (f"actor={A}&from=-1", "invalid_height"),
    (f"actor={A}&topic=" + "t" * 257, "invalid_topic"),
])
def test_events_bad_query_is_a_typed_400(node: Node, query: str, code: str) -> None:
    async def go() -> None:
        async with read_only_client(node, roomy_read_pool()) as c:
            await expect_error(await c.get("/events?" + query), 400, code)
    _run(go())


def test_timer_history_names_the_reason(node: Node) -> None:
    async def go() -> dict[str, Any]:
        async with read_only_client(node, roomy_read_pool()) as c:
            await expect_error(await c.get(f"/actor/{A}/timers/history?limit=201"), 400, "invalid_limit")
            return await expect_ok(await c.get(f"/actor/{A}/timers/history"))
    out = _run(go())
    [entry] = out["terminal"]
    assert entry["reason"] == "insufficient_funds" and entry["height"] == 6 and entry["fee_payer"] == A
    assert entry["available"] == "0" and int(entry["cost"]) > 0 and out["truncated"] is False
    assert node.metrics.timers_terminal.labels(reason="insufficient_funds")._value.get() == 1


# -- the index itself ------------------------------------------------------------------------------------------
E1, E2 = b"\x01" * 20, b"\x02" * 20


def _store() -> MemoryStore:
    s = MemoryStore()
    for h in range(1, 6):
        receipts = [Receipt(0, 1, 1, 0, None, (Event(E1, "a", bytes([h, 0])), Event(E2, "a", b""))),
                    Receipt(0, 1, 1, 0, None, (Event(E1, "b", bytes([h, 1])),))]
        s.write_batch(index_ops(h, receipts, [Event(E1, "a", bytes([h, 9]))]))
    return s


def _key(e: IndexedEvent) -> tuple[int, int, str]:
    return e.height, e.seq, e.event.topic


def test_index_numbers_receipt_events_then_block_events() -> None:
    got = [(_key(e), e.tx_index) for e in scan_events(_store(), E1, from_height=2, to_height=2)]
    assert got == [((2, 0, "a"), 0), ((2, 2, "b"), 1), ((2, 3, "a"), None)]


def test_index_topic_scan_forward_backward_and_cursors() -> None:
    s = _store()
    fwd = [_key(e) for e in scan_events(s, E1, topic="a")]
    assert fwd == [(h, seq, "a") for h in range(1, 6) for seq in (0, 3)]
    back = [_key(e) for e in scan_events(s, E1, topic="a", reverse=True)]
    assert back == fwd[::-1]
    assert [_key(e) for e in scan_events(s, E1, topic="a", after=(3, 0))] == fwd[5:]
    assert [_key(e) for e in scan_events(s, E1, topic="a", after=(3, 3), reverse=True)] == fwd[:5][::-1]
    assert list(scan_events(s, E1, topic="a", after=(0, 0), reverse=True)) == []
    assert [_key(e) for e in scan_events(s, E1, topic="b", from_height=4)] == [(4, 2, "b"), (5, 2, "b")]
    assert list(scan_events(s, E1, topic="nothing")) == [] and list(scan_events(s, b"\x03" * 20)) == []


def test_index_filters_a_topic_hash_collision() -> None:
    s = _store()
    # forge a Y/ entry under topic "zzz"'s hash pointing at an "a" event: the scan must not return it
    s.write_batch([(b"Y/" + E1 + topic_hash("zzz") + (1).to_bytes(8, "big") + (0).to_bytes(4, "big"), b"")])
    assert list(scan_events(s, E1, topic="zzz")) == []


def test_terminal_counts_by_reason_skip_a_governance_cancel_that_removed_nothing() -> None:
    from cowboy_node.rpc.event_queries import count_terminal
    from cowboy_protocol.codec import encode

    gov = b"\x09".rjust(20, b"\x00")
    events = [Event(E1, "timer.expired", b""), Event(E1, "timer.expired", b""),
              Event(E1, "timer.cancelled_insufficient_funds", b""), Event(E1, "mailbox.dropped", b""),
              Event(gov, "timer.cancelled_by_governance", encode({0: b"\x01" * 32, 1: True})),
              Event(gov, "timer.cancelled_by_governance", encode({0: b"\x02" * 32, 1: False})),
              Event(E1, "timer.fired", b""), Event(E1, "bumped", b"")]
    assert count_terminal(events) == {"expired": 2, "insufficient_funds": 1, "mailbox_dropped": 1,
                                      "cancelled_by_governance": 1}
