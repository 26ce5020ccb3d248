"""Shared setup of the CIP-11 attack suite (no tests here): a real node producing blocks with its QUIC transport,
an optional honest runner link, and raw attacker clients that can send anything.

The node, its :class:`TransportService` and every client run on one asyncio loop in a background thread (the
node builds blocks in its own worker thread, so the loop stays responsive). Tests are plain functions that hand
coroutines to :meth:`NodeHarness.run`. One harness serves many attacks: metrics are cumulative, so tests compare
counters before and after.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from cowboy_node.transport.service import TransportConfig, TransportService
from cowboy_protocol.quic.adapter import ClientConnection, ConnectionClosed, connect
from cowboy_protocol.quic.limits import ServerLimits, ServerStats
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import Frame, Goodbye, JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.preimages import validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import Authenticated, Closed, Event
from cowboy_protocol.types.runner_instructions import RunnerDeregister, RunnerRegister
from cowboy_runner.link import Link, LinkConfig
from tests.unit.node_harness import RUNNER_SKS, STAKE, Nonces, example_caps, make_node, produce

T = TypeVar("T")

WAIT_S = 30.0
"""Upper bound of every wait (the machine is shared); never asserted as a duration."""
BLOCK_TIME_MS = 200
"""Block time of the harness node."""
ROOMY = ServerLimits(max_half_open=1000, retry_threshold=1000, hello_rate_per_peer=1000.0,
                     hello_burst_per_peer=10_000)
"""Limits that stay out of the way of attacks about something else (every attacker shares 127.0.0.1)."""


async def until(pred: Callable[[], bool], what: str = "condition", timeout_s: float = WAIT_S) -> None:
    """Poll ``pred`` until true; fail after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class NodeHarness:
    """A node over a fresh in-memory chain, its transport service, a block-time monitor and an optional honest
    runner (``RUNNER_SKS[0]``, which must then be in ``registered``)."""

    def __init__(self, *, registered: Sequence[int], deregistered: Sequence[int] = (), honest: bool = True,
                 limits: ServerLimits = ROOMY) -> None:
        self.node = make_node(phase=2, block_time_ms=BLOCK_TIME_MS,
                              transport_config=TransportConfig(port=0, limits=limits))
        self.nonces = Nonces()
        caps, card = example_caps()
        produce(self.node, [self.nonces.tx(RUNNER_SKS[i], RunnerRegister(STAKE, caps, card)) for i in registered])
        if deregistered:
            produce(self.node, [self.nonces.tx(RUNNER_SKS[i], RunnerDeregister()) for i in deregistered])
        self.vset = tuple(v.ed25519_public_key for v in self.node.chain.genesis.validators)
        self.vsh = validator_set_hash(self.vset)
        self.chain_id = self.node.link.chain_id
        self.honest_enabled = honest
        self.limits = limits
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="attack-node", daemon=True)
        self.service: TransportService | None = None
        self.link: Link | None = None
        self.block_seen: dict[int, float] = {}  # height → monotonic time it was first observed committed
        self._tasks: list[asyncio.Task[Any]] = []

    # --- lifecycle ---
    def start(self) -> NodeHarness:
        """Start the loop thread, the transport, block production and the honest runner (waits until present)."""
        self.thread.start()
        self.run(self._start())
        return self

    async def _start(self) -> None:
        self.service = self.node.transport
        assert self.service is not None
        await self.service.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.node.run()))
        self._tasks.append(loop.create_task(self._monitor()))
        if self.honest_enabled:
            self.link = Link(SessionKey(RUNNER_SKS[0]),
                             LinkConfig(host="127.0.0.1", port=self.service.port, chain_id=self.chain_id,
                                        validator_set=self.vset, expected_validator=self.vset[0],
                                        ping_interval_s=0.2),
                             height=lambda: self.node.chain.height, on_assignment=_ignore_assignment)
            self._tasks.append(loop.create_task(self.link.run()))
            await until(lambda: 0 in self.node.api.local_presence(), "the honest runner to be present")

    async def new_service(self, limits: ServerLimits) -> TransportService:
        """A started TransportService on a free port over this node (counted in the node's metrics)."""
        service = TransportService(self.node.link, self.node.validator_transport_key(), validator_set_hash=self.vsh,
                                   config=TransportConfig(port=0, limits=limits), metrics=self.node.metrics)
        await service.start()
        return service

    def stop(self) -> None:
        """Stop the runner, the producer and the transport; close the loop."""
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    async def _stop(self) -> None:
        if self.link is not None:
            self.link.stop()
        self.node.request_stop()
        for task in self._tasks[2:]:
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)
        await self._tasks[0]
        self._tasks[1].cancel()
        await asyncio.gather(self._tasks[1], return_exceptions=True)
        if self.service is not None:
            await self.service.stop()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 90.0) -> T:
        """Run ``coro`` on the harness loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout_s)

    async def _monitor(self) -> None:
        while True:
            h = self.node.chain.height
            self.block_seen.setdefault(h, time.monotonic())
            await asyncio.sleep(0.01)

    # --- observations ---
    @property
    def port(self) -> int:
        """The main transport's UDP port."""
        assert self.service is not None
        return self.service.port

    @property
    def stats(self) -> ServerStats:
        """The main transport's QUIC server counters."""
        assert self.service is not None and self.service._server is not None
        return self.service._server.stats

    def metric(self, kind: str, label: str) -> float:
        """``cowboy_transport_events_total{kind,label}`` (0 if never counted)."""
        value = self.node.metrics.registry.get_sample_value("cowboy_transport_events_total",
                                                            {"kind": kind, "label": label})
        return 0.0 if value is None else value

    async def blocks_keep_coming(self, since_height: int, blocks: int = 3) -> None:
        """The head passes ``since_height + blocks`` and no gap between consecutive blocks from ``since_height`` on
        exceeds the node's own health bound (10 × block time + 1 s, ``Node.health``): production stayed on time."""
        await until(lambda: self.node.chain.height >= since_height + blocks, "blocks after the attack")
        heights = sorted(h for h in self.block_seen if h >= since_height)
        gaps = [self.block_seen[b] - self.block_seen[a] for a, b in itertools.pairwise(heights)]
        bound = (10 * BLOCK_TIME_MS + 1000) / 1000
        assert gaps and max(gaps) <= bound, f"block gaps {gaps} exceed {bound}s"

    def honest_ok(self) -> None:
        """The honest runner is still on its first session, authenticated and present."""
        assert self.link is not None
        assert self.link.connects == 1, "the honest runner had to reconnect"
        assert self.link.authenticated.is_set() and self.link.session is not None and not self.link.session.closed
        assert 0 in self.node.api.local_presence()


