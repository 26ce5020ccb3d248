"""Read-only calls: interruptible through their meter, and run on a store snapshot without the state lock.

- ``Meter.interrupt`` (another thread) stops a spinning actor at its next cycle charge, nested calls included;
  meters nobody interrupts behave exactly as before (block execution never interrupts one).
- ``Node.read_actor`` holds the state lock only to capture head + snapshot + environment: a block can commit while
  a read runs, and the read still answers for the head it captured (its ``height`` and the state it read agree).
"""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.meter import InterruptHandle, Meter
from cowboy_node.execution.pvm import PvmError, call_handler, compile_actor
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.node.assemble import assemble
from cowboy_node.node.node import Node
from cowboy_node.observability import NodeMetrics
from cowboy_node.rpc import actor_queries
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import STATUS_SUCCESS
from cowboy_protocol.types.instructions import CallActor, DeployActor
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, make_tx

SPIN = "def handler(payload):\n    n = 0\n    while True:\n        n += 1\n"
GUARD_S = 30.0
"""An interrupted run must end long before this; a broken interrupt would spin for minutes."""


def _interrupt_after(target: Meter | InterruptHandle, seconds: float, code: str = "read_timeout") -> threading.Timer:
    timer = threading.Timer(seconds, target.interrupt, (code, "stopped by the test"))
    timer.start()
    return timer


# -- the meter --------------------------------------------------------------------------------------------
def test_interrupt_stops_a_spinning_actor_at_its_next_charge() -> None:
    meter = Meter(10**12, 0)  # hours of cycles: only the interrupt can end this run
    _interrupt_after(meter, 0.05)
    t0 = time.monotonic()
    with pytest.raises(PvmError) as info:
        call_handler(compile_actor(SPIN), "handler", b"", meter=meter)
    assert time.monotonic() - t0 < GUARD_S
    # The line it stopped at (" at line 3" or " at line 4") depends on when the interrupt lands.
    assert info.value.code == "read_timeout" and info.value.message.startswith("stopped by the test at line ")
    assert 0 < meter.cycles_used <= meter.cycles_limit


def test_an_actor_cannot_catch_the_interrupt() -> None:
    src = textwrap.dedent("""
        def handler(payload):
            while True:
                try:
                    while True:
                        pass
                except Exception:
                    pass
                finally:
                    n = 1
    """)
    meter = Meter(10**12, 0)
    _interrupt_after(meter, 0.05)
    with pytest.raises(PvmError) as info:
        call_handler(compile_actor(src), "handler", b"", meter=meter)
    assert info.value.code == "read_timeout"


def test_a_handle_interrupted_before_binding_stops_the_run_at_once() -> None:
    handle = InterruptHandle()
    handle.interrupt("read_timeout", "too late")
    handle.interrupt("other", "ignored: the first code wins")
    meter = Meter(1_000_000, 0)
    handle.bind(meter)
    assert handle.interrupted and meter.interrupted == ("read_timeout", "too late")
    with pytest.raises(TxFailed) as info:
        meter.charge_cycles(0)
    assert info.value.code == "read_timeout" and meter.cycles_used == 0


def test_an_interrupt_reaches_the_nested_call_running_now_and_later_ones() -> None:
    root = Meter(1000, 10)
    child = root.child(500, 5)
    child.charge_cycles(10)
    root.interrupt("read_timeout", "x")
    with pytest.raises(TxFailed, match="x"):
        child.charge_cycles(1)
    later = root.child(100, 1)
    with pytest.raises(TxFailed) as info:
        later.charge_cycles(1)
    assert info.value.code == "read_timeout"


def test_a_meter_nobody_interrupts_is_unchanged() -> None:
    meter = Meter(100, 10)
    meter.charge_cycles(60)
    assert meter.ceiling == 100 and meter.interrupted is None
    with pytest.raises(TxFailed) as info:
        meter.charge_cycles(41)
    assert info.value.code == "out_of_cycles" and meter.cycles_used == 100  # pinned at the limit
    src = textwrap.dedent("""
        def handler(payload):
            total = 0
            for i in range(50):
                total = total + i
            return payload
    """)
    used = []
    for _ in range(2):
        m = Meter(1_000_000, 0)
        call_handler(compile_actor(src), "handler", b"", meter=m)
        used.append(m.cycles_used)
    assert used[0] == used[1] == 1 + 10 + 3 * 50  # docs/pvm.md cost table (see test_pvm_metering)


