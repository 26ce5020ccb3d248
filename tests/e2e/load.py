"""A steady transfer load on a real network for end-to-end tests: :class:`LoadGenerator`.

The generator runs in its own process (``multiprocessing`` spawn: it shares no GIL with the test process, whose
threads also run the UDP relays), driven over a pipe. It offers ``rate`` signed transfers per second for as long
as it runs, from ``len(keys)`` sender accounts (funded in genesis, see :func:`sender_keys` and
``Testnet.fund_in_genesis``), to the HTTP APIs of the validators the test names (:meth:`LoadGenerator.set_targets`;
the test leaves out a validator it takes down).

* Every sender's transfers go out in nonce order, one at a time (the next only after the previous was answered),
  and always to the same validator while the target list stays the same (sender ``k`` → ``targets[k % n]``), so
  a sender's nonces never reach the pools out of order. A transfer that was refused or not answered is sent again
  (same bytes, same nonce) on the sender's next turn; ``already_known`` and ``nonce_too_low`` (it got in before)
  move the sender on without counting it as accepted.
* ``POST /submit`` goes over a few kept-alive HTTP/1.1 connections per validator, written by hand on asyncio
  streams (an HTTP client library costs several times the CPU per request, and the generator shares the machine's
  cores with the validators). Transfers are signed when sent (about 0.08 ms each, under 3 % of a core at 300/s):
  nothing to pre-sign, and the nonce sequence never runs ahead of the run.
* A token bucket paces the offers: ``offered`` counts requests written, so a target that answers slowly lowers
  the offered rate instead of piling requests up (at most ``MAX_IN_FLIGHT_PER_TARGET`` per validator).

Every accepted transfer (HTTP 200) is recorded with its hash, the time it was accepted (seconds since start) and
the validator that accepted it; :meth:`LoadGenerator.snapshot` returns those accepted since the previous call and
the running figures (:class:`LoadStats`), :meth:`LoadGenerator.stop` stops the process within a bound and returns
the rest. The generator's own CPU (user + system) is in the figures.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import multiprocessing
import os
import resource
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlsplit

TICK_S = 0.01
"""Pacing interval of the token bucket."""
CONNECTIONS_PER_TARGET = 4
"""Kept-alive HTTP connections per validator."""
MAX_IN_FLIGHT_PER_TARGET = 64
"""Most unanswered requests queued for one validator; beyond that its senders wait (the offered rate drops)."""
REQUEST_TIMEOUT_S = 3.0
"""A request not answered within this counts as ``timeout`` and is sent again later."""
STOP_TIMEOUT_S = 60.0
""":meth:`LoadGenerator.stop` waits this long for the process before killing it."""
SINK = bytes(19) + b"\x66"
"""Recipient of every load transfer."""
_ADVANCE = frozenset({"already_known", "nonce_too_low"})
"""Refusals meaning the transfer (or its nonce) got in before: the sender moves on."""


def sender_keys(count: int, base: int = 90_000) -> list[bytes]:
    """``count`` distinct secp256k1 private keys (small integers: valid and reproducible)."""
    return [(base + i).to_bytes(32, "big") for i in range(count)]


@dataclass(frozen=True)
class Accepted:
    """A transfer a validator accepted (HTTP 200)."""

    tx_hash: str
    """``0x`` + 64 hex digits, as the validator answered (checked against the locally computed hash)."""
    at_s: float
    """Seconds after the generator started."""
    target: int
    """Index (into the URLs given at construction) of the validator that accepted it."""
    sender: int
    nonce: int


@dataclass
class LoadStats:
    """Running figures of one generator."""

    elapsed_s: float = 0.0
    offered: int = 0
    """Requests written."""
    accepted: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    """Every non-200 outcome: admission codes, ``http_<status>``, ``timeout``, ``connect``, ``reset``."""
    cpu_s: float = 0.0
    """User + system CPU of the generator process."""
    in_flight: dict[int, int] = field(default_factory=dict)
    """Unanswered requests per target index."""
    targets: list[int] = field(default_factory=list)

    @property
    def offered_per_s(self) -> float:
        return self.offered / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def accepted_per_s(self) -> float:
        return self.accepted / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def cpu_fraction(self) -> float:
        """CPU seconds per wall second (1.0 = one core)."""
        return self.cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def figures(self) -> dict[str, Any]:
        return {"elapsed_s": round(self.elapsed_s, 1), "offered": self.offered, "accepted": self.accepted,
                "offered_per_s": round(self.offered_per_s, 1), "accepted_per_s": round(self.accepted_per_s, 1),
                "generator_cpu_cores": round(self.cpu_fraction, 3), "refused": dict(sorted(self.codes.items()))}


class LoadGenerator:
    """Offer ``rate`` transfers/s from ``keys`` to the validators at ``urls`` (``http://127.0.0.1:PORT``), all of
    them targets at first. Started on construction; always :meth:`stop` it (also a context manager)."""

    def __init__(self, urls: list[str], chain_id: str, keys: list[bytes], rate: float = 300.0,
                 max_fee: int = 2_000_000) -> None:
        for u in urls:
            host = urlsplit(u).hostname
            assert host is not None and host.startswith("127."), f"the load goes to loopback only, not {u}"
        self.urls = list(urls)
        self.rate = rate
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, self.urls, chain_id, keys, rate, max_fee),
                                 name="load-generator", daemon=True)
        self._proc.start()
        child.close()
        self._stopped: tuple[list[Accepted], LoadStats] | None = None
        reply = self._ask(("ping",), timeout=60)  # imports and key derivation in the child
        assert reply == "ready", reply

    def _ask(self, msg: tuple[Any, ...], timeout: float = 10.0) -> Any:
        self._conn.send(msg)
        if not self._conn.poll(timeout):
            raise AssertionError(f"load generator did not answer {msg[0]!r} within {timeout} s "
                                 f"(alive: {self._proc.is_alive()})")
        reply = self._conn.recv()
        if isinstance(reply, tuple) and reply and reply[0] == "error":
            raise AssertionError(f"load generator failed: {reply[1]}")
        return reply

    def set_targets(self, indices: list[int]) -> None:
        """Send from now on only to the validators ``indices`` (into ``urls``); a sender's next transfer goes to
        its validator in the new list."""
        assert indices, "no target"
        self._ask(("targets", sorted(indices)))

    def snapshot(self) -> tuple[list[Accepted], LoadStats]:
        """Transfers accepted since the previous snapshot, and the figures so far."""
        got: tuple[list[Accepted], LoadStats] = self._ask(("snapshot",))
        return got

    def wait_idle(self, target: int, timeout: float = REQUEST_TIMEOUT_S + 2) -> None:
        """Wait until no request to ``target`` is unanswered (after it was left out of the targets)."""
        deadline = time.monotonic() + timeout
        while self.snapshot_stats().in_flight.get(target, 0):
            if time.monotonic() > deadline:
                raise AssertionError(f"requests to validator {target} still unanswered after {timeout} s")
            time.sleep(0.05)

    def snapshot_stats(self) -> LoadStats:
        got: LoadStats = self._ask(("stats",))
        return got

    def stop(self) -> tuple[list[Accepted], LoadStats]:
        """Stop the process (killed if it does not stop within STOP_TIMEOUT_S); the transfers accepted since the
        last snapshot and the final figures. Idempotent."""
        if self._stopped is not None:
            return self._stopped
        result: tuple[list[Accepted], LoadStats] = ([], LoadStats())
        try:
            if self._proc.is_alive():
                result = self._ask(("stop",), timeout=STOP_TIMEOUT_S)
        except AssertionError:  # it did not answer in time: killed below; its figures come from earlier snapshots
            pass
        finally:
            self._proc.join(STOP_TIMEOUT_S)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
            self._conn.close()
        self._stopped = result
        return result

    def __enter__(self) -> LoadGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the generator process ------------------------------------------------------------------------
class _Http:
    """One kept-alive HTTP/1.1 connection to a validator's API (reconnected after any error)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.head = (f"POST /submit HTTP/1.1\r\nHost: {host}:{port}\r\n"
                     "Content-Type: application/octet-stream\r\nContent-Length: ").encode()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def post(self, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("closed by the validator")
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        close = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value.strip())
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        data = await self.reader.readexactly(length) if length else b""
        if close:
            self.close()
        return status, data


