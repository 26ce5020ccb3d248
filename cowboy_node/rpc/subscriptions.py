"""Live subscriptions: ``GET /subscribe?topic=…`` upgrades to a WebSocket that streams committed heights.

Topics and filters are in ``rpc/subscription_source.py``; docs/api.md ("Subscriptions") has the messages.

How it stays off block production's path (bench/subscriptions.py measures it):

- The node calls :meth:`SubscriptionHub.publish` after each commit. It only records the new head and wakes the
  subscribers (one ``Event.set``), whatever their number: nothing is rendered or sent in the commit path.
- Each message is read and encoded once per (height, filter) — not once per subscriber — in the hub's one reader
  thread (the store is never read on the event loop, neither for the live head nor for a replay), and the same
  bytes are written to every subscriber with that filter (``send_frame``: no per-subscriber text encoding, and no
  permessage-deflate, which would compress per subscriber).
- Each connection has its own task that sends the heights after its last one (a replay when the client gave
  ``from``, then live), yielding to the event loop after every height, so one loop iteration does at most one
  frame write per subscriber.
- Memory per connection is bounded: the write buffer in the process and the kernel's send buffer are each
  capped at ``[rpc] subscription_buffer_bytes``,
  and a send that cannot complete within ``subscription_send_timeout_ms`` (the client does not read) or a
  subscriber more than ``subscription_max_lag_blocks`` behind the head is a slow consumer: it is told
  (``{"type": "dropped", "reason": "slow_consumer", "resume_from": H}``, best effort: a client that reads nothing
  cannot be told) and its connection closed (code 4008) in its own task, never waiting on the others; it may
  reconnect with ``from=H``.
- At most ``subscription_max`` connections at once (503 ``too_many_subscriptions`` beyond).
- Heights sent to catch up share one budget (``rpc/replay_budget.py``), whose waiters queue and are each woken
  once, when granted: waiters that polled the bucket kept the loop thread on the GIL and starved the block builder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import socket
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import structlog
from aiohttp import WSMsgType, web

from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.replay_budget import ReplayBudget
from cowboy_node.rpc.subscription_source import Filter, parse_filter

__all__ = ["CLOSE_SLOW_CONSUMER", "HUB_KEY", "SubscriptionHub", "SubscriptionLimits", "add_subscription_routes"]

log = structlog.get_logger("cowboy.rpc.subscriptions")

CLOSE_SLOW_CONSUMER = 4008
"""WebSocket close code of a dropped slow consumer."""
CLOSE_SHUTDOWN = 1001
"""WebSocket close code when the node stops ("going away")."""


@dataclass(frozen=True, slots=True)
class SubscriptionLimits:
    """The ``[rpc] subscription_*`` settings."""

    max_subscriptions: int = 1000
    """Open subscriptions at most (``subscription_max``)."""
    buffer_bytes: int = 256 * 1024
    """Per-connection socket write buffer high-water mark (``subscription_buffer_bytes``)."""
    send_timeout_ms: int = 5000
    """A send blocked this long on a full buffer drops the subscriber (``subscription_send_timeout_ms``)."""
    max_lag_blocks: int = 1000
    """Deepest replay (``from`` at most this far below the head) and largest lag before a drop
    (``subscription_max_lag_blocks``)."""
    replay_per_s: int = 2000
    """Heights all subscriptions together may catch up per second (``subscription_replay_per_s``); the newest
    height is never held back. 200 clients resuming 150 heights at once took the event loop long enough to delay
    one block by 300-500 ms (bench/subscriptions.py) before this bound."""


class Source(Protocol):
    """Where messages come from (``subscription_source.ChainSource``)."""

    def head(self) -> int:
        """The committed height."""
        ...

    def message(self, f: Filter, height: int) -> bytes | None:
        """The message of ``height`` for ``f`` (encoded), or None; called in the hub's reader thread only."""
        ...


MESSAGES_CACHED = 2048
"""(height, filter) messages kept: subscribers replaying the same heights with the same filter share them."""


class _Dropped(Exception):
    """The subscriber is a slow consumer (``reason``)."""


