"""The bounded read pool (``rpc/read_pool.py``) with a fake clock, and its HTTP answers.

Limits: per-client rate (429 ``rate_limited``), global execution budget (503 ``busy``), wait queue (503 ``busy``),
per-call deadline (the watchdog interrupts the call: ``read_timeout``). Every refusal changes nothing: no client
token, no budget, no queue slot is used.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.execution.meter import InterruptHandle, Meter
from cowboy_node.observability import NodeMetrics
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.read_pool import LIMITS, TIMEOUT_CODE, ReadPool, ReadPoolConfig, TokenBucket, retry_after
from cowboy_node.rpc.server import build_app


class FakeClock:
    """Seconds that move only when the test (or a call run by the pool) says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _pool(clock: FakeClock, **kw: Any) -> tuple[ReadPool, NodeMetrics]:
    metrics = NodeMetrics()
    return ReadPool(ReadPoolConfig(**kw), clock=clock, metrics=metrics), metrics


def _rejected(metrics: NodeMetrics, reason: str) -> float:
    return float(metrics.rpc_read_rejected.labels(reason=reason)._value.get())


def _state(pool: ReadPool, *clients: str) -> tuple[float, ...]:
    """What a refusal must not change: budget, queue, running calls, the clients' tokens."""
    return (pool.budget_ms(), pool.queue_depth, pool.running, *(pool.client_tokens(c) for c in clients))


async def _refused(pool: ReadPool, client: str, status: int, code: str) -> RpcError:
    with pytest.raises(RpcError) as info:
        await pool.submit(client, lambda h: "ran")
    assert info.value.status == status and info.value.code == code, info.value
    return info.value


# -- the token bucket ------------------------------------------------------------------------------------
def test_token_bucket_refills_up_to_capacity_and_carries_a_debt() -> None:
    b = TokenBucket(rate=10, capacity=20, now=0.0)
    assert b.level(0.0) == 20
    b.take(25, 0.0)
    assert b.level(0.0) == -5 and b.seconds_until(0, 0.0) == pytest.approx(0.5)
    assert b.level(1.0) == pytest.approx(5)
    assert b.level(100.0) == 20  # capped
    assert b.level(50.0) == 20  # a clock going backwards refills nothing
    assert [retry_after(s) for s in (0, 0.01, 1.0, 1.2, 3.0)] == [1, 1, 1, 2, 3]


def test_config_bounds_are_checked() -> None:
    ReadPoolConfig()
    for name, (lo, hi) in LIMITS.items():
        for bad in (lo - 1, hi + 1, True):
            with pytest.raises(ValueError, match=name):
                ReadPoolConfig(**{name: bad})


def test_config_bounds_match_the_node_config() -> None:
    from cowboy_node.node.config import INT_BOUNDS

    assert {k: INT_BOUNDS[f"rpc.read_{k}"] for k in LIMITS} == LIMITS


# -- the limits -------------------------------------------------------------------------------------------
async def test_spent_budget_gives_503_busy_with_retry_after_from_the_debt() -> None:
    clock = FakeClock()
    pool, metrics = _pool(clock, budget_ms_per_s=250, per_client_rps=1000)
    try:
        assert pool.budget_ms() == 250  # one second's worth to start with
        # one call that runs 1 s of wall-clock time: 1000 ms taken from 250 -> a debt of 750 ms
        assert await pool.submit("a", lambda h: clock.advance(1.0) or "done") == "done"
        assert pool.budget_ms() == pytest.approx(-750)
        before = _state(pool, "a", "b")
        err = await _refused(pool, "b", 503, "busy")
        assert err.retry_after == 3 and "budget" in err.message  # 750 ms at 250 ms/s
        assert _state(pool, "a", "b") == before and _rejected(metrics, "busy_budget") == 1
        clock.advance(2.0)
        assert (await _refused(pool, "a", 503, "busy")).retry_after == 1  # 250 ms of debt left
        clock.advance(1.0)  # repaid
        assert await pool.submit("a", lambda h: "again") == "again"
        assert metrics.rpc_read_seconds._sum.get() == pytest.approx(1.0)
    finally:
        await pool.aclose()