class _Run:
    def __init__(self, urls: list[str], chain_id: str, keys: list[bytes], rate: float, max_fee: int) -> None:
        from cowboy_protocol.crypto.secp256k1 import private_key_to_address

        self.urls = urls
        self.chain_id = chain_id
        self.keys = keys
        self.addresses = [private_key_to_address(k) for k in keys]
        self.rate = rate
        self.max_fee = max_fee
        self.nonce = [0] * len(keys)
        self.signed: dict[int, tuple[int, bytes, str]] = {}
        """Sender → (nonce, tx_bytes, hash) of the transfer it is sending (signed once, resent as is)."""
        self.ready: collections.deque[int] = collections.deque(range(len(keys)))
        self.targets = list(range(len(urls)))
        self.queues: dict[int, asyncio.Queue[int]] = {}
        self.in_flight = dict.fromkeys(range(len(urls)), 0)
        self.stats = LoadStats(targets=list(self.targets))
        self.accepted: list[Accepted] = []
        self.t0 = time.monotonic()
        self.stopping = asyncio.Event()

    def _tx(self, s: int) -> tuple[int, bytes, str]:
        got = self.signed.get(s)
        if got is not None and got[0] == self.nonce[s]:
            return got
        from cowboy_protocol.types.instructions import Transfer
        from cowboy_protocol.types.transaction import Transaction

        tx = Transaction(chain_id=self.chain_id, nonce=self.nonce[s], sender=self.addresses[s],
                         instruction=Transfer(to=SINK, amount=1), cycles_limit=20_000, cells_limit=1_000,
                         max_fee_per_cycle=self.max_fee, max_priority_fee_per_cycle=10,
                         max_fee_per_cell=self.max_fee, max_priority_fee_per_cell=10).signed(self.keys[s])
        got = (self.nonce[s], tx.to_bytes(), "0x" + tx.tx_hash().hex())
        self.signed[s] = got
        return got

    def _code(self, code: str) -> None:
        self.stats.codes[code] = self.stats.codes.get(code, 0) + 1

    async def worker(self, target: int) -> None:
        u = urlsplit(self.urls[target])
        assert u.hostname is not None and u.port is not None
        http = _Http(u.hostname, u.port)
        q = self.queues[target]
        try:
            while True:
                s = await q.get()
                nonce, body, tx_hash = self._tx(s)
                self.stats.offered += 1
                try:
                    status, data = await asyncio.wait_for(http.post(body), REQUEST_TIMEOUT_S)
                except TimeoutError:
                    http.close()
                    self._code("timeout")
                except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError,
                        OSError, ValueError, IndexError) as e:
                    http.close()
                    self._code("connect" if isinstance(e, ConnectionRefusedError) else "reset")
                    await asyncio.sleep(0.2)  # a validator that is down: do not spin on it
                else:
                    self._answered(s, target, nonce, tx_hash, status, data)
                finally:
                    self.in_flight[target] -= 1
                    self.ready.append(s)
        finally:
            http.close()

    def _answered(self, s: int, target: int, nonce: int, tx_hash: str, status: int, data: bytes) -> None:
        try:
            body = json.loads(data) if data else {}
        except ValueError:
            body = {}
        if status == 200:
            got = str(body.get("tx_hash", ""))
            if got != tx_hash:
                self._code("hash_mismatch")
            self.accepted.append(Accepted(tx_hash, time.monotonic() - self.t0, target, s, nonce))
            self.stats.accepted += 1
            self.nonce[s] += 1
            return
        code = str(body.get("code", f"http_{status}")) if isinstance(body, dict) else f"http_{status}"
        self._code(code)
        if code in _ADVANCE:
            self.nonce[s] += 1

    async def pace(self) -> None:
        tokens = 0.0
        last = time.monotonic()
        while not self.stopping.is_set():
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            tokens = min(tokens + (now - last) * self.rate, self.rate * 0.1)
            last = now
            n = len(self.targets)
            skipped = 0
            while tokens >= 1.0 and self.ready and skipped < len(self.ready):
                s = self.ready.popleft()
                target = self.targets[s % n]
                if self.in_flight[target] >= MAX_IN_FLIGHT_PER_TARGET:
                    self.ready.append(s)
                    skipped += 1
                    continue
                self.in_flight[target] += 1
                self.queues[target].put_nowait(s)
                tokens -= 1.0

    def take(self) -> tuple[list[Accepted], LoadStats]:
        got, self.accepted = self.accepted, []
        return got, self.figures()

    def figures(self) -> LoadStats:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.stats.cpu_s = ru.ru_utime + ru.ru_stime
        self.stats.elapsed_s = time.monotonic() - self.t0
        self.stats.in_flight = {t: n for t, n in self.in_flight.items() if n}
        self.stats.targets = list(self.targets)
        return LoadStats(**{**vars(self.stats), "codes": dict(self.stats.codes)})


