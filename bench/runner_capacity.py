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

``--workers K1,K2,…`` (QUIC worker processes, issue 20 item 3) measures the node's transport alone, once per K,
with the ``--runners`` clients split over ``--client-procs`` client processes (each its own event loop and
core share): the server child runs :class:`TransportService` with ``TransportConfig(workers=K)`` (K = 1: QUIC in
the validator process, today's default; ``1w``: one worker process, the baseline for scaling; K ≥ 2: K worker
processes on one ``SO_REUSEPORT`` port; ``K-noack``: without the ACK piggyback). Reported per K:
heartbeats answered in the window (and the share of those expected at 1 Hz), heartbeat round-trip p50/p99 as
the clients see it (ping sent → pong received, so it includes the clients' own loop delay on a shared machine),
CPU per heartbeat and core share of the validator process and of the workers, RSS of each, and ratios to the
first K of the list (the baseline of the same run). ``--profile-workers DIR`` writes a cProfile of every worker
(the hot spots of aioquic's packet handling).

Usage: python bench/runner_capacity.py [--runners 100,250,500] [--seconds 20] [--warmup-s 3] [--pairs K]
       python bench/runner_capacity.py --workers 1,2 --runners 300 [--client-procs 2] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import secrets
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_harness import CHAIN_ID, quiet_logs, runner_keys
from cowboy_node.transport.service import AssignmentInfo, TransportConfig, TransportService, _RunnerConnection
from cowboy_node.transport.workers.pool import WorkerPool
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.quic.adapter import ClientConnection, ConnectionClosed, connect
from cowboy_protocol.quic.certs import generate_self_signed
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.quic.stream import FramedProtocol
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import AckStatus, HeartbeatPing, HeartbeatPong, JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey, ValidatorKey, validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import AssignmentReceived, Authenticated
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.transport.validator_session import Admission
from cowboy_protocol.types.params import Cip11Params
from cowboy_protocol.types.runner import Health

QUIC_ECHO = Path(__file__).resolve().parent / "quic_echo.py"
CERT = generate_self_signed("cowboy-validator")
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
        self.jobs: dict[bytes, AssignmentInfo] = {}
        """Jobs "assigned" by the push probe (``--workers`` mode)."""

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
        """The push probe's jobs (none otherwise)."""
        return self.jobs.get(job_id)

    def runner_health(self, addresses: Sequence[bytes]) -> list[Health | None]:
        """Every registered runner HEALTHY (the per-block registry re-check still reads them all)."""
        return [Health.HEALTHY if a in self.index else None for a in addresses]

    def forward_transaction(self, tx_bytes: bytes) -> None:
        """No result frames in this benchmark."""
        raise RuntimeError("not used")


class CountingMetrics:
    """TransportMetrics that counts frames and handshakes (the child reports them)."""

    def __init__(self) -> None:
        self.events: dict[str, int] = {}
        self.connected = 0
        self.present = 0
        self.pushes: list[float] = []

    def transport_event(self, kind: str, label: str) -> None:
        """Count ``kind:label``."""
        key = f"{kind}:{label}"
        self.events[key] = self.events.get(key, 0) + 1

    def transport_gauges(self, *, connected: int, present: int) -> None:
        """Keep the last gauges."""
        self.connected, self.present = connected, present

    def push_latency(self, seconds: float) -> None:
        """Block commit → JobAck{Accepted} of one push (the push probe)."""
        self.pushes.append(seconds)


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of process ``pid`` (seconds, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mib(pid: int | str = "self") -> float:
    """Resident set size of process ``pid`` (MiB, from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _worker_pids(service: TransportService) -> list[int]:
    server = service._server
    pids = server.pids() if isinstance(server, WorkerPool) else []
    return [p for p in pids if p is not None]


async def serve_transport(n: int, spec: str | None = None) -> None:
    """Child process: the node's TransportService for ``n`` registered runners; CPU between start and stop.
    ``spec`` (``--workers`` mode, which also runs the push probe): K workers (1 = in-process), or ``1w``: one
    worker process (the scaling baseline for K ≥ 2). None: in-process, no probe (the raw-echo comparison)."""
    workers = int((spec or "1").rstrip("w"))
    if os.environ.get("COWBOY_WORKER_ACK_PIGGYBACK") == "0":  # ``1-noack``: the in-process baseline of that cut
        FramedProtocol.piggyback_acks = False
    metrics = CountingMetrics()
    link = StaticRegistry([private_key_to_address(sk) for sk in runner_keys(n, KEY_BASE)])
    limits = ServerLimits(max_half_open=100_000, retry_threshold=100_000, hello_rate_per_peer=100_000.0,
                          hello_burst_per_peer=100_000)
    service = TransportService(link, VALIDATOR, validator_set_hash=validator_set_hash(VSET),
                               config=TransportConfig(port=0, limits=limits, workers=workers), metrics=metrics)
    if spec == "1w":  # the service only pools for K ≥ 2: start a pool of one as service.start() does for K
        pool = WorkerPool(host="127.0.0.1", port=0, workers=1, limits=limits, certificate_pem=CERT[0],
                          private_key_pem=CERT[1], reset_secret=secrets.token_bytes(32),
                          handler_factory=lambda c: _RunnerConnection(service, c), metrics=metrics)
        await pool.start()
        service._server = pool
        service._ticker = asyncio.get_running_loop().create_task(service._tick_loop())
    else:
        await service.start()
    print(service.port, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    probe: asyncio.Task[None] | None = None
    if spec is not None:
        probe = asyncio.get_running_loop().create_task(push_probe(service, link))
    started, pings0 = 0.0, 0
    workers0: dict[int, float] = {}
    while line := (await reader.readline()).strip():
        pings = metrics.events.get("frame:HeartbeatPing", 0)
        if line == b"start":
            started, pings0 = time.process_time(), pings
            workers0 = {pid: _proc_cpu_s(pid) for pid in _worker_pids(service)}
            metrics.pushes.clear()
            print("ok", flush=True)
        elif line == b"stop":
            cpu = time.process_time() - started
            worker_cpu = [round(_proc_cpu_s(pid) - c0, 3) for pid, c0 in workers0.items()]
            print(json.dumps({"cpu_s": cpu, "server_pings": pings - pings0,
                              "connected": metrics.connected, "present": metrics.present,
                              "admitted": metrics.events.get("handshake:admitted", 0),
                              "worker_cpu_s": worker_cpu, "rss_mib": _proc_rss_mib(),
                              "worker_rss_mib": [_proc_rss_mib(pid) for pid in workers0],
                              "push_latency_ms": [round(1000 * x, 3) for x in metrics.pushes]}), flush=True)
    if probe is not None:
        probe.cancel()
    await service.stop()


PUSH_INTERVAL_S = 1.0
"""The push probe "commits a block" assigning one job to one present runner this often."""


async def push_probe(service: TransportService, link: StaticRegistry) -> None:
    """Once a second, one job assigned to the next present runner and pushed the way a committed block pushes
    (``on_block_committed``: governed constants, epoch and registry re-checks of every session, then the push);
    the runner acks it Accepted and ``push_latency`` records commit → ack. Push latency under heartbeat load."""
    turn = 0
    while True:
        await asyncio.sleep(PUSH_INTERVAL_S)
        present = sorted(service.local_presence(link.head_height()))
        if not present:
            continue
        index = present[turn % len(present)]
        turn += 1
        job_id = secrets.token_bytes(32)
        h = link.head_height()
        link.jobs[job_id] = AssignmentInfo(job_spec=b"\xa0", assignment_height=h, deadline_block=h + 100,
                                           committee=(index,), live=True)
        service.on_block_committed([job_id], [])


# --- client side (this process) ----------------------------------------------------------------------------
@dataclass
class Client:
    """One runner connection: its QUIC connection, its session (None for the raw echo), pongs received."""

    conn: ClientConnection
    session: RunnerSession | None
    pongs: int = 0
    sent_at: dict[int, float] = field(default_factory=dict)
    """Send time of each ping not answered yet (a pong later than the next ping still counts)."""
    rtts: list[float] | None = None
    """Ping → pong round trips (seconds) while measuring (``--workers`` mode)."""
    assigned: list[tuple[bytes, int, float]] = field(default_factory=list)
    """``(job_id, assignment_height, wall-clock time)`` of every verified assignment acked Accepted."""
    closed_reason: str | None = None
    """Why the connection ended (the reader's ConnectionClosed), None while open."""


def source_address(i: int) -> str:
    """A distinct loopback source address for runner ``i`` (127.10.x.y; all of 127.0.0.0/8 is local on Linux)."""
    return f"127.10.{i // 250}.{i % 250 + 1}"


async def open_transport_client(port: int, sk: bytes, chain_id: str = CHAIN_ID, vset: tuple[bytes, ...] = VSET,
                                local_host: str | None = None) -> Client:
    """Connect and authenticate a real RunnerSession (Hello/HelloAck bound to the TLS channel) to the validator
    ``vset[0]`` of chain ``chain_id`` (the static server's by default; a real node's for
    ``bench/runner_capacity_chain.py``), from ``local_host`` if given."""
    conn = await connect("127.0.0.1", port, idle_timeout_s=120, timeout_s=30, local_host=local_host)
    session = RunnerSession(chain_id=chain_id, key=RunnerKey(sk), expected_validator=PubKey.validator(vset[0]),
                            validator_set=vset, subset_epoch=0, channel_binding=conn.channel_binding,
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
    now = time.monotonic()
    c.sent_at[c.session.ping(now, nonce)] = now  # height: advances once a second, like the server's
    if len(c.sent_at) > 64:  # pings lost with a closed connection: keep the table bounded
        c.sent_at.pop(min(c.sent_at))
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
        if next_at <= time.monotonic():  # a starved client skips the slots it missed: no catch-up burst, which
            next_at += 1.0 * int(time.monotonic() - next_at + 1)  # the validator's ping-rate bucket would refuse


async def reader(c: Client) -> None:
    """Count pongs until the connection closes."""
    try:
        while True:
            frame = await c.conn.recv()
            if isinstance(frame, JobAssignment) and c.session is not None:  # the push probe: verify, ack
                if any(isinstance(e, AssignmentReceived) for e in c.session.receive(frame, time.monotonic())):
                    c.session.ack(frame.job_id, AckStatus.accepted())
                    c.assigned.append((frame.job_id, frame.assignment_height, time.time()))
                for out in c.session.take_outbound():
                    c.conn.send(out)
            if isinstance(frame, HeartbeatPong):
                c.pongs += 1
                sent = c.sent_at.pop(frame.nonce_echo, None)
                if c.rtts is not None and sent is not None:
                    c.rtts.append(time.monotonic() - sent)
    except ConnectionClosed as e:
        c.closed_reason = str(e)[:120]
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


# --- --workers mode: several client processes, one server per K --------------------------------------------
async def client_child(port: int, total: int, start: int, count: int, chain_id: str = CHAIN_ID,
                       vset: tuple[bytes, ...] = VSET, distinct_sources: bool = False) -> None:
    """Client process: ``count`` runners (keys ``start..start+count`` of ``total``) pinging at 1 Hz, phases
    spread over the second across all client processes. Protocol on stdin/stdout: prints ``ready`` JSON once
    connected; ``start`` begins the window, ``stop`` prints the window's pongs, round trips and the assignments
    acked in it (``[job_id hex, assignment_height, wall time]``; ``bench/runner_capacity_chain.py`` uses them).
    ``distinct_sources``: each runner from its own loopback address (:func:`source_address`), as real runners
    come from their own hosts: a real node keeps its default per-source-IP Hello rate limit (2/s, burst 10)."""
    loop = asyncio.get_running_loop()
    sks = runner_keys(total, KEY_BASE)[start:start + count]
    clients: list[Client] = []
    tasks: list[asyncio.Task[None]] = []
    stop = asyncio.Event()
    failures = 0
    errors: list[str] = []
    for i in range(0, count, CONNECT_BATCH):
        got = await asyncio.gather(*[open_transport_client(port, sk, chain_id, vset,
                                                           source_address(start + i + j) if distinct_sources else None)
                                     for j, sk in enumerate(sks[i:i + CONNECT_BATCH])], return_exceptions=True)
        for c in got:
            if isinstance(c, BaseException):
                failures += 1
                if len(errors) < 3:
                    errors.append(repr(c)[:300])
                continue
            clients.append(c)
            tasks.append(loop.create_task(reader(c)))
            tasks.append(loop.create_task(pinger(c, (start + len(clients) - 1) / total, stop)))
    print(json.dumps({"held": len(clients), "connect_failures": failures, "errors": errors}), flush=True)
    inp = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(inp), sys.stdin)
    pongs0 = 0
    while line := (await inp.readline()).strip():
        if line == b"start":
            pongs0 = sum(c.pongs for c in clients)
            for c in clients:
                c.rtts = []
                c.assigned.clear()
        elif line == b"stop":
            rtts = [r for c in clients for r in (c.rtts or [])]
            assigned = [[j.hex(), h, round(t, 4)] for c in clients for j, h, t in c.assigned]
            print(json.dumps({"pongs": sum(c.pongs for c in clients) - pongs0, "rtts_ms": [round(1000 * r, 3)
                                                                                         for r in rtts],
                              "held_at_stop": sum(1 for c in clients if not c.conn.closed),
                              "close_reasons": dict(Counter(c.closed_reason for c in clients
                                                            if c.closed_reason is not None).most_common(5)),
                              "assigned": assigned}), flush=True)
    stop.set()
    for c in clients:
        c.conn.abort()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


async def measure_workers(n: int, spec: str, seconds: float, warmup_s: float, client_procs: int,
                          profile_dir: str | None) -> dict[str, Any]:
    """One server with ``spec`` workers (``K``, or ``K-noack``: the ACK piggyback off, in the workers or in the
    in-process adapter for K = 1, the baseline of that cut) and ``n`` runners over ``client_procs`` client
    processes."""
    k = spec.split("-")[0]
    env = dict(os.environ)
    if spec.endswith("-noack"):
        env["COWBOY_WORKER_ACK_PIGGYBACK"] = "0"
    if profile_dir:
        env["COWBOY_WORKER_PROFILE"] = str(Path(profile_dir) / f"k{k}")
    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve-transport", str(n), "--workers", k, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, env=env)
    assert server.stdin is not None and server.stdout is not None
    clients: list[asyncio.subprocess.Process] = []
    try:
        port = int(await server.stdout.readline())
        t_connect = time.monotonic()
        share = -(-n // client_procs)
        for p in range(client_procs):
            start, count = p * share, max(0, min(share, n - p * share))
            if count:
                clients.append(await asyncio.create_subprocess_exec(
                    sys.executable, __file__, "--client", str(port), "--runners", str(n), "--key-start", str(start),
                    "--key-count", str(count), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE))
        ready = [json.loads(await c.stdout.readline()) for c in clients if c.stdout is not None]
        connect_s = time.monotonic() - t_connect
        await asyncio.sleep(warmup_s)
        server.stdin.write(b"start\n")
        await server.stdin.drain()
        await server.stdout.readline()
        for c in clients:
            assert c.stdin is not None
            c.stdin.write(b"start\n")
            await c.stdin.drain()
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        for c in clients:
            assert c.stdin is not None
            c.stdin.write(b"stop\n")
            await c.stdin.drain()
        server.stdin.write(b"stop\n")
        await server.stdin.drain()
        report = json.loads(await server.stdout.readline())
        wall = time.monotonic() - t0
        got = [json.loads(await c.stdout.readline()) for c in clients if c.stdout is not None]
    finally:
        for c in clients:
            if c.stdin is not None:
                c.stdin.close()
        await asyncio.gather(*(c.wait() for c in clients))
        server.stdin.close()
        await server.wait()
    pongs = sum(g["pongs"] for g in got)
    rtts = [r for g in got for r in g["rtts_ms"]]
    held = sum(r["held"] for r in ready)
    cpu_v, cpu_w = float(report["cpu_s"]), sum(report["worker_cpu_s"])
    per = 1000 / max(pongs, 1)
    return {"workers": spec, "runners": n, "held": held, "connect_failures": sum(r["connect_failures"] for r in ready),
            "connect_s": round(connect_s, 1), "window_s": round(wall, 2), "heartbeats": pongs,
            "heartbeats_answered_share": round(pongs / max(1.0, held * wall), 3),
            "rtt_ms_p50": _quantile(rtts, 0.5), "rtt_ms_p99": _quantile(rtts, 0.99),
            "validator_ms_per_heartbeat": round(cpu_v * per, 4), "workers_ms_per_heartbeat": round(cpu_w * per, 4),
            "total_ms_per_heartbeat": round((cpu_v + cpu_w) * per, 4),
            "validator_core_share": round(cpu_v / wall, 3),
            "worker_core_shares": [round(c / wall, 3) for c in report["worker_cpu_s"]],
            "validator_rss_mib": report["rss_mib"], "worker_rss_mib": report["worker_rss_mib"],
            "pushes": len(report["push_latency_ms"]), "push_ms_p50": _quantile(report["push_latency_ms"], 0.5),
            "push_ms_p99": _quantile(report["push_latency_ms"], 0.99),
            "present": report["present"]}


async def run_workers(sizes: list[int], ks: list[str], seconds: float, warmup_s: float, client_procs: int,
                      profile_dir: str | None) -> dict[str, Any]:
    """Every K at every R; ratios to the first K (the baseline of this run)."""
    results = []
    for n in sizes:
        rows = [await measure_workers(n, k, seconds, warmup_s, client_procs, profile_dir) for k in ks]
        base = rows[0]
        for r in rows[1:]:
            r["vs_baseline"] = {
                "baseline_workers": base["workers"],
                "heartbeats_ratio": round(r["heartbeats"] / max(base["heartbeats"], 1), 3),
                "rtt_p99_ratio": round((r["rtt_ms_p99"] or 0) / max(base["rtt_ms_p99"] or 0, 1e-9), 3),
                "validator_ms_per_heartbeat_ratio": round(r["validator_ms_per_heartbeat"]
                                                          / max(base["validator_ms_per_heartbeat"], 1e-9), 3),
                "total_ms_per_heartbeat_ratio": round(r["total_ms_per_heartbeat"]
                                                      / max(base["total_ms_per_heartbeat"], 1e-9), 3)}
        results.append({"runners": n, "by_workers": rows})
    return {"benchmark": "runner_capacity", "mode": "workers",
            "params": {"runners": sizes, "workers": ks, "seconds": seconds, "warmup_s": warmup_s,
                       "client_procs": client_procs, "heartbeat_hz": 1, "cores": os.cpu_count()},
            "results": results,
            "note": ("K = 1 is QUIC in the validator process (today's default); K >= 2 are worker processes. "
                     "Clients run on the same machine (and it is shared with other work): round trips include "
                     "the clients' own loop delays; compare ratios within a run")}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments; run the client (or, with --serve-transport, the child server)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--serve-transport", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runners", default="100,250,500")
    parser.add_argument("--seconds", type=float, default=20.0, help="steady-state window per server")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--pairs", type=int, default=0,
                        help="K > 0: both servers up at once, K ABBA pairs of windows, median ratio")
    parser.add_argument("--workers", help="K1,K2,...: the node's transport with K QUIC workers (1: in-process; "
                                          "1w: one worker process; K-noack: without the ACK piggyback)")
    parser.add_argument("--client-procs", type=int, default=2, help="client processes in --workers mode")
    parser.add_argument("--profile-workers", metavar="DIR", help="cProfile every worker into DIR (--workers mode)")
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--key-start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--key-count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--chain-id", default=CHAIN_ID, help=argparse.SUPPRESS)
    parser.add_argument("--validator", help=argparse.SUPPRESS)  # hex Ed25519 key of a real node (--client)
    parser.add_argument("--distinct-sources", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quiet_logs()
    _raise_nofile(2 * int(max(args.runners.split(","), key=int)) + 256)
    if args.serve_transport is not None:
        profile = os.environ.get("COWBOY_BENCH_PROFILE_SERVER")  # where the validator process's time goes
        prof = cProfile.Profile() if profile else None
        if prof is not None:
            prof.enable()
        asyncio.run(serve_transport(args.serve_transport, args.workers))
        if prof is not None:
            prof.disable()
            prof.dump_stats(f"{profile}-validator-{os.getpid()}.prof")
        return
    if args.client is not None:
        vset = (bytes.fromhex(args.validator.removeprefix("0x")),) if args.validator else VSET
        asyncio.run(client_child(args.client, int(args.runners), args.key_start, args.key_count, args.chain_id,
                                 vset, args.distinct_sources))
        return
    if args.workers is not None:
        ks = args.workers.split(",")
        sizes = [int(x) for x in args.runners.split(",")]
        print(json.dumps(asyncio.run(run_workers(sizes, ks, args.seconds, args.warmup_s, args.client_procs,
                                                 args.profile_workers)), indent=2))
        return
    sizes = [int(x) for x in args.runners.split(",")]
    print(json.dumps(asyncio.run(run(sizes, args.seconds, args.warmup_s, args.pairs)), indent=2))


def _raise_nofile(want: int) -> None:
    """One UDP socket per client connection: raise the soft fd limit as far as the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, want))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


if __name__ == "__main__":
    main()