async def test_a_client_over_its_rate_gets_429_and_others_do_not() -> None:
    clock = FakeClock()
    pool, metrics = _pool(clock, per_client_rps=2)
    try:
        for _ in range(4):  # burst = 2 x rps
            await pool.submit("10.0.0.1", lambda h: None)
        before = _state(pool, "10.0.0.1", "10.0.0.2")
        err = await _refused(pool, "10.0.0.1", 429, "rate_limited")
        assert err.retry_after == 1 and _rejected(metrics, "rate_limited") == 1
        assert _state(pool, "10.0.0.1", "10.0.0.2") == before  # the refusal took no token
        await pool.submit("10.0.0.2", lambda h: None)  # another address has its own bucket
        clock.advance(0.5)  # one token back at 2/s
        await pool.submit("10.0.0.1", lambda h: None)
        await _refused(pool, "10.0.0.1", 429, "rate_limited")
    finally:
        await pool.aclose()


async def test_retry_after_of_a_slow_client_rate_is_rounded_up() -> None:
    clock = FakeClock()
    pool, _ = _pool(clock, per_client_rps=1)
    try:
        await pool.submit("c", lambda h: None)
        await pool.submit("c", lambda h: None)
        clock.advance(0.1)
        assert (await _refused(pool, "c", 429, "rate_limited")).retry_after == 1  # 0.9 s -> 1
    finally:
        await pool.aclose()


async def test_a_full_queue_gives_503_busy_and_changes_nothing() -> None:
    clock = FakeClock()
    pool, metrics = _pool(clock, max_queue=2, per_client_rps=1000)
    release = threading.Event()
    try:
        first = asyncio.ensure_future(pool.submit("a", lambda h: release.wait(10)))
        queued = [asyncio.ensure_future(pool.submit("a", lambda h, i=i: i)) for i in range(2)]
        await asyncio.sleep(0.05)
        assert pool.running == 1 and pool.queue_depth == 2
        assert metrics.rpc_read_queue_depth._value.get() == 2
        before = _state(pool, "a")
        err = await _refused(pool, "a", 503, "busy")
        assert err.retry_after == 1 and "waiting" in err.message and _rejected(metrics, "busy_queue") == 1
        assert _state(pool, "a") == before
        release.set()
        assert await first is True and await asyncio.gather(*queued) == [0, 1]  # FIFO
        assert pool.queue_depth == 0 and metrics.rpc_read_queue_depth._value.get() == 0
    finally:
        release.set()
        await pool.aclose()


async def test_a_call_that_waits_too_long_in_the_queue_gets_503_busy() -> None:
    clock = FakeClock()
    pool, metrics = _pool(clock, max_wait_ms=50, per_client_rps=1000)
    release = threading.Event()
    try:
        first = asyncio.ensure_future(pool.submit("a", lambda h: release.wait(10)))
        await asyncio.sleep(0.01)
        with pytest.raises(RpcError) as info:
            await pool.submit("a", lambda h: "never runs")
        assert (info.value.status, info.value.code, info.value.retry_after) == (503, "busy", 1)
        assert "waited 50 ms" in info.value.message and _rejected(metrics, "busy_queue") == 1
        assert pool.queue_depth == 0 and pool.running == 1
        release.set()
        assert await first is True
        assert await pool.submit("a", lambda h: "runs") == "runs"  # a started call has no queue-wait limit
    finally:
        release.set()
        await pool.aclose()


