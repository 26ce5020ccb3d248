"""CIP-1 timers on the developer surface, against a real node whose blocks the test produces: a real actor calls
``pvm_host.set_timeout`` (GBAs are deployed actors), then

* ``GET /actor/{a}/timers`` lists them under ``"cip1"`` (ids derived by hand from docs/timers.md §15.2, GBA,
  tier, queue height, carried_over, the actor's counters and weight) and pages with ``?cip1_after=``;
* ``pvm_host.get_timers()`` does not list them and costs the same with or without them (the decision in
  docs/actors.md §4);
* ``GET /actor/{a}/timers/history`` and ``cowboy_timers_terminal_total`` show the timer a broken GBA dropped
  (``gba_dropped``) and the one that expired after deferrals (``expired``);
* ``cowboy-node query timers`` prints the same, following ``cip1.next``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cowboy_node.chain.blockstore import KEY_HEAD
from cowboy_node.chain.event_index import index_ops
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.scheduler import listing
from cowboy_node.rpc import event_queries
from cowboy_node.rpc.event_queries import count_terminal, terminal_timers_view
from cowboy_node.rpc.server import start_rpc_server
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import STATUS_SUCCESS, Event
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer, UpdateTimerPolicy
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.helpers import ALICE, ALICE_SK
from tests.unit.node_harness import (
    LiveNode,
    Nonces,
    expect_error,
    expect_ok,
    make_node,
    produce,
    quiet_node_logs,
    read_only_client,
    run_cli,
)

OWNER_SRC = '''import pvm_host

def schedule(payload):
    gba, rest = payload[:20], payload[20:].split(b",")
    return pvm_host.set_timeout(int(rest[0]), gba, "on_timeout", b"d" * int(rest[2]), 0, int(rest[1]))

def on_timeout(payload):
    return b""

def count_timers(payload):
    return str(len(pvm_host.get_timers())).encode()
'''
GOOD_GBA = '''import json

def get_gas_bid(payload):
    ctx = json.loads(payload)
    return json.dumps({"max_fee_per_cycle": ctx["basefee_cycle"] + 100, "tip_per_cycle": 3}).encode()
'''
RAISE_GBA = '''def get_gas_bid(payload):
    raise ValueError("no bid today")
'''
GREEDY_GBA = '''def get_gas_bid(payload):
    return b'{"max_fee_per_cycle": 18000000000000000000, "tip_per_cycle": 17000000000000000000}'
'''
OWNER = derive_actor_address(ALICE, b"o", OWNER_SRC)
GBAS = {name: derive_actor_address(ALICE, name.encode(), src)
        for name, src in (("good", GOOD_GBA), ("raise", RAISE_GBA), ("greedy", GREEDY_GBA))}
OWNER_TEXT = to_checksum_address(OWNER)
MAX_TTL = 2_592_000
"""TimerConfig.max_ttl_blocks of the dev genesis: expires_at 0 = scheduled height + this."""


def _id(height: int, nonce: int) -> str:
    # docs/timers.md §15.2: keccak256("cowboy/cip1/timeout/v1" ‖ actor ‖ H u64 BE ‖ nonce u64 BE)
    return "0x" + keccak256(b"cowboy/cip1/timeout/v1" + OWNER + height.to_bytes(8, "big")
                            + nonce.to_bytes(8, "big")).hex()


class Chain:
    """The node, ALICE's nonces, and what the API answered at each stage."""

    def __init__(self) -> None:
        self.node = make_node()
        self.nonces = Nonces()
        self.stages: dict[object, Any] = {}

    def call(self, handler: str, payload: bytes) -> Any:
        return self.nonces.tx(ALICE_SK, CallActor(actor=OWNER, handler=handler, payload=payload))

    def schedule(self, gba: str, height: int, expires_at: int = 0, size: int = 1) -> Any:
        return self.call("schedule", GBAS[gba] + b"%d,%d,%d" % (height, expires_at, size))

    def block(self, *txs: Any) -> list[Any]:
        receipts = produce(self.node, list(txs))
        assert all(r.status == STATUS_SUCCESS for r in receipts), receipts
        return receipts

    def get(self, *paths: str) -> list[Any]:
        async def go() -> list[Any]:
            async with read_only_client(self.node) as c:
                return [await expect_ok(await c.get(p)) for p in paths]
        return asyncio.run(go())

    def metric(self, reason: str) -> float:
        value: float = self.node.metrics.timers_terminal.labels(reason=reason)._value.get()
        return value

    def read_count(self) -> tuple[str, int]:
        async def go() -> Any:
            async with read_only_client(self.node) as c:
                body = {"actor": OWNER_TEXT, "handler": "count_timers"}
                return await expect_ok(await c.post("/actor/read", json=body))
        body = asyncio.run(go())
        assert body["error"] is None, body
        return bytes.fromhex(body["result"][2:]).decode(), body["cycles_used"]


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    """Block 1 deploys the owner and three GBAs and turns CIP-1 on; block 2 schedules five timers; blocks 3..7 run
    them. ``stages`` keeps what the API answered after blocks 2, 4 and 7 (each test reads one stage)."""
    c = Chain()
    deploys = [DeployActor(source=OWNER_SRC, salt=b"o", init_handler="", init_payload=b"")]
    deploys += [DeployActor(source=src, salt=name.encode(), init_handler="", init_payload=b"")
                for name, src in (("good", GOOD_GBA), ("raise", RAISE_GBA), ("greedy", GREEDY_GBA))]
    c.block(*(c.nonces.tx(ALICE_SK, d) for d in deploys),
            c.nonces.tx(ALICE_SK, Transfer(to=OWNER, amount=10**22)),
            c.nonces.tx(ALICE_SK, UpdateTimerPolicy(TimerPolicy(mode=MODE_CIP1))))  # block 1
    c.stages["count_before"] = c.read_count()  # no timer of any kind yet
    # block 2: nonces 0..4 -- due at 4 (broken GBA), due at 4 (priced out, expires at 6), then one per tier
    c.block(c.schedule("raise", 4), c.schedule("greedy", 4, 6), c.schedule("good", 100, 0, 300),
            c.schedule("good", 10_000), c.schedule("good", 200_000))
    c.stages[2] = c.get(f"/actor/{OWNER_TEXT}/timers")
    c.stages["count_after"] = c.read_count()
    c.block()  # block 3
    c.block()  # block 4: both due; the raising GBA drops its timer, the greedy one is deferred
    c.stages[4] = c.get(f"/actor/{OWNER_TEXT}/timers", f"/actor/{OWNER_TEXT}/timers/history")
    c.stages["metric4"] = c.metric("gba_dropped")
    for _ in range(3):
        c.block()  # blocks 5, 6: deferred again; block 7: past expires_at 6 -> removed
    c.stages[7] = c.get(f"/actor/{OWNER_TEXT}/timers", f"/actor/{OWNER_TEXT}/timers/history")
    yield c
    c.node.close()