class SubscriptionHub:
    """Every open subscription of one node; :meth:`publish` is the only call made from the commit path."""

    def __init__(self, source: Source, limits: SubscriptionLimits | None = None) -> None:
        self.source = source
        self.limits = limits or SubscriptionLimits()
        self._head = source.head()
        self._tick = asyncio.Event()
        self._open = 0
        self._closing = False
        self._budget = ReplayBudget(self.limits.replay_per_s)
        self._reader = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="cowboy-subscriptions")
        self._messages: OrderedDict[tuple[int, Filter], asyncio.Future[bytes | None]] = OrderedDict()
        self.dropped = 0
        """Slow consumers dropped so far."""
        self.served = 0
        """Subscriptions accepted so far."""

    @property
    def replayed(self) -> int:
        """Heights sent through the catch-up budget so far."""
        return self._budget.granted

    @property
    def catching_up(self) -> int:
        """Subscriptions queued for the catch-up budget now (each parked until its token is granted)."""
        return self._budget.waiting

    @property
    def open(self) -> int:
        """Subscriptions open now."""
        return self._open

    def publish(self, height: int) -> None:
        """A block at ``height`` is committed: wake the subscribers (O(1); nothing is rendered here)."""
        if height > self._head:
            self._head = height
            tick, self._tick = self._tick, asyncio.Event()
            tick.set()

    def close(self) -> None:
        """Stop every subscription (node shutdown)."""
        self._closing = True
        self._tick.set()
        self._budget.close()
        self._reader.shutdown(wait=False, cancel_futures=True)

    def _message(self, selector: Filter, height: int) -> asyncio.Future[bytes | None]:
        """The message of ``height`` for ``selector``: read and encoded once, in the reader thread, whatever the
        number of subscribers that ask (they all await the same future and send the same bytes)."""
        key = (height, selector)
        got = self._messages.get(key)
        if got is None:
            got = asyncio.get_running_loop().run_in_executor(self._reader, self.source.message, selector, height)
            self._messages[key] = got
            got.add_done_callback(lambda fut: self._forget_failed(key, fut))
            while len(self._messages) > MESSAGES_CACHED:
                self._messages.popitem(last=False)
        else:
            self._messages.move_to_end(key)
        return got

    def _forget_failed(self, key: tuple[int, Filter], fut: asyncio.Future[bytes | None]) -> None:
        """A read that failed is not kept: the next subscriber asking reads again."""
        if (fut.cancelled() or fut.exception() is not None) and self._messages.get(key) is fut:
            del self._messages[key]

    def admit(self, f: Filter) -> int:
        """The first height to send for ``f``; raises 400 ``invalid_height`` (``from`` too far back or ahead)
        or 503 ``too_many_subscriptions`` / ``shutting_down``. Counts the subscription as open."""
        head = self._head
        first = head + 1 if f.from_height is None else f.from_height
        if first < head + 1 - self.limits.max_lag_blocks:
            raise RpcError(400, "invalid_height", f"from is more than {self.limits.max_lag_blocks} blocks below the "
                           f"head {head}; read older heights with GET /block/{{height}} and /events")
        if first > head + 1 + self.limits.max_lag_blocks:
            raise RpcError(400, "invalid_height", f"from is more than {self.limits.max_lag_blocks} blocks above the "
                           f"head {head}")
        if self._closing:
            raise RpcError(503, "shutting_down", "node is shutting down")
        if self._open >= self.limits.max_subscriptions:
            raise RpcError(503, "too_many_subscriptions",
                           f"{self.limits.max_subscriptions} subscriptions are open (rpc.subscription_max)",
                           retry_after=1)
        self._open += 1
        self.served += 1
        return first

    def release(self) -> None:
        """A subscription ended."""
        self._open -= 1

    async def stream(self, f: Filter, first: int, ws: web.WebSocketResponse) -> None:
        """Send ``f``'s messages from height ``first`` on until the client goes or is dropped."""
        nxt = first
        selector = f.selector()
        await self._send(ws, json.dumps({"type": "subscribed", "topic": f.topic, "from": nxt,
                                         "head": self._head}).encode())
        try:
            while not self._closing and not ws.closed:
                tick = self._tick
                while nxt <= self._head and not ws.closed and not self._closing:
                    if self._head - nxt > self.limits.max_lag_blocks:
                        raise _Dropped("lagging")
                    if nxt < self._head:  # catching up (a replay, or behind): shares the replay budget
                        await self._budget.take()
                        if self._closing:  # the node began stopping while this waited: no read after it
                            break
                    read = self._message(selector, nxt)
                    # shield: a subscriber that goes away must not cancel the read the others await (a read
                    # already done, the common case for all but the first subscriber, needs no wait at all)
                    msg = read.result() if read.done() else await asyncio.shield(read)
                    if msg is not None:
                        await self._send(ws, msg)
                    nxt += 1
                    await asyncio.sleep(0)  # one height at a time: replays share the loop with everything else
                if self._closing or ws.closed:
                    break
                await tick.wait()
        except _Dropped as e:
            self.dropped += 1
            log.info("subscriber dropped", reason="slow_consumer", detail=str(e), resume_from=nxt)
            await self._tell_and_drop(ws, nxt)
            return
        if self._closing and not ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(code=CLOSE_SHUTDOWN, message=b"node stopping"), 1.0)

    async def _send(self, ws: web.WebSocketResponse, data: bytes) -> None:
        """Write ``data`` (a shared, already encoded message) as one text frame; a slow consumer past the timeout."""
        try:
            async with asyncio.timeout(self.limits.send_timeout_ms / 1000):
                await ws.send_frame(data, WSMsgType.TEXT)
        except TimeoutError:
            raise _Dropped("send timed out: the write buffer stayed full") from None

    async def _tell_and_drop(self, ws: web.WebSocketResponse, resume_from: int) -> None:
        told = json.dumps({"type": "dropped", "reason": "slow_consumer", "resume_from": resume_from})
        try:
            await asyncio.wait_for(ws.send_str(told), 0.5)
            await asyncio.wait_for(ws.close(code=CLOSE_SLOW_CONSUMER, message=b"slow_consumer"), 0.5)
        except Exception:  # the buffer is full: give up on telling, free the connection now
            pass
        transport = _transport(ws)
        if transport is not None and not transport.is_closing():
            transport.abort()