async def test_queued_calls_wait_while_the_budget_is_in_debt() -> None:
    clock = FakeClock()
    pool, _ = _pool(clock, budget_ms_per_s=100, per_client_rps=1000)
    release = threading.Event()

    def long_call(h: InterruptHandle) -> str:
        release.wait(10)
        clock.advance(0.5)  # 500 ms of execution: the budget ends 400 ms in debt
        return "long"

    try:
        first = asyncio.ensure_future(pool.submit("a", long_call))
        second = asyncio.ensure_future(pool.submit("a", lambda h: "second"))
        await asyncio.sleep(0.05)
        release.set()
        assert await first == "long"
        await asyncio.sleep(0.05)
        assert pool.budget_ms() < 0 and pool.queue_depth == 1 and not second.done()  # admitted, but waits
        clock.advance(4.0)
        pool.poll()
        assert await second == "second"
    finally:
        release.set()
        await pool.aclose()


async def test_the_watchdog_interrupts_a_call_at_its_deadline() -> None:
    clock = FakeClock()
    pool, metrics = _pool(clock, call_timeout_ms=50)

    def spin(handle: InterruptHandle) -> tuple[str, str] | None:
        meter = Meter(10**15, 0)
        handle.bind(meter)
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                meter.charge_cycles(1)
        except Exception as e:  # TxFailed
            return (getattr(e, "code", ""), str(e))
        return None

    try:
        t0 = time.monotonic()
        code, message = await pool.submit("a", spin) or ("", "")
        assert code == TIMEOUT_CODE and "50 ms" in message
        assert time.monotonic() - t0 < 5
        assert _rejected(metrics, "timeout") == 1
        assert await pool.submit("a", lambda h: h.interrupted) is False  # a fresh handle for the next call
    finally:
        await pool.aclose()


async def test_a_cancelled_caller_leaves_the_queue_and_interrupts_its_running_call() -> None:
    clock = FakeClock()
    pool, _ = _pool(clock, per_client_rps=1000)
    handles: list[InterruptHandle] = []
    stopped = threading.Event()

    def wait_for_interrupt(h: InterruptHandle) -> None:
        handles.append(h)
        deadline = time.monotonic() + 10
        while not h.interrupted and time.monotonic() < deadline:
            time.sleep(0.005)
        stopped.set()

    try:
        running = asyncio.ensure_future(pool.submit("a", wait_for_interrupt))
        queued = asyncio.ensure_future(pool.submit("a", lambda h: "never"))
        await asyncio.sleep(0.05)
        assert pool.queue_depth == 1
        queued.cancel()
        await asyncio.sleep(0)
        assert pool.queue_depth == 0
        running.cancel()
        await asyncio.sleep(0.05)
        assert stopped.wait(5) and handles[0].reason is not None and handles[0].reason[0] == "cancelled"
        await asyncio.sleep(0.05)
        assert pool.running == 0
    finally:
        await pool.aclose()


async def test_closing_fails_queued_calls_and_refuses_new_ones() -> None:
    clock = FakeClock()
    pool, _ = _pool(clock, per_client_rps=1000)

    def until_interrupted(h: InterruptHandle) -> str:
        deadline = time.monotonic() + 10
        while not h.interrupted and time.monotonic() < deadline:
            time.sleep(0.005)
        return h.reason[0] if h.reason else "not interrupted"

    running = asyncio.ensure_future(pool.submit("a", until_interrupted))
    queued = asyncio.ensure_future(pool.submit("a", lambda h: "never"))
    await asyncio.sleep(0.05)
    await pool.aclose()
    assert await running == "shutting_down"
    with pytest.raises(RpcError) as info:
        await queued
    assert info.value.code == "shutting_down"
    await _refused(pool, "a", 503, "shutting_down")


async def test_client_buckets_are_bounded() -> None:
    clock = FakeClock()
    pool = ReadPool(ReadPoolConfig(per_client_rps=1000), clock=clock, max_clients=8)
    try:
        for i in range(20):
            await pool.submit(f"c{i}", lambda h: None)
        assert len(pool._clients) <= 8
    finally:
        await pool.aclose()


