"""Runner capacity benchmark (prints JSON): CPU per 1 Hz heartbeat in the node's transport vs a raw aioquic echo.

For each R in ``--runners`` two servers are measured one after the other, each in its own child process so that
only the server's CPU is counted (``time.process_time`` of the child between "start" and "stop", the protocol
of ``bench/quic_echo.py``):

* ``raw`` — the baseline: ``bench/quic_echo.py --serve raw``, a bare aioquic server answering each
  length-prefixed ping on stream 0 with an Ed25519 signature spliced into a pre-encoded HeartbeatPong.
* ``transport`` — the node's real :class:`~cowboy_node.transport.service.TransportService` (QUIC adapter with
  its admission caps, one ValidatorSession per runner, channel-bound Hello/HelloAck, local presence, the 0.2 s
  deadline ticker): every ping is rate-checked, nonce-checked and its secp256k1 signature verified, a signed
  HeartbeatPong goes back, and presence is refreshed. Behind its narrow NodeLink it sees a static registry of
  the R runners (admission by address → index) and a head height advancing once per second; no block
  production runs in that process, because it costs the same whatever R is (project choice: this isolates
  what holding runners costs).

This process is the client side: R QUIC connections (for ``transport``, real RunnerSessions that authenticate,
then sign a HeartbeatPing once per second each, phases spread evenly over the second; pongs are counted, not
verified). After every connection is pinging and ``--warmup-s`` has passed, the server's CPU is measured over
``--seconds``; a heartbeat is one pong received in that window.

Reported per R: ``ms_per_heartbeat`` for both, ``ratio`` = transport / raw (goal ≤ 1.5), and
``runners_per_core_at_1hz`` = 1 / cpu_per_heartbeat. The machine has 2 cores shared with other work and this
client shares them: compare ratios, not absolute figures.

``--pairs K`` (K ≥ 1) measures differently, to cancel the load that other work puts on the shared machine: both
servers run at once with their R connections each, and the 1 Hz pings go to one server at a time, in K pairs of
``--seconds`` windows in ABBA order (raw, transport, transport, raw, …); each pair gives a ratio and the median
ratio is reported with all of them (``ratio`` is then that median).

The default sizes stop at 500: on the shared 2-core machine the Python client and the server each need about a
core at 1,000 runners, handshakes of late joiners then exceed the 10 s auth timeout, and the figures would
measure starvation (``--runners 1000`` still runs; failed connections are reported as ``connect_failures``).

Usage: python bench/runner_capacity.py [--runners 100,250,500] [--seconds 20] [--warmup-s 3] [--pairs K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import secrets
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_harness import CHAIN_ID, quiet_logs, runner_keys
from cowboy_node.transport.service import AssignmentInfo, TransportConfig, TransportService
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import HeartbeatPing, HeartbeatPong
from cowboy_protocol.transport.preimages import RunnerKey, ValidatorKey, validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.quic import ClientConnection, ConnectionClosed, connect
from cowboy_protocol.transport.quic_limits import ServerLimits
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import Authenticated
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.transport.validator_session import Admission
from cowboy_protocol.types.params import Cip11Params

QUIC_ECHO = Path(__file__).resolve().parent / "quic_echo.py"
VALIDATOR = ValidatorKey(bytes(range(1, 33)))
VSET = (VALIDATOR.pubkey.key,)
SNAPSHOT = EpochSnapshot(0, VSET)
KEY_BASE = 0x9000
CONNECT_BATCH = 20
"""Connections opened concurrently: larger batches on a loaded machine let handshakes hit the 10 s auth timeout."""


# --- server side (child process) ---------------------------------------------------------------------------
class StaticRegistry:
    """The transport's NodeLink over a fixed registry of runners (no chain in the measured process)."""

    chain_id: str = CHAIN_ID

    def __init__(self, addresses: Sequence[bytes]) -> None:
        self.index = {a: i for i, a in enumerate(addresses)}
        self.t0 = time.monotonic()

    def head_height(self) -> int:
        """One block per second since start."""
        return 1 + int(time.monotonic() - self.t0)

    def admission(self, runner: PubKey, subset_epoch: int | None = None,
                  offered_hash: bytes | None = None) -> Admission:
        """Registered iff the key's address is in the table (and the Hello offers the one epoch-0 snapshot)."""
        if subset_epoch is not None and (subset_epoch, offered_hash) != (0, SNAPSHOT.set_hash):
            return Admission(False, GoodbyeReason.WRONG_VALIDATOR_SET)
        address = runner.address()
        i = self.index.get(address)
        return Admission(True, runner_index=i, address=address) if i is not None else Admission(False)

    def cip11_params(self) -> Cip11Params:
        """The §13 defaults (no governance in this benchmark)."""
        return Cip11Params()

    def valid_snapshots(self) -> tuple[EpochSnapshot, ...]:
        """The static one-validator set."""
        return (SNAPSHOT,)

    def assignment_for(self, job_id: bytes) -> AssignmentInfo | None:
        """No jobs in this benchmark."""
        return None

    def forward_transaction(self, tx_bytes: bytes) -> None:
        """No result frames in this benchmark."""
        raise RuntimeError("not used")


