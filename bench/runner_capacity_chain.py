"""Runner capacity with a real chain (prints JSON): block interval, heartbeats, pushes, CPU and RSS of a real node.

Issue 20 item 3(c). ``bench/runner_capacity.py --workers`` measures the node's TransportService alone (static
registry, fake head, a push probe that fakes committed jobs), so it cannot say what holding N runners does to
block production. This script runs the real thing on loopback:

1. a real ``cowboy-node run`` process (a one-validator ``cowboy-node testnet`` home, the e2e harness
   :class:`tests.e2e.netproc.Testnet`) with ``[quic] workers = K`` (K = 1: QUIC in the validator process) and a
   block target of ``--block-ms``; the ``--runners`` runner addresses are funded in its genesis, and genesis
   ``heartbeat_timeout_blocks`` is raised to 100,000 so no runner goes stale during a long window (runners here
   heartbeat over their sessions, not with on-chain RunnerHeartbeat transactions);
2. N RunnerRegister transactions (the example capabilities and rate card, one per runner, nonce 0) POSTed to
   ``/submit`` from ``--http-concurrency`` concurrent requests, then ``/runners/active`` polled until all N
   are active;
3. the **idle** window (``--idle-s``, the same-run baseline): no runner connected, no job;
4. the runners connect from ``--client-procs`` client processes — the client processes of
   ``bench/runner_capacity.py --client`` (reused, not copied: real RunnerSessions that authenticate, sign a
   HeartbeatPing at 1 Hz each with phases spread over the second, verify every pushed JobAssignment and sign a
   JobAck{Accepted}; no results are sent, the jobs time out on chain), each runner from its own loopback source
   address (127.10.x.y) as real runners come from their own hosts: the node keeps its default per-source-IP
   Hello rate limit (2 per second, burst 10), which would otherwise refuse most of them;
5. the **loaded** window (``--seconds``) after ``--warmup-s``: the runners heartbeat, and JobSubmit
   transactions (the HTTP example job, M = 1) are POSTed from the faucet at ``--jobs-per-s``, so the chain
   assigns them and the node pushes them to the connected runners.

Reported per window: block interval p50/p99/max from consecutive block header timestamps (``/block/{h}``),
p99 / target with ``met`` (goal ≤ 1.2×); validator process CPU (utime + stime from /proc, core share) and RSS,
the same for its child processes (the QUIC workers; K = 1 has none); and for the loaded window heartbeats
answered (count and share of held runners × window seconds at 1 Hz), heartbeat round trip p50/p99 as the clients
see it, CPU and RSS per 1,000 runners, ratios loaded / idle, the client processes' core shares (are they
keeping up?), the machine-wide count of UDP datagrams dropped for a full receive buffer (``RcvbufErrors``: other
work on the machine counts too), why connections closed, and push latency two ways:

* ``node``: the node's own ``cowboy_push_latency_seconds`` histogram (assignment block commit → JobAck{Accepted}
  received, ``TransportService``), scraped from ``/metrics`` before and after the window. It has buckets only
  (5, 10, 25, 50, 100, 250 ms, ...): p50/p99 are reported as the upper bound of the bucket holding them, with
  the exact mean (sum / count);
* ``client``: the assignment block's header timestamp → the client holding the verified assignment (wall
  clocks of one machine). The header timestamp is set when the block is proposed, so this includes the block's
  execution and commit, not just the push: an upper bound of the node's figure.

Why a new script rather than ``runner_capacity.py --chain``: that file already holds three modes around a
static-registry server; this one's setup (node process, genesis, registration, job submission, /metrics) is
different, and it only needs the client processes, which it runs by invoking ``runner_capacity.py --client``.

Everything is bounded: every wait has a timeout, the whole run has ``--max-wall-s``, and the node, its workers
and the client processes are ended in ``finally`` (also on error and Ctrl-C).

The machine it runs on matters: on a 2-core machine the clients, the node and its workers share two cores.

Usage: python bench/runner_capacity_chain.py [--runners 300] [--workers 1] [--seconds 60] [--idle-s 20]
                                             [--client-procs 2] [--jobs-per-s 1] [--block-ms 1000]
       the issue 20 target: python bench/runner_capacity_chain.py --runners 5000 --workers 4 --seconds 300
                            --client-procs 8   (needs the cores: see docs/performance.md)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench.bench_harness import CAPS_EXAMPLE, CELLS_LIMIT, CYCLES_LIMIT, JOB_EXAMPLE, STAKE, runner_keys
from bench.runner_capacity import KEY_BASE, _raise_nofile
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import Instruction
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.transaction import Transaction
from tests.e2e.netproc import Testnet

RUNNER_CAPACITY = Path(__file__).resolve().parent / "runner_capacity.py"
STOP_LINE_LIMIT = 2**28
"""Longest line read from a client process: its ``stop`` report lists every round trip of the window (about 8 bytes
each: 5,000 runners for 300 s are 12 MB)."""
GOAL_P99_RATIO = 1.2
"""Block interval p99 / target goal (issue 20 item 3)."""
HEARTBEAT_TIMEOUT_BLOCKS = 100_000
"""Genesis ``heartbeat_timeout_blocks`` of the bench chain (the governed maximum; the default 100 would mark the
registered runners stale after 100 blocks: they heartbeat over sessions only)."""
MAX_FEE = 10**7
"""Fee caps per cycle and cell of the setup and job transactions (50× the initial basefee: registration blocks
raise the basefee; the funded balances cover the caps)."""


def _proc_stat(pid: int) -> tuple[float, float] | None:
    """``(cpu seconds = utime + stime, RSS MiB)`` of ``pid`` from /proc, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return cpu, int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def udp_rcvbuf_errors() -> int | None:
    """Machine-wide UDP datagrams dropped for a full receive buffer (``RcvbufErrors`` of /proc/net/snmp)."""
    try:
        lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines() if ln.startswith("Udp:")]
    except OSError:
        return None
    if len(lines) < 2 or "RcvbufErrors" not in lines[0]:
        return None
    return int(lines[1][lines[0].index("RcvbufErrors")])


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the QUIC workers of the node, and anything they start)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                kids = [int(x) for x in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
            except FileNotFoundError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return sorted(set(out))


class CpuWindow:
    """CPU seconds of the node process and its descendants between :meth:`start` and :meth:`stop`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.t0 = 0.0
        self.cpu0: dict[int, float] = {}
        self.clients: list[int] = []
        """Client process pids (their CPU is reported apart: are the clients keeping up?)."""
        self.drops0: int | None = None

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.drops0 = udp_rcvbuf_errors()
        self.cpu0 = {p: s[0] for p in [self.pid, *_children(self.pid), *self.clients]
                     if (s := _proc_stat(p)) is not None}

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.t0
        kids = _children(self.pid)
        now = {p: s for p in [self.pid, *kids] if (s := _proc_stat(p)) is not None}
        if self.pid not in now:
            raise RuntimeError("the node process is gone")
        cpu = {p: s[0] - self.cpu0.get(p, 0.0) for p, s in now.items()}  # a child born in the window: all of it
        v_cpu, v_rss = cpu[self.pid], now[self.pid][1]
        w_cpu = [round(cpu[p], 3) for p in kids if p in now]
        w_rss = [round(now[p][1], 1) for p in kids if p in now]
        c_cpu = [(_proc_stat(p) or (self.cpu0.get(p, 0.0), 0.0))[0] - self.cpu0.get(p, 0.0) for p in self.clients]
        drops1 = udp_rcvbuf_errors()
        return {"wall_s": round(wall, 2), "validator_cpu_s": round(v_cpu, 3),
                "validator_core_share": round(v_cpu / wall, 3), "validator_rss_mib": round(v_rss, 1),
                "workers": len(w_cpu), "workers_cpu_s": w_cpu, "workers_core_share": round(sum(w_cpu) / wall, 3),
                "workers_rss_mib": w_rss, "total_core_share": round((v_cpu + sum(w_cpu)) / wall, 3),
                "total_rss_mib": round(v_rss + sum(w_rss), 1),
                "client_procs_core_shares": [round(c / wall, 3) for c in c_cpu],
                "udp_rcvbuf_drops_machine_wide": None if drops1 is None or self.drops0 is None
                else drops1 - self.drops0}


def _q(xs: Sequence[float], q: float) -> float | None:
    """Nearest-rank quantile (None for no values)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, -(-int(q * 1000) * len(s) // 1000) - 1))]


def interval_stats(timestamps_ms: Sequence[int], target_ms: int) -> dict[str, Any]:
    """Block interval figures from consecutive header timestamps: p50/p99/max, p99 / target and ``met``."""
    gaps = [b - a for a, b in itertools.pairwise(timestamps_ms)]
    p99 = _q(gaps, 0.99)
    ratio = None if p99 is None else round(p99 / target_ms, 3)
    return {"blocks": len(gaps), "p50_ms": _q(gaps, 0.5), "p99_ms": p99, "max_ms": max(gaps) if gaps else None,
            "p99_over_target": ratio, "met": ratio is not None and ratio <= GOAL_P99_RATIO}


_SAMPLE = re.compile(r'^cowboy_push_latency_seconds_(bucket|sum|count)(?:\{le="([^"]+)"\})? ([0-9.e+-]+)$', re.M)


def parse_push_histogram(text: str) -> dict[str, Any]:
    """``{"buckets": {le: cumulative count}, "sum": s, "count": n}`` of ``cowboy_push_latency_seconds`` in a
    Prometheus exposition (zeros when the node has not observed one yet)."""
    out: dict[str, Any] = {"buckets": {}, "sum": 0.0, "count": 0.0}
    for kind, le, value in _SAMPLE.findall(text):
        if kind == "bucket":
            out["buckets"][le] = float(value)
        else:
            out[kind] = float(value)
    return out


def histogram_window(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Push latency observed between two scrapes: count, exact mean, and the bucket bounds holding p50 and p99."""
    count = int(after["count"] - before["count"])
    if count <= 0:
        return {"count": 0, "mean_ms": None, "p50_le_ms": None, "p99_le_ms": None}
    diff = sorted(((float("inf") if le == "+Inf" else float(le)), after["buckets"][le] - before["buckets"].get(le, 0))
                  for le in after["buckets"])

    def bound(q: float) -> float | None:
        rank = max(1, -(-int(q * 1000) * count // 1000))
        for le, cum in diff:
            if cum >= rank:
                return None if le == float("inf") else round(le * 1000, 1)
        return None

    return {"count": count, "mean_ms": round(1000 * (after["sum"] - before["sum"]) / count, 2),
            "p50_le_ms": bound(0.5), "p99_le_ms": bound(0.99)}


def _signed(chain_id: str, sk: bytes, nonce: int, ins: Instruction) -> Transaction:
    return Transaction(chain_id=chain_id, nonce=nonce, sender=private_key_to_address(sk), instruction=ins,
                       cycles_limit=CYCLES_LIMIT, cells_limit=CELLS_LIMIT, max_fee_per_cycle=MAX_FEE,
                       max_priority_fee_per_cycle=1_000, max_fee_per_cell=MAX_FEE,
                       max_priority_fee_per_cell=1_000).signed(sk)


async def _until(cond: Callable[[], Awaitable[bool]], timeout_s: float, what: str, every_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while not await cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(every_s)


class Rpc:
    """The node's HTTP API (every request with a timeout)."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url = http, url

    async def get(self, path: str) -> Any:
        async with self.http.get(self.url + path, timeout=aiohttp.ClientTimeout(total=10)) as r:
            r.raise_for_status()
            return await r.json()

    async def height(self) -> int:
        return int((await self.get("/height"))["height"])

    async def submit(self, tx: Transaction) -> tuple[int, str]:
        async with self.http.post(self.url + "/submit", data=tx.to_bytes(), timeout=aiohttp.ClientTimeout(total=10),
                                  headers={"Content-Type": "application/octet-stream"}) as r:
            return r.status, await r.text()

    async def timestamps(self, lo: int, hi: int) -> list[int]:
        """Header timestamps of blocks ``lo..hi`` (in order)."""
        sem = asyncio.Semaphore(16)

        async def one(h: int) -> int:
            async with sem:
                return int((await self.get(f"/block/{h}"))["timestamp_ms"])

        return list(await asyncio.gather(*(one(h) for h in range(lo, hi + 1))))


async def register(rpc: Rpc, chain_id: str, sks: Sequence[bytes], concurrency: int, timeout_s: float) -> float:
    """Every runner's RunnerRegister (nonce 0) POSTed ``concurrency`` at a time; returns the seconds until all are
    active on chain."""
    caps, card = runner_file_from_json(json.loads(CAPS_EXAMPLE.read_text()), require_rate_card=True)
    if card is None:
        raise ValueError(f"{CAPS_EXAMPLE} has no rate card")
    t0 = time.monotonic()
    txs = [_signed(chain_id, sk, 0, RunnerRegister(STAKE, caps, card)) for sk in sks]
    queue = iter(txs)

    async def poster() -> None:
        for tx in queue:
            status, body = await rpc.submit(tx)
            if status != 200:
                raise RuntimeError(f"/submit refused a RunnerRegister: {status} {body[:300]}")

    await asyncio.wait_for(asyncio.gather(*(poster() for _ in range(concurrency))), timeout_s)

    async def all_active() -> bool:
        return int((await rpc.get("/runners/active?limit=1"))["count"]) >= len(sks)

    await _until(all_active, max(10.0, timeout_s - (time.monotonic() - t0)), f"{len(sks)} runners active", 0.5)
    return time.monotonic() - t0


async def window(rpc: Rpc, cpu: CpuWindow, seconds: float, metrics_url: str,
                 during: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """A measured window: heights, CPU, push histogram before and after; ``during`` runs inside it."""
    hist0 = parse_push_histogram(await _text(rpc.http, metrics_url))
    h0 = await rpc.height()
    cpu.start()
    if during is None:
        await asyncio.sleep(seconds)
    else:
        await asyncio.wait_for(during(), seconds + 30)
    usage = cpu.stop()
    h1 = await rpc.height()
    hist1 = parse_push_histogram(await _text(rpc.http, metrics_url))
    return {"heights": [h0, h1], "usage": usage, "push_node": histogram_window(hist0, hist1)}


async def _text(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
        r.raise_for_status()
        return await r.text()


class Clients:
    """The ``runner_capacity.py --client`` processes (stdin/stdout line protocol: ready, start, stop)."""

    def __init__(self) -> None:
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self, port: int, chain_id: str, validator: str, n: int, procs: int, timeout_s: float
                    ) -> dict[str, Any]:
        t0 = time.monotonic()
        share = -(-n // procs)
        for p in range(procs):
            start, count = p * share, max(0, min(share, n - p * share))
            if count:
                self.procs.append(await asyncio.create_subprocess_exec(
                    sys.executable, str(RUNNER_CAPACITY), "--client", str(port), "--runners", str(n),
                    "--key-start", str(start), "--key-count", str(count), "--chain-id", chain_id,
                    "--validator", validator, "--distinct-sources", stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, limit=STOP_LINE_LIMIT))
        ready = [await self._line(c, timeout_s) for c in self.procs]
        return {"held": sum(r["held"] for r in ready), "connect_failures": sum(r["connect_failures"] for r in ready),
                "connect_errors": [e for r in ready for e in r.get("errors", [])][:3],
                "connect_s": round(time.monotonic() - t0, 1)}

    @staticmethod
    async def _line(c: asyncio.subprocess.Process, timeout_s: float) -> Any:
        assert c.stdout is not None
        line = await asyncio.wait_for(c.stdout.readline(), timeout_s)
        if not line:
            raise RuntimeError(f"client process {c.pid} exited ({await c.wait()})")
        return json.loads(line)

    async def send(self, word: bytes) -> None:
        for c in self.procs:
            assert c.stdin is not None
            c.stdin.write(word + b"\n")
            await c.stdin.drain()

    async def stop_window(self) -> list[Any]:
        await self.send(b"stop")
        return [await self._line(c, 60) for c in self.procs]

    async def close(self) -> None:
        for c in self.procs:
            if c.stdin is not None and not c.stdin.is_closing():
                c.stdin.close()  # EOF: the client aborts its connections and exits
        deadline = time.monotonic() + 15
        for c in self.procs:  # bounded: a process that has not exited by the deadline is killed by its pid
            while c.returncode is None and _proc_stat(c.pid) is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if c.returncode is None and _proc_stat(c.pid) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(c.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(c.wait(), 5)


async def submit_jobs(rpc: Rpc, chain_id: str, faucet_sk: bytes, nonce: int, rate: float, seconds: float,
                      submitted: list[bytes], refused: list[str]) -> None:
    """JobSubmit (the HTTP example job, M = 1) at ``rate`` per second for ``seconds``, on an absolute schedule."""
    request = parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))
    if rate <= 0:
        await asyncio.sleep(seconds)
        return
    t0 = time.monotonic()
    k = 0
    while (at := t0 + k / rate) < t0 + seconds:
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        tx = _signed(chain_id, faucet_sk, nonce + len(submitted), JobSubmit(request))
        status, body = await rpc.submit(tx)
        if status == 200:
            submitted.append(derive_job_id(tx.tx_hash(), 0))
        else:
            refused.append(f"{status} {body[:200]}")
            if len(refused) > 10:
                raise RuntimeError(f"JobSubmit refused: {refused[:3]}")
        k += 1
    await asyncio.sleep(max(0.0, t0 + seconds - time.monotonic()))


def _per_1000(loaded: dict[str, Any], idle: dict[str, Any], runners: int) -> dict[str, Any]:
    """Core shares of the loaded window per 1,000 held runners (the whole node, and above the idle window's),
    and RSS above idle per 1,000 (the whole RSS is in ``usage``: most of it does not grow with runners)."""
    k = max(runners, 1) / 1000
    return {"validator_core_share": round(loaded["validator_core_share"] / k, 3),
            "workers_core_share": round(loaded["workers_core_share"] / k, 3),
            "total_core_share": round(loaded["total_core_share"] / k, 3),
            "total_core_share_above_idle": round((loaded["total_core_share"] - idle["total_core_share"]) / k, 3),
            "rss_above_idle_mib": round((loaded["total_rss_mib"] - idle["total_rss_mib"]) / k, 1)}


def _merge(counts: Sequence[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            out[k] = out.get(k, 0) + n
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 3)


async def run(args: argparse.Namespace, tmp: Path, started: list[Testnet]) -> dict[str, Any]:
    """The whole measurement (the caller cleans up ``started``)."""
    net = Testnet.create(tmp, n=1, block_time_ms=args.block_ms, proxied=False)
    started.append(net)
    v = net.validators[0]
    sks = runner_keys(args.runners, KEY_BASE)
    net.fund_in_genesis([private_key_to_address(sk) for sk in sks], amount=10**21)
    gpath = v.home / "genesis.json"
    genesis = json.loads(gpath.read_text())
    genesis["params"]["limits"]["heartbeat_timeout_blocks"] = HEARTBEAT_TIMEOUT_BLOCKS
    gpath.write_text(json.dumps(genesis, indent=2))
    cpath = v.home / "config.toml"
    text = cpath.read_text()
    if "# workers = 1" not in text:
        raise RuntimeError("config.toml template changed: no '# workers = 1' line to set [quic] workers")
    cpath.write_text(text.replace("# workers = 1", f"workers = {args.workers}"))
    conf = tomllib.loads(cpath.read_text())
    quic_port = int(conf["quic"]["addr"].rsplit(":", 1)[1])
    metrics_url = f"http://{conf['metrics']['addr']}/metrics"
    net.start(timeout=60)
    assert v.proc is not None
    cpu = CpuWindow(v.proc.pid)
    faucet_sk, faucet = load_account_private_key(net.out / "faucet.key")
    clients = Clients()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.http_concurrency + 8)) as http:
            rpc = Rpc(http, v.rpc_url)

            async def height_ge(h: int) -> Callable[[], Awaitable[bool]]:
                async def ok() -> bool:
                    return await rpc.height() >= h
                return ok

            await _until(await height_ge(2), 60, "height 2")
            chain_id = str((await rpc.get("/status"))["chain_id"])
            register_s = await register(rpc, chain_id, sks, args.http_concurrency, args.register_timeout_s)
            h = await rpc.height()
            await _until(await height_ge(h + 2), 30, "two blocks after registration")  # basefee settles
            idle = await window(rpc, cpu, args.idle_s, metrics_url)

            connected = await clients.start(quic_port, chain_id, v.public_key, args.runners, args.client_procs,
                                            args.connect_timeout_s)
            cpu.clients = [c.pid for c in clients.procs]
            await asyncio.sleep(args.warmup_s)
            nonce = int((await rpc.get(f"/account/0x{faucet.hex()}"))["next_pending_nonce"])
            submitted: list[bytes] = []
            refused: list[str] = []
            await clients.send(b"start")
            loaded = await window(rpc, cpu, args.seconds, metrics_url, lambda: submit_jobs(
                rpc, chain_id, faucet_sk, nonce, args.jobs_per_s, args.seconds, submitted, refused))
            got = await clients.stop_window()
            idle_ts = await rpc.timestamps(*idle["heights"])
            loaded_ts = await rpc.timestamps(*loaded["heights"])
            # Client-side push latency: assignment block's header timestamp → assignment held by the client.
            assigned = [a for g in got for a in g["assigned"]]
            heights = sorted({int(a[1]) for a in assigned})
            block_ts = dict(zip(heights, [await rpc.timestamps(hh, hh) for hh in heights], strict=True))
            client_push = [1000 * float(a[2]) - block_ts[int(a[1])][0] for a in assigned]
    finally:
        await clients.close()
    pongs = sum(g["pongs"] for g in got)
    rtts = [r for g in got for r in g["rtts_ms"]]
    wall = loaded["usage"]["wall_s"]
    held = connected["held"]
    sub_ids = {j.hex() for j in submitted}
    acked_ids = {a[0] for a in assigned}
    idle_iv = interval_stats(idle_ts, args.block_ms)
    loaded_iv = interval_stats(loaded_ts, args.block_ms)
    iu, lu = idle["usage"], loaded["usage"]
    return {
        "benchmark": "runner_capacity_chain",
        "params": {"runners": args.runners, "workers": args.workers, "block_ms": args.block_ms,
                   "seconds": args.seconds, "idle_s": args.idle_s, "warmup_s": args.warmup_s,
                   "client_procs": args.client_procs, "jobs_per_s": args.jobs_per_s, "heartbeat_hz": 1,
                   "cores": os.cpu_count(), "loadavg_at_start": args.loadavg},
        "setup": {"register_s": round(register_s, 1), **connected},
        "idle": {"block_interval": idle_iv, "usage": iu},
        "loaded": {
            "block_interval": loaded_iv, "usage": lu,
            "per_1000_runners": _per_1000(lu, iu, held),
            "heartbeats": pongs, "heartbeats_answered_share": round(pongs / max(1.0, held * wall), 3),
            "held_at_stop": sum(g["held_at_stop"] for g in got),
            "close_reasons": _merge([g.get("close_reasons", {}) for g in got]),
            "rtt_ms_p50": _q(rtts, 0.5), "rtt_ms_p99": _q(rtts, 0.99),
            "jobs_submitted": len(submitted), "jobs_refused": len(refused), "refusals": refused[:3],
            "jobs_pushed_and_acked": len(sub_ids & acked_ids), "acks": len(assigned),
            "push_node": loaded["push_node"],
            "push_client_ms": {"count": len(client_push),
                               "p50": None if not client_push else round(_q(client_push, 0.5) or 0, 1),
                               "p99": None if not client_push else round(_q(client_push, 0.99) or 0, 1)},
        },
        "loaded_over_idle": {
            "block_interval_p99": _ratio(loaded_iv["p99_ms"], idle_iv["p99_ms"]),
            "validator_cpu": _ratio(lu["validator_core_share"], iu["validator_core_share"]),
            "total_cpu": _ratio(lu["total_core_share"], iu["total_core_share"]),
            "total_rss": _ratio(lu["total_rss_mib"], iu["total_rss_mib"]),
        },
        "note": ("one validator process (+ K-1.. workers) and the client processes on the same machine; push_node "
                 "p50/p99 are histogram bucket upper bounds (mean exact); push_client is block header timestamp "
                 "-> verified assignment at the client (includes execution and commit)"),
    }


def _cleanup(started: list[Testnet]) -> None:
    """SIGTERM the node (its workers exit with it), then SIGKILL whatever of it is left."""
    for net in started:
        v = net.validators[0]
        kids = _children(v.proc.pid) if v.proc is not None and v.proc.poll() is None else []
        try:
            if v.running:
                net.stop(0, timeout=20)
        except (AssertionError, OSError):
            pass
        net.close()
        deadline = time.monotonic() + 10
        for pid in kids:  # the node's own children only (pids recorded while it ran)
            while _proc_stat(pid) is not None and time.monotonic() < deadline:
                time.sleep(0.1)
            if _proc_stat(pid) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse arguments, run (bounded), print one JSON object and return it."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--runners", type=int, default=300)
    p.add_argument("--workers", type=int, default=1, help="[quic] workers of the node (1: QUIC in-process)")
    p.add_argument("--block-ms", type=int, default=1000, help="block target")
    p.add_argument("--seconds", type=float, default=60.0, help="loaded window")
    p.add_argument("--idle-s", type=float, default=20.0, help="idle window before the runners connect (baseline)")
    p.add_argument("--warmup-s", type=float, default=5.0, help="after every client connected, before the window")
    p.add_argument("--client-procs", type=int, default=2)
    p.add_argument("--jobs-per-s", type=float, default=1.0, help="JobSubmit rate in the loaded window")
    p.add_argument("--http-concurrency", type=int, default=16, help="concurrent /submit requests at registration")
    p.add_argument("--register-timeout-s", type=float, default=600.0)
    p.add_argument("--connect-timeout-s", type=float, default=300.0)
    p.add_argument("--keep", action="store_true", help="keep the node's home (its node.log) and print where")
    p.add_argument("--max-wall-s", type=float, default=0.0, help="whole-run bound (0: derived from the others)")
    args = p.parse_args(argv)
    args.loadavg = [round(x, 2) for x in os.getloadavg()]
    bound = args.max_wall_s or (180 + args.register_timeout_s + args.connect_timeout_s + args.idle_s
                                + args.warmup_s + args.seconds)
    _raise_nofile(args.runners + 256)
    tmp = Path(tempfile.mkdtemp(prefix="runner-capacity-chain-"))
    started: list[Testnet] = []
    try:
        out = asyncio.run(asyncio.wait_for(run(args, tmp, started), bound))
    finally:
        _cleanup(started)
        if args.keep:
            print(f"node home kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2), flush=True)
    return out


if __name__ == "__main__":
    main()