def _entry(nonce: int, height: int, gba: str, tier: str, *, expires_at: int = 2 + MAX_TTL, size: int = 1,
           queued_at: int | None = None, carried: bool = False) -> dict[str, Any]:
    return {"id": _id(height, nonce), "scheduler": "cip1", "height": height,
            "gba": to_checksum_address(GBAS[gba]), "handler": "on_timeout", "gas_limit": 550_000,
            "expires_at": expires_at, "payload_size": size, "seq": nonce, "tier": tier,
            "queued_at": height if queued_at is None else queued_at, "carried_over": carried}


def test_scheduled_timers_are_listed_with_their_tier(chain: Chain) -> None:
    [doc] = chain.stages[2]
    assert doc["timers"] == [] and doc["count"] == 0  # the seeds/003 listing is unchanged
    cip1 = doc["cip1"]
    assert {k: v for k, v in cip1.items() if k not in ("timers", "scanned")} == {
        "active": True, "count": 5, "next_nonce": 5, "weight": 1_000_000, "effective_weight": 1_000_000,
        "weight_epoch": 0, "starved_blocks": 0, "starving": False, "next": None}
    assert cip1["scanned"] <= 5
    assert cip1["timers"] == [_entry(0, 4, "raise", "ring"), _entry(1, 4, "greedy", "ring", expires_at=6),
                              _entry(2, 100, "good", "ring", size=300), _entry(3, 10_000, "good", "epoch"),
                              _entry(4, 200_000, "good", "overflow")]