class CountingMetrics:
    """TransportMetrics that counts frames and handshakes (the child reports them)."""

    def __init__(self) -> None:
        self.events: dict[str, int] = {}
        self.connected = 0
        self.present = 0

    def transport_event(self, kind: str, label: str) -> None:
        """Count ``kind:label``."""
        key = f"{kind}:{label}"
        self.events[key] = self.events.get(key, 0) + 1

    def transport_gauges(self, *, connected: int, present: int) -> None:
        """Keep the last gauges."""
        self.connected, self.present = connected, present

    def push_latency(self, seconds: float) -> None:
        """Unused (no pushes)."""


async def serve_transport(n: int) -> None:
    """Child process: the node's TransportService for ``n`` registered runners; CPU between start and stop."""
    metrics = CountingMetrics()
    link = StaticRegistry([private_key_to_address(sk) for sk in runner_keys(n, KEY_BASE)])
    limits = ServerLimits(max_half_open=100_000, retry_threshold=100_000, hello_rate_per_peer=100_000.0,
                          hello_burst_per_peer=100_000)
    service = TransportService(link, VALIDATOR, validator_set_hash=validator_set_hash(VSET),
                               config=TransportConfig(port=0, limits=limits), metrics=metrics)
    await service.start()
    print(service.port, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    started, pings0 = 0.0, 0
    while line := (await reader.readline()).strip():
        pings = metrics.events.get("frame:HeartbeatPing", 0)
        if line == b"start":
            started, pings0 = time.process_time(), pings
            print("ok", flush=True)
        elif line == b"stop":
            print(json.dumps({"cpu_s": time.process_time() - started, "server_pings": pings - pings0,
                              "connected": metrics.connected, "present": metrics.present,
                              "admitted": metrics.events.get("handshake:admitted", 0)}), flush=True)
    await service.stop()


# --- client side (this process) ----------------------------------------------------------------------------
@dataclass
class Client:
    """One runner connection: its QUIC connection, its session (None for the raw echo), pongs received."""

    conn: ClientConnection
    session: RunnerSession | None
    pongs: int = 0


async def open_transport_client(port: int, sk: bytes) -> Client:
    """Connect and authenticate a real RunnerSession (Hello/HelloAck bound to the TLS channel)."""
    conn = await connect("127.0.0.1", port, idle_timeout_s=120, timeout_s=30)
    session = RunnerSession(chain_id=CHAIN_ID, key=RunnerKey(sk), expected_validator=PubKey.validator(VSET[0]),
                            validator_set=VSET, subset_epoch=0, channel_binding=conn.channel_binding,
                            challenge_nonce=secrets.token_bytes(32))
    session.start(time.monotonic(), 1)
    while True:
        for frame in session.take_outbound():
            conn.send(frame)
        events = session.receive(await asyncio.wait_for(conn.recv(), 30), time.monotonic())
        if session.closed:
            raise ConnectionError(f"session refused: {events}")
        if any(isinstance(e, Authenticated) for e in events):
            for frame in session.take_outbound():
                conn.send(frame)
            return Client(conn, session)


async def open_raw_client(port: int) -> Client:
    """Connect to the raw echo (no session)."""
    return Client(await connect("127.0.0.1", port, idle_timeout_s=120, timeout_s=30), None)


def send_ping(c: Client, nonce: int) -> None:
    """A signed HeartbeatPing for a session; an unsigned one (same size) for the raw echo."""
    if c.session is None:
        c.conn.send(HeartbeatPing(nonce, nonce, bytes(65)))
        return
    c.session.ping(time.monotonic(), nonce)  # height: advances once a second, like the server's
    for frame in c.session.take_outbound():
        c.conn.send(frame)


IDLE_KEEPALIVE_S = 10.0
"""Ping period of an idle side's clients in ``--pairs`` mode (well under the 30 s session idle timeout)."""


async def pinger(c: Client, phase: float, stop: asyncio.Event, active: asyncio.Event | None = None) -> None:
    """1 Hz pings on an absolute schedule starting at ``phase`` seconds (only while ``active`` is set, if given)."""
    next_at = time.monotonic() + phase
    nonce = 1
    while not stop.is_set():
        if active is not None and not active.is_set():
            try:
                await asyncio.wait_for(active.wait(), IDLE_KEEPALIVE_S)
            except TimeoutError:
                # Idle side: one ping now and then so the server's 30 s session idle timeout does not end the
                # session while the other side is measured (this server's CPU is not being measured now).
                if not c.conn.closed and not stop.is_set():
                    send_ping(c, nonce)
                    nonce += 1
                continue
            next_at = time.monotonic() + phase
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if stop.is_set() or c.conn.closed:
            return
        if active is not None and not active.is_set():
            continue
        send_ping(c, nonce)
        nonce += 1
        next_at += 1.0


async def reader(c: Client) -> None:
    """Count pongs until the connection closes."""
    try:
        while True:
            if isinstance(await c.conn.recv(), HeartbeatPong):
                c.pongs += 1
    except ConnectionClosed:
        return


async def measure(kind: str, n: int, seconds: float, warmup_s: float) -> dict[str, Any]:
    """Server CPU per heartbeat for ``kind`` holding ``n`` runners pinging at 1 Hz."""
    cmd = ([str(QUIC_ECHO), "--serve", "raw"] if kind == "raw"
           else [__file__, "--serve-transport", str(n)])
    proc = await asyncio.create_subprocess_exec(sys.executable, *cmd, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    clients: list[Client] = []
    tasks: list[asyncio.Task[None]] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    failures = 0
    try:
        port = int(await proc.stdout.readline())
        t_connect = time.monotonic()
        sks = runner_keys(n, KEY_BASE)
        for i in range(0, n, CONNECT_BATCH):
            batch = [open_raw_client(port) if kind == "raw" else open_transport_client(port, sk)
                     for sk in sks[i:i + CONNECT_BATCH]]
            for c in await asyncio.gather(*batch, return_exceptions=True):
                if isinstance(c, BaseException):  # counted and reported: "held" is what the server really holds
                    failures += 1
                    continue
                clients.append(c)
                tasks.append(loop.create_task(reader(c)))
                tasks.append(loop.create_task(pinger(c, (len(clients) - 1) / n, stop)))
        connect_s = time.monotonic() - t_connect
        await asyncio.sleep(warmup_s)
        proc.stdin.write(b"start\n")
        await proc.stdin.drain()
        await proc.stdout.readline()
        pongs0, t0 = sum(c.pongs for c in clients), time.monotonic()
        await asyncio.sleep(seconds)
        proc.stdin.write(b"stop\n")
        await proc.stdin.drain()
        report = json.loads(await proc.stdout.readline())
        pongs, wall = sum(c.pongs for c in clients) - pongs0, time.monotonic() - t0
    finally:
        stop.set()
        for c in clients:
            c.conn.abort()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        proc.stdin.close()
        await proc.wait()
    cpu = float(report["cpu_s"])
    per = cpu / max(pongs, 1)
    out: dict[str, Any] = {"server_cpu_s": round(cpu, 3), "heartbeats": pongs, "window_s": round(wall, 2),
                           "heartbeats_per_s": round(pongs / wall, 1), "core_share": round(cpu / wall, 3),
                           "ms_per_heartbeat": round(1000 * per, 4),
                           "runners_per_core_at_1hz": int(1 / per) if pongs else None,
                           "connect_s": round(connect_s, 1), "held": len(clients), "connect_failures": failures}
    if kind == "transport":
        out.update({k: report[k] for k in ("server_pings", "connected", "present", "admitted")})
    return out


@dataclass
class Side:
    """One server child with its connected clients (``--pairs`` mode)."""

    kind: str
    proc: asyncio.subprocess.Process
    clients: list[Client]
    tasks: list[asyncio.Task[None]]
    active: asyncio.Event
    failures: int = 0


async def open_side(kind: str, n: int, stop: asyncio.Event) -> Side:
    """Start ``kind``'s server child and connect ``n`` idle clients to it (pinging only while active)."""
    cmd = ([str(QUIC_ECHO), "--serve", "raw"] if kind == "raw" else [__file__, "--serve-transport", str(n)])
    proc = await asyncio.create_subprocess_exec(sys.executable, *cmd, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    side = Side(kind, proc, [], [], asyncio.Event())
    port = int(await proc.stdout.readline())
    loop = asyncio.get_running_loop()
    sks = runner_keys(n, KEY_BASE)
    for i in range(0, n, CONNECT_BATCH):
        batch = [open_raw_client(port) if kind == "raw" else open_transport_client(port, sk)
                 for sk in sks[i:i + CONNECT_BATCH]]
        for c in await asyncio.gather(*batch, return_exceptions=True):
            if isinstance(c, BaseException):
                side.failures += 1
                continue
            side.clients.append(c)
            side.tasks.append(loop.create_task(reader(c)))
            side.tasks.append(loop.create_task(pinger(c, (len(side.clients) - 1) / n, stop, side.active)))
    return side


async def window(side: Side, seconds: float, warmup_s: float) -> dict[str, Any]:
    """Ping ``side`` only, for ``warmup_s`` then a measured ``seconds``; server CPU per pong."""
    assert side.proc.stdin is not None and side.proc.stdout is not None
    side.active.set()
    try:
        await asyncio.sleep(warmup_s)
        side.proc.stdin.write(b"start\n")
        await side.proc.stdin.drain()
        await side.proc.stdout.readline()
        pongs0 = sum(c.pongs for c in side.clients)
        await asyncio.sleep(seconds)
        side.proc.stdin.write(b"stop\n")
        await side.proc.stdin.drain()
        report = json.loads(await side.proc.stdout.readline())
        pongs = sum(c.pongs for c in side.clients) - pongs0
    finally:
        side.active.clear()
    cpu = float(report["cpu_s"])
    return {"server_cpu_s": round(cpu, 3), "heartbeats": pongs,
            "ms_per_heartbeat": round(1000 * cpu / max(pongs, 1), 4)}


async def close_side(side: Side) -> None:
    """Abort the clients and end the child."""
    for c in side.clients:
        c.conn.abort()
    for t in side.tasks:
        t.cancel()
    await asyncio.gather(*side.tasks, return_exceptions=True)
    if side.proc.stdin is not None:
        side.proc.stdin.close()
    await side.proc.wait()


async def run_pairs(n: int, pairs: int, seconds: float, warmup_s: float) -> dict[str, Any]:
    """Both servers up at once; ``pairs`` ABBA-ordered window pairs; the median of the per-pair ratios."""
    stop = asyncio.Event()
    sides = [await open_side("raw", n, stop), await open_side("transport", n, stop)]
    raw, transport = sides
    try:
        rounds = []
        for p in range(pairs):
            order = (raw, transport) if p % 2 == 0 else (transport, raw)
            got = {s.kind: await window(s, seconds, warmup_s) for s in order}
            lost = [k for k, g in got.items() if g["heartbeats"] == 0]
            if lost:  # a dead side would report CPU per zero pongs: refuse to print a meaningless ratio
                raise RuntimeError(f"pair {p}: no heartbeat answered by {lost} (sessions lost while idle?)")
            rounds.append({"raw_ms": got["raw"]["ms_per_heartbeat"],
                           "transport_ms": got["transport"]["ms_per_heartbeat"],
                           "ratio": round(got["transport"]["ms_per_heartbeat"]
                                          / max(got["raw"]["ms_per_heartbeat"], 1e-9), 3),
                           "heartbeats": [got["raw"]["heartbeats"], got["transport"]["heartbeats"]]})
    finally:
        stop.set()
        for s in sides:
            s.active.set()  # wake idle pingers so they see ``stop``
        for s in sides:
            await close_side(s)
    ratio = round(statistics.median(r["ratio"] for r in rounds), 3)
    transport_ms = statistics.median(r["transport_ms"] for r in rounds)
    return {"runners": n, "mode": "pairs", "pairs": rounds, "ratio": ratio, "goal_ratio_le_1_5": ratio <= 1.5,
            "median_raw_ms": statistics.median(r["raw_ms"] for r in rounds), "median_transport_ms": transport_ms,
            "runners_per_core_at_1hz": int(1000 / transport_ms) if transport_ms else None,
            "held": [len(raw.clients), len(transport.clients)],
            "connect_failures": [raw.failures, transport.failures]}


async def run(sizes: list[int], seconds: float, warmup_s: float, pairs: int = 0) -> dict[str, Any]:
    """Both servers at every R; the JSON document."""
    results = []
    for n in sizes:
        if pairs > 0:
            results.append(await run_pairs(n, pairs, seconds, warmup_s))
            continue
        raw = await measure("raw", n, seconds, warmup_s)
        transport = await measure("transport", n, seconds, warmup_s)
        ratio = round(transport["ms_per_heartbeat"] / max(raw["ms_per_heartbeat"], 1e-9), 3)
        results.append({"runners": n, "raw_echo_baseline": raw, "transport": transport, "ratio": ratio,
                        "goal_ratio_le_1_5": ratio <= 1.5})
    return {"benchmark": "runner_capacity", "params": {"runners": sizes, "seconds": seconds, "warmup_s": warmup_s,
                                                       "heartbeat_hz": 1, "pairs": pairs},
            "results": results,
            "note": ("server CPU only (child process); clients share the same 2-core machine with other work: "
                     "compare ratios, absolute runners-per-core figures are pessimistic")}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments; run the client (or, with --serve-transport, the child server)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--serve-transport", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runners", default="100,250,500")
    parser.add_argument("--seconds", type=float, default=20.0, help="steady-state window per server")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--pairs", type=int, default=0,
                        help="K > 0: both servers up at once, K ABBA pairs of windows, median ratio")
    args = parser.parse_args(argv)
    quiet_logs()
    if args.serve_transport is not None:
        asyncio.run(serve_transport(args.serve_transport))
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # one UDP socket per client connection
    sizes = [int(x) for x in args.runners.split(",")]
    want = min(hard, max(soft, 2 * max(sizes) + 256))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    print(json.dumps(asyncio.run(run(sizes, args.seconds, args.warmup_s, args.pairs)), indent=2))


if __name__ == "__main__":
    main()