async def _ignore_assignment(link: Link, a: JobAssignment) -> None:
    del link, a


class Attacker:
    """A raw QUIC client of the node's transport: send any frame or bytes, optionally run an honest
    :class:`RunnerSession` first."""

    def __init__(self, conn: ClientConnection, harness: NodeHarness) -> None:
        self.conn = conn
        self.h = harness
        self.session: RunnerSession | None = None
        self.received: list[Frame] = []

    @classmethod
    async def open(cls, harness: NodeHarness, port: int | None = None) -> Attacker:
        """Connect (TLS done, nothing sent yet)."""
        conn = await connect("127.0.0.1", harness.port if port is None else port, timeout_s=WAIT_S)
        return cls(conn, harness)

    def new_session(self, sk: bytes, **kw: Any) -> RunnerSession:
        """A runner session over this connection's channel binding (not started)."""
        args: dict[str, Any] = dict(chain_id=self.h.chain_id, key=SessionKey(sk),
                                    expected_validator=PubKey.validator(self.h.vset[0]), validator_set=self.h.vset,
                                    subset_epoch=0, channel_binding=self.conn.channel_binding,
                                    challenge_nonce=secrets.token_bytes(32))
        args.update(kw)
        self.session = RunnerSession(**args)
        return self.session

    def flush(self) -> list[Frame]:
        """Send what the session queued; return it."""
        assert self.session is not None
        out = self.session.take_outbound()
        for frame in out:
            self.conn.send(frame)
        return out

    async def recv(self) -> Frame:
        """The next frame from the node (bounded wait)."""
        frame = await asyncio.wait_for(self.conn.recv(), WAIT_S)
        self.received.append(frame)
        return frame

    async def feed_until(self, pred: Callable[[Event], bool]) -> list[Event]:
        """Feed received frames to the session (flushing its answers) until an event matches ``pred``."""
        assert self.session is not None
        events: list[Event] = []
        while True:
            new = self.session.receive(await self.recv(), time.monotonic())
            self.flush()
            events += new
            if any(pred(e) for e in new):
                return events
            if any(isinstance(e, Closed) for e in new):
                raise AssertionError(f"session closed: {new}")

    async def handshake(self, sk: bytes) -> RunnerSession:
        """Complete Hello/HelloAck honestly with runner key ``sk``."""
        session = self.new_session(sk)
        session.start(time.monotonic(), self.h.node.chain.height)
        self.flush()
        await self.feed_until(lambda e: isinstance(e, Authenticated))
        return session

    async def goodbye(self) -> Goodbye:
        """Read until the node's Goodbye arrives (frames before it are kept in ``received``); fail if the
        connection ends without one."""
        while True:
            try:
                frame = await self.recv()
            except ConnectionClosed as e:
                if e.goodbye is not None:
                    return e.goodbye
                raise AssertionError(f"closed without a Goodbye: {e.reason}") from None
            if isinstance(frame, Goodbye):
                return frame

    def abort(self) -> None:
        """Release the connection and its socket now."""
        self.conn.abort()


async def expect_goodbye(harness: NodeHarness, send: Callable[[Attacker], Awaitable[None]],
                         reason: GoodbyeReason) -> Goodbye:
    """Open an attacker connection, run ``send`` on it, and return the node's Goodbye (asserting its reason)."""
    a = await Attacker.open(harness)
    try:
        await send(a)
        bye = await a.goodbye()
    finally:
        a.abort()
    assert bye.reason is reason, bye
    return bye