def test_get_timers_neither_lists_cip1_timers_nor_costs_more(chain: Chain) -> None:
    count_before, cycles_before = chain.stages["count_before"]
    assert count_before == "0" and chain.stages["count_after"] == (count_before, cycles_before)


def test_a_dropped_and_a_deferred_timer(chain: Chain) -> None:
    [doc, hist] = chain.stages[4]
    assert chain.stages["metric4"] == 1
    assert [t["id"] for t in doc["cip1"]["timers"]] == [_id(4, 1), _id(100, 2), _id(10_000, 3), _id(200_000, 4)]
    assert doc["cip1"]["timers"][0] == _entry(1, 4, "greedy", "backlog", expires_at=6, queued_at=5, carried=True)
    assert doc["cip1"]["count"] == 4 and doc["cip1"]["starved_blocks"] == 1
    [drop] = hist["terminal"]
    assert {k: v for k, v in drop.items() if k not in ("gba_cycles", "gba_fee")} == {
        "reason": "gba_dropped", "scheduler": "cip1", "topic": "cip1.bid_refused", "height": 4,
        "timer_id": _id(4, 0), "code": "gba_failed"}
    assert 0 < drop["gba_cycles"] <= 100_000 and int(drop["gba_fee"]) > 0
    assert hist["cip1_searched_to"] is None and hist["truncated"] is False


def test_a_timer_expired_after_deferrals(chain: Chain) -> None:
    [doc, hist] = chain.stages[7]
    assert [t["id"] for t in doc["cip1"]["timers"]] == [_id(100, 2), _id(10_000, 3), _id(200_000, 4)]
    assert [(e["reason"], e["height"], e["timer_id"]) for e in hist["terminal"]] == [
        ("expired", 7, _id(4, 1)), ("gba_dropped", 4, _id(4, 0))]
    assert chain.metric("expired") == 1
    assert chain.metric("gba_dropped") == 1  # the three deferrals (blocks 4..6) are not


def test_pages_with_a_small_scan_bound(chain: Chain, monkeypatch: pytest.MonkeyPatch) -> None:
    [whole] = chain.get(f"/actor/{OWNER_TEXT}/timers")
    monkeypatch.setattr(listing, "SCAN_RECORDS", 1)
    [first] = chain.get(f"/actor/{OWNER_TEXT}/timers")
    assert first["cip1"]["scanned"] == 1 and first["cip1"]["next"] is not None
    assert first["timers"] == whole["timers"] and first["cip1"]["count"] == whole["cip1"]["count"]
    seen, doc = list(first["cip1"]["timers"]), first
    while doc["cip1"]["next"] is not None:
        [doc] = chain.get(f"/actor/{OWNER_TEXT}/timers?cip1_after={doc['cip1']['next']}")
        assert doc["cip1"]["scanned"] <= 1
        seen += doc["cip1"]["timers"]
    assert sorted(seen, key=lambda t: (t["height"], t["seq"])) == whole["cip1"]["timers"]


def test_a_bad_cursor_is_a_typed_400(chain: Chain) -> None:
    async def go() -> None:
        async with read_only_client(chain.node) as c:
            await expect_error(await c.get(f"/actor/{OWNER_TEXT}/timers?cip1_after=0x1234"), 400, "invalid_cursor")
            await expect_error(await c.get(f"/actor/{OWNER_TEXT}/timers?after=0x" + "00" * 32), 400, "invalid_query")
    asyncio.run(go())