# -- the node: snapshot reads -----------------------------------------------------------------------------
SOURCE = '''import pvm_host


def init(payload):
    pvm_host.set_state(b"count", b"0")
    return b""


def bump(payload):
    n = int(pvm_host.get_state(b"count")) + 1
    pvm_host.set_state(b"count", str(n).encode())
    return str(n).encode()


def get(payload):
    return pvm_host.get_state(b"count") + b"@" + str(pvm_host.current_block()).encode()


def spin(payload):
    while True:
        pass


def outer(payload):
    try:
        pvm_host.call_actor(pvm_host.self_address(), "spin", b"", 1_000_000_000)
    except pvm_host.HostError:
        pass
    while True:
        pass
'''
ACTOR = derive_actor_address(ALICE, b"", SOURCE)
_TX = {"cycles_limit": 2_000_000, "cells_limit": 100_000}


@pytest.fixture(params=["memory", "leveldb"])
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Node]:
    """Block 1 deploys the actor (count = 0) and bumps it (count = 1)."""
    store = MemoryStore() if request.param == "memory" else LevelDBStore(tmp_path / "db")
    dev = make_dev_genesis()
    n = assemble(Chain(store, dev.genesis), Mempool(MempoolConfig()), dev.validator_key, block_time_ms=1000,
             metrics=NodeMetrics())
    for nonce, ins in enumerate([DeployActor(SOURCE, b"", "init", b""), CallActor(ACTOR, "bump", b"")]):
        n.api.submit_transaction(make_tx(ALICE_SK, nonce, ins, **_TX).to_bytes())  # type: ignore[arg-type]
    asyncio.run(n.produce_block())
    receipts = n.chain.receipts_at(1)
    assert receipts is not None and [r.status for r in receipts] == [STATUS_SUCCESS] * 2
    yield n
    n.close()
    n.chain.close()


@pytest.mark.parametrize("handler", ["spin", "outer"])
def test_read_actor_ends_with_read_timeout_when_interrupted(node: Node, handler: str) -> None:
    handle = InterruptHandle()
    _interrupt_after(handle, 0.05)
    t0 = time.monotonic()
    out = node.api.read_actor(ACTOR, handler, b"", 10**9, interrupt=handle)
    assert time.monotonic() - t0 < GUARD_S
    assert out is not None and out["error"] == "read_timeout" and out["result"] is None and out["height"] == 1
    assert not node.tree_lock.locked()


def test_a_read_running_while_a_block_commits_answers_for_the_head_it_started_on(
        node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    started, go = threading.Event(), threading.Event()
    original = actor_queries.read_only_view

    def paused(*args: Any, **kwargs: Any) -> Any:  # the read has captured its head; hold it there
        started.set()
        assert go.wait(GUARD_S)
        return original(*args, **kwargs)

    monkeypatch.setattr(actor_queries, "read_only_view", paused)
    answer: list[dict[str, Any] | None] = []
    reader = threading.Thread(target=lambda: answer.append(node.api.read_actor(ACTOR, "get", b"", 1_000_000)))
    reader.start()
    try:
        assert started.wait(GUARD_S)
        assert not node.tree_lock.locked()  # the read does not hold the lock while it runs
        node.api.submit_transaction(make_tx(ALICE_SK, 2, CallActor(ACTOR, "bump", b""), **_TX).to_bytes())  # type: ignore[arg-type]
        producer = threading.Thread(target=lambda: asyncio.run(node.produce_block()))
        producer.start()
        producer.join(GUARD_S)
        assert not producer.is_alive(), "block production waited for the read"
        assert node.chain.height == 2
    finally:
        go.set()
        reader.join(GUARD_S)
    # count 1 and current_block 2 belong to head 1 (the next block's context), not to the committed block 2
    [out] = answer
    assert out is not None and out["error"] is None and out["height"] == 1
    assert bytes.fromhex(out["result"][2:]) == b"1@2"
    monkeypatch.undo()
    fresh = node.api.read_actor(ACTOR, "get", b"", 1_000_000)
    assert fresh is not None and fresh["result"] == "0x" + b"2@3".hex() and fresh["height"] == 2


def test_reads_spinning_beside_the_producer_do_not_block_it(node: Node) -> None:
    handles = [InterruptHandle() for _ in range(2)]
    readers = [threading.Thread(target=node.api.read_actor, args=(ACTOR, "spin", b"", 10**9),
                                kwargs={"interrupt": h}) for h in handles]
    for r in readers:
        r.start()
    try:
        t0 = time.monotonic()
        asyncio.run(node.produce_block())
        asyncio.run(node.produce_block())
        assert node.chain.height == 3 and time.monotonic() - t0 < GUARD_S
    finally:
        for h in handles:
            h.interrupt("read_timeout", "test over")
        for r in readers:
            r.join(GUARD_S)
    assert not any(r.is_alive() for r in readers)