def _transport(ws: web.WebSocketResponse) -> asyncio.Transport | None:
    req = getattr(ws, "_req", None)
    t = getattr(req, "transport", None) if req is not None else None
    return t if isinstance(t, asyncio.Transport) else None


HUB_KEY: web.AppKey[SubscriptionHub | None] = web.AppKey("subscriptions")


async def _read_until_closed(ws: web.WebSocketResponse) -> None:
    """Read (and discard) what the client sends, so pings are answered and a close is noticed."""
    async for msg in ws:
        if msg.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
            break


async def handle_subscribe(request: web.Request) -> web.StreamResponse:
    """``GET /subscribe?topic=blocks|txs|events|jobs[&from=H][&filters]``: a WebSocket stream."""
    hub = request.app[HUB_KEY]
    if hub is None:
        raise RpcError(501, "not_implemented", "this node does not serve subscriptions")
    f = parse_filter(request.query)
    # writer_limit: aiohttp waits for the socket to drain once this much is written and unsent (default 64 KiB).
    # compress=False: permessage-deflate would compress every message once per subscriber.
    ws = web.WebSocketResponse(heartbeat=30.0, max_msg_size=4096, autoclose=True, compress=False,
                               writer_limit=hub.limits.buffer_bytes)
    if not ws.can_prepare(request).ok:
        raise RpcError(400, "not_websocket", "GET /subscribe is a WebSocket endpoint (send Upgrade: websocket)")
    first = hub.admit(f)
    try:
        await ws.prepare(request)
        transport = request.transport
        if transport is not None:
            transport.set_write_buffer_limits(high=hub.limits.buffer_bytes)
            sock = transport.get_extra_info("socket")
            if sock is not None:  # the kernel's send buffer too: without it, it grows to MiBs per connection
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, hub.limits.buffer_bytes)
        reader = asyncio.create_task(_read_until_closed(ws))
        streamer = asyncio.create_task(hub.stream(f, first, ws))
        try:
            await asyncio.wait({reader, streamer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (reader, streamer):
                t.cancel()
            await asyncio.gather(reader, streamer, return_exceptions=True)
    finally:
        hub.release()
    return ws


def add_subscription_routes(app: web.Application, hub: SubscriptionHub | None) -> None:
    """Register ``GET /subscribe`` (501 without a hub); the hub is closed on the app's shutdown."""
    app[HUB_KEY] = hub
    app.router.add_get("/subscribe", handle_subscribe, allow_head=False)

    async def close_hub(_: web.Application) -> None:
        if hub is not None:
            hub.close()

    app.on_shutdown.append(close_hub)