def test_query_timers_follows_the_cip1_pages(chain: Chain, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    [whole] = chain.get(f"/actor/{OWNER_TEXT}/timers")
    live = LiveNode(node=chain.node)  # serve only: the test's blocks stay where they are
    quiet_node_logs(monkeypatch)
    live.thread = threading.Thread(target=live.loop.run_forever, name="cip1-cli", daemon=True)
    live.thread.start()
    live.runner = asyncio.run_coroutine_threadsafe(start_rpc_server(chain.node.api, "127.0.0.1", 0),
                                                   live.loop).result(timeout=10)
    live.url = f"http://127.0.0.1:{live.runner.addresses[0][1]}"
    capsys.readouterr()  # the server's start-up log line
    try:
        rc, out, _ = run_cli(["query", "timers", OWNER_TEXT, "--rpc", live.url], capsys)
        assert rc == 0 and out["cip1"]["timers"] == whole["cip1"]["timers"] and out["cip1"]["next"] is None
        assert [e["reason"] for e in out["recent_terminal"]] == ["expired", "gba_dropped"]
        monkeypatch.setattr(listing, "SCAN_RECORDS", 1)
        rc, out, _ = run_cli(["query", "timers", OWNER_TEXT, "--cip1-pages", "1", "--rpc", live.url], capsys)
        assert rc == 0 and out["cip1"]["scanned"] == 1 and out["cip1"]["next"] is not None
        rc, rest, _ = run_cli(["query", "timers", OWNER_TEXT, "--cip1-after", out["cip1"]["next"], "--cip1-pages", "64",
                               "--rpc", live.url], capsys)
        assert rc == 0 and rest["cip1"]["next"] is None
        got = sorted(out["cip1"]["timers"] + rest["cip1"]["timers"], key=lambda t: (t["height"], t["seq"]))
        assert got == whole["cip1"]["timers"]
        rc, out, _ = run_cli(["query", "timers", OWNER_TEXT, "--rpc", live.url], capsys)  # default: follows 8 pages
        assert rc == 0 and out["cip1"]["scanned"] <= 8 and out["cip1"]["timers"][:1] == whole["cip1"]["timers"][:1]
        rc, _out, err = run_cli(["query", "timers", OWNER_TEXT, "--cip1-pages", "0", "--rpc", live.url], capsys)
        assert rc == 2 and "--cip1-pages" in err
    finally:
        live.stop()


# -- the history's bounded walk over cip1.bid_refused (node-local event index) ---------------------------------
E1 = b"\x01" * 20


def _refused(n: int, dropped: bool) -> Event:
    return Event(E1, "cip1.bid_refused", encode({0: bytes([n]) * 32, 1: "gba_failed" if dropped else
                                                 "gba_bid_below_basefee", 2: 7, 3: (70).to_bytes(16, "big"),
                                                 4: dropped}))


def test_count_terminal_counts_only_the_refusals_that_dropped() -> None:
    assert count_terminal([_refused(1, True), _refused(2, False), _refused(3, False)]) == {"gba_dropped": 1}


def test_the_refusal_walk_is_bounded_and_says_where_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    store.write_batch(index_ops(1, [], [_refused(1, True)]))             # an old drop
    for h in range(2, 8):                                                 # then six blocks of deferrals
        store.write_batch(index_ops(h, [], [_refused(h, False)]))
    store.write_batch([(KEY_HEAD, (7).to_bytes(8, "big"))])
    full = terminal_timers_view(store, E1, limit=10)
    assert [(e["height"], e["code"], e["gba_fee"]) for e in full["terminal"]] == [(1, "gba_failed", "70")]
    assert full["cip1_searched_to"] is None
    monkeypatch.setattr(event_queries, "MAX_CIP1_REFUSALS_SCANNED", 3)  # heights 7, 6, 5 examined
    capped = terminal_timers_view(store, E1, limit=10)
    assert capped["terminal"] == [] and capped["cip1_searched_to"] == 4