# -- over HTTP --------------------------------------------------------------------------------------------
class _Facade:
    def __init__(self, clock: FakeClock, cost_s: float) -> None:
        self.clock = clock
        self.cost_s = cost_s

    def read_actor(self, actor: bytes, handler: str, payload: bytes, cycles_limit: int, *,
                   interrupt: InterruptHandle | None = None) -> dict[str, Any] | None:
        self.clock.advance(self.cost_s)
        return {"result": "0x", "error": None, "cycles_used": 1, "height": 7}


_BODY = {"actor": "0x" + "42" * 20, "handler": "get"}


async def test_http_answers_429_and_503_with_retry_after() -> None:
    clock = FakeClock()
    metrics = NodeMetrics()
    pool = ReadPool(ReadPoolConfig(per_client_rps=1, budget_ms_per_s=500), clock=clock, metrics=metrics)
    facade = _Facade(clock, 0.0)
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(facade, metrics=metrics,  # type: ignore[arg-type]
                                                              read_pool=pool)))
    await c.start_server()
    try:
        for _ in range(2):  # burst 2
            resp = await c.post("/actor/read", json=_BODY)
            assert resp.status == 200 and (await resp.json())["height"] == 7
        resp = await c.post("/actor/read", json=_BODY)
        assert resp.status == 429 and resp.headers["Retry-After"] == "1"
        assert (await resp.json())["code"] == "rate_limited"
        # bad input is refused before the pool: no token needed, none taken
        resp = await c.post("/actor/read", json={"actor": "0x12"})
        assert resp.status == 400 and "Retry-After" not in resp.headers
        clock.advance(5.0)
        facade.cost_s = 2.0  # one read of 2000 ms: 1500 ms in debt at 500 ms/s
        assert (await c.post("/actor/read", json=_BODY)).status == 200
        resp = await c.post("/actor/read", json=_BODY)
        assert resp.status == 503 and resp.headers["Retry-After"] == "3"
        assert (await resp.json())["code"] == "busy"
        counter = metrics.rpc_requests.labels(route="/actor/read", status="503")
        assert counter._value.get() == 1
    finally:
        await c.close()
    with pytest.raises(RpcError):  # the app closed its pool on cleanup
        await pool.submit("x", lambda h: None)


# -- config.toml [rpc] read_* -----------------------------------------------------------------------------
def test_config_keys_reach_the_pool(tmp_path: Any) -> None:
    from cowboy_node.node.config import load_config
    from cowboy_node.node.startup import read_pool

    (tmp_path / "config.toml").write_text("[rpc]\nread_max_concurrent = 2\nread_max_queue = 5\n"
                                          "read_max_wait_ms = 700\nread_call_timeout_ms = 300\n"
                                          "read_budget_ms_per_s = 100\nread_per_client_rps = 3\n")
    pool = read_pool(load_config(tmp_path), NodeMetrics())
    try:
        assert pool.config == ReadPoolConfig(max_concurrent=2, max_queue=5, max_wait_ms=700, call_timeout_ms=300,
                                             budget_ms_per_s=100, per_client_rps=3)
    finally:
        pool.close()


@pytest.mark.parametrize("key,value", [("read_max_concurrent", 0), ("read_max_concurrent", 65),
                                       ("read_max_queue", 10_001), ("read_max_wait_ms", 0),
                                       ("read_call_timeout_ms", 60_001),
                                       ("read_budget_ms_per_s", 64_001), ("read_per_client_rps", 0),
                                       ("read_per_client_rps", "10")])
def test_config_errors_name_the_key(tmp_path: Any, key: str, value: object) -> None:
    from cowboy_node.chain.config_errors import ConfigError
    from cowboy_node.node.config import load_config

    (tmp_path / "config.toml").write_text(f"[rpc]\n{key} = {value!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match=f"rpc.{key}"):
        load_config(tmp_path)