async def _main(conn: Connection, run: _Run) -> None:
    loop = asyncio.get_running_loop()
    run.queues = {t: asyncio.Queue() for t in range(len(run.urls))}
    tasks = [asyncio.create_task(run.worker(t)) for t in range(len(run.urls)) for _ in range(CONNECTIONS_PER_TARGET)]
    tasks.append(asyncio.create_task(run.pace()))
    done = asyncio.Event()

    def on_command() -> None:
        while conn.poll():
            try:
                msg = conn.recv()
            except EOFError:  # the test process went away
                run.stopping.set()
                done.set()
                return
            if msg[0] == "targets":
                run.targets = list(msg[1])
                conn.send("ok")
            elif msg[0] == "snapshot":
                conn.send(run.take())
            elif msg[0] == "stats":
                conn.send(run.figures())
            elif msg[0] == "ping":
                conn.send("ready")
            elif msg[0] == "stop":
                run.stopping.set()
                done.set()
                return

    loop.add_reader(conn.fileno(), on_command)
    try:
        await done.wait()
    finally:
        loop.remove_reader(conn.fileno())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    with contextlib.suppress(OSError):
        conn.send(run.take())


def _child(conn: Connection, urls: list[str], chain_id: str, keys: list[bytes], rate: float, max_fee: int) -> None:
    try:
        run = _Run(urls, chain_id, keys, rate, max_fee)
        asyncio.run(_main(conn, run))
    except BaseException as e:  # reported to the test rather than lost in the child's stderr
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(e).__name__}: {e}"))
        raise
    finally:
        conn.close()
        os._exit(0)
