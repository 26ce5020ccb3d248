"""Soak benchmark: a real node process under steady load for ``--duration`` seconds (prints ONE JSON object).

Starts ``cowboy-node run`` on a fresh home (tests/integration/nodeproc.py), funds ``--accounts`` load accounts from
the dev faucet, deploys a small actor, watches the idle chain for ``--idle-s`` seconds (the same-run baseline:
block interval p99 with no load), then for ``--duration`` seconds drives at the same time

- signed Transfers at a fixed ``--tps`` from the load accounts (nonces tracked locally, resynced from
  ``next_pending_nonce`` after any rejection), counted accepted / rejected by error code;
- ``GET /status`` and ``GET /account/{a}`` queries at ``--qps`` (alternating) and read-only actor calls
  (``POST /actor/read``) at ``--read-qps``, each timed;
- the attacks chosen with ``--attack`` (repeatable), at a small scale:
  ``read-spin``  one client issuing back-to-back reads of a handler that loops until the read cycles cap;
  ``gapped-nonces``  ``--gapped-senders`` funded accounts whose transactions all skip nonce 0 (never ready);
  ``slow-headers``  ``--slow-connections`` idle TCP connections each sending one header line every 5 s
  (reopened when the server closes them).

Every ``--sample-s`` seconds a sample records the node's RSS and CPU (``/proc/PID``), height, the block
intervals of the window (header timestamps), the mempool (``/status``), accepted/rejected counts and query latency
p50/p99. When the load stops the bench waits (``--drain-s`` at most) until every accepted transfer is in a block,
then asks ``/tx/{hash}/receipt`` for each one (and ``/tx/{hash}`` for any without a receipt).

Goals (issue 22, "Load and soak"), each with ``met``: RSS plateau (growth over the last half of the load ≤ 5 %;
the slope is reported too, since a short run can pass with a steady climb),
block interval p99 ≤ 1.2 × the target, every accepted transaction included or explicitly evicted, query p99 ≤
``--query-p99-ms`` for each query kind. The node has no explicit eviction signal yet, so a transaction without a
receipt is counted ``evicted`` only when ``/tx/{hash}`` says so, else ``pending`` or ``lost``.

Usage: python bench/soak.py [--duration 600] [--tps 50] [--accounts 100] [--attack read-spin ...]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_harness import percentile, summary_ms
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import DeployActor, Instruction, Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.integration.nodeproc import NodeProcess

ATTACKS = ("read-spin", "gapped-nonces", "slow-headers")
ACTOR_SOURCE = '''import pvm_host


def init(payload):
    pvm_host.set_state(b"count", b"0")
    return b""


def get(payload):
    return pvm_host.get_state(b"count")


def spin(payload):
    n = 0
    while True:
        n += 1
'''
"""``get`` is the query traffic's read; ``spin`` runs until the read's cycles limit (the read-spin attack)."""
SPIN_CYCLES = 10_000_000
"""The node's largest ``/actor/read`` cycles limit."""
SPIN_MAX_RATE = 20.0
"""Most spinning reads started per second (a slot whose read is still running is skipped, not queued)."""
GAPPED_RATE = 20.0
"""Submissions per second of the gapped-nonces senders together."""
SINK = bytes.fromhex("5eed" * 10)
"""Recipient of every load transfer."""
FUND_AMOUNT = 10**21
TRANSFER_LIMITS = {"cycles_limit": 50_000, "cells_limit": 2_000}
MAX_FEE = 2_000_000
"""20 × the initial basefee: the load never stalls on a rising basefee."""
TIP = 1_000
SLOW_HEADER_EVERY_S = 5.0


# -- small helpers -------------------------------------------------------------------------------
class Http:
    """One keep-alive HTTP/1.1 connection to the node (one per thread)."""

    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.port = port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method: str, path: str, body: bytes | None = None, ctype: str | None = None,
                retry: bool = True) -> tuple[int, Any]:
        """``(status, JSON body)``; a GET is retried once on a dropped keep-alive connection."""
        headers = {"Content-Type": ctype} if ctype else {}
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                return resp.status, json.loads(data) if data else None
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt or not retry:
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str) -> Any:
        status, doc = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {doc}")
        return doc


def proc_sample(pid: int) -> tuple[int, float]:
    """``(RSS in KiB, user+system CPU seconds)`` of process ``pid``."""
    rss_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
                break
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return rss_kb, ticks / os.sysconf("SC_CLK_TCK")


def ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 1)


def latency(values: Sequence[float]) -> dict[str, Any]:
    return {"count": len(values), "p50_ms": ms(percentile(values, 50)), "p99_ms": ms(percentile(values, 99))}


@dataclass
class Account:
    sk: bytes
    address: bytes
    nonce: int = 0
    dirty: bool = False
    """The local nonce may be wrong (a rejection or a lost answer): ask the node before the next use."""


def signed(chain_id: str, acct: Account, ins: Instruction, nonce: int | None = None,
           limits: dict[str, int] | None = None) -> Transaction:
    lim = limits or TRANSFER_LIMITS
    return Transaction(chain_id=chain_id, nonce=acct.nonce if nonce is None else nonce, sender=acct.address,
                       instruction=ins, cycles_limit=lim["cycles_limit"], cells_limit=lim["cells_limit"],
                       max_fee_per_cycle=MAX_FEE, max_priority_fee_per_cycle=TIP, max_fee_per_cell=MAX_FEE,
                       max_priority_fee_per_cell=TIP).signed(acct.sk)


# -- shared state ------------------------------------------------------------------------------
@dataclass
class Window:
    """What happened since the last sample (swapped out by the sampler)."""

    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    latency: dict[str, list[float]] = field(default_factory=lambda: {"status": [], "account": [], "actor_read": []})


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.window = Window()
        self.accepted: dict[str, float] = {}
        """Hash of every accepted load transfer → when it was accepted."""
        self.rejected: Counter[str] = Counter()
        self.sent = 0
        self.missed_slots = 0
        self.latency: dict[str, list[float]] = {"status": [], "account": [], "actor_read": []}
        self.query_errors: Counter[str] = Counter()
        self.attacks: dict[str, dict[str, Any]] = {}

    def record_submit(self, tx_hash: str | None, code: str | None) -> None:
        with self.lock:
            self.sent += 1
            if tx_hash is not None:
                self.accepted[tx_hash] = time.monotonic()
                self.window.accepted += 1
            else:
                assert code is not None
                self.rejected[code] += 1
                self.window.rejected[code] += 1

    def record_query(self, kind: str, seconds: float, error: str | None) -> None:
        with self.lock:
            self.latency[kind].append(seconds)
            self.window.latency[kind].append(seconds)
            if error is not None:
                self.query_errors[f"{kind}:{error}"] += 1

    def swap(self) -> Window:
        with self.lock:
            w, self.window = self.window, Window()
            return w


class Blocks:
    """Polls ``/height`` and fetches every new block's header timestamp and transaction hashes."""

    def __init__(self, port: int) -> None:
        self.http = Http(port)
        self.lock = threading.Lock()
        self.timestamps: dict[int, int] = {}
        self.included: set[str] = set()
        self.height = 0
        self.errors = 0

    def poll(self) -> None:
        try:
            height = int(self.http.get("/height")["height"])
            for h in range(self.height + 1, height + 1):
                block = self.http.get(f"/block/{h}")
                with self.lock:
                    self.timestamps[h] = int(block["timestamp_ms"])
                    self.included.update(block["transactions"])
                    self.height = h
        except (OSError, http.client.HTTPException, RuntimeError, ValueError, KeyError):
            self.errors += 1

    def intervals_ms(self, lo: int, hi: int) -> list[float]:
        """Header timestamp differences of blocks ``lo+1..hi`` (each against its parent)."""
        with self.lock:
            return [float(self.timestamps[h] - self.timestamps[h - 1]) for h in range(lo + 1, hi + 1)
                    if h in self.timestamps and h - 1 in self.timestamps]


def paced(rate: float, stop: threading.Event, body: Callable[[], None], on_missed: Callable[[int], None]) -> None:
    """Call ``body`` ``rate`` times per second until ``stop``; slots more than 1 s late are skipped, not burst."""
    interval = 1.0 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if next_at - now > 0:
            if stop.wait(next_at - now):
                return
        elif now - next_at > 1.0:
            missed = int((now - next_at) / interval)
            on_missed(missed)
            next_at += missed * interval
        body()
        next_at += interval


def read_outcome(doc: Any) -> str:
    """``ok``, or ``halted:<error>`` for a read the node answered (200) with the handler's error."""
    error = doc.get("error") if isinstance(doc, dict) else "no_json_object"
    return "ok" if error is None else f"halted:{error}"


def error_code(status: int, doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("code"), str):
        return str(doc["code"])
    return f"http_{status}"


# -- set-up ------------------------------------------------------------------------------------
def wait_until(what: str, cond: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not done after {timeout:g} s")
        time.sleep(every)


def fund(http_: Http, chain_id: str, faucet: Account, targets: Sequence[bytes], per_sender_cap: int = 60) -> None:
    """Transfers from the faucet, at most ``per_sender_cap`` pooled at a time; returns when all are committed."""
    for i in range(0, len(targets), per_sender_cap):
        for to in targets[i:i + per_sender_cap]:
            status, doc = http_.request("POST", "/submit", signed(chain_id, faucet, Transfer(to, FUND_AMOUNT))
                                        .to_bytes(), "application/octet-stream", retry=False)
            if status != 200:
                raise RuntimeError(f"funding transfer refused: {doc}")
            faucet.nonce += 1
        wait_until("funding", lambda: http_.get(f"/account/{to_checksum_address(faucet.address)}")["nonce"]
                   == faucet.nonce, 60)


def deploy_actor(http_: Http, chain_id: str, faucet: Account) -> str:
    tx = signed(chain_id, faucet, DeployActor(ACTOR_SOURCE, b"", "init", b""),
                limits={"cycles_limit": 5_000_000, "cells_limit": 200_000})
    status, doc = http_.request("POST", "/submit", tx.to_bytes(), "application/octet-stream", retry=False)
    if status != 200:
        raise RuntimeError(f"actor deploy refused: {doc}")
    faucet.nonce += 1
    tx_hash = "0x" + tx.tx_hash().hex()
    receipt: dict[str, Any] = {}

    def done() -> bool:
        status, doc = http_.request("GET", f"/tx/{tx_hash}/receipt")
        if status == 200:
            receipt.update(doc)
        return status == 200

    wait_until("actor deploy", done, 60)
    if receipt.get("status") != "success":
        raise RuntimeError(f"actor deploy failed: {receipt}")
    return to_checksum_address(derive_actor_address(faucet.address, b"", ACTOR_SOURCE))


# -- load --------------------------------------------------------------------------------------
def transfer_worker(port: int, chain_id: str, accounts: list[Account], rate: float, stats: Stats,
                    stop: threading.Event) -> None:
    http_ = Http(port)
    turn = 0

    def one() -> None:
        nonlocal turn
        acct = accounts[turn % len(accounts)]
        turn += 1
        if acct.dirty:
            try:
                acct.nonce = int(http_.get(f"/account/{to_checksum_address(acct.address)}")["next_pending_nonce"])
                acct.dirty = False
            except (OSError, http.client.HTTPException, RuntimeError):
                stats.record_submit(None, "resync_failed")
                return
        tx = signed(chain_id, acct, Transfer(SINK, 1))
        try:
            status, doc = http_.request("POST", "/submit", tx.to_bytes(), "application/octet-stream", retry=False)
        except TimeoutError:
            acct.dirty = True
            stats.record_submit(None, "client_timeout")
            return
        except (OSError, http.client.HTTPException):
            acct.dirty = True
            stats.record_submit(None, "connection_error")
            return
        if status == 200:
            acct.nonce += 1
            stats.record_submit("0x" + tx.tx_hash().hex(), None)
        else:
            acct.dirty = True
            stats.record_submit(None, error_code(status, doc))

    def missed(n: int) -> None:
        with stats.lock:
            stats.missed_slots += n

    paced(rate, stop, one, missed)
    http_.close()


def query_worker(port: int, rate: float, kinds: Callable[[int], tuple[str, str, str, bytes | None]], stats: Stats,
                 stop: threading.Event) -> None:
    http_ = Http(port)
    i = 0

    def one() -> None:
        nonlocal i
        kind, method, path, body = kinds(i)
        i += 1
        t0 = time.perf_counter()
        error: str | None = None
        try:
            status, doc = http_.request(method, path, body, "application/json" if body is not None else None)
            if status != 200:
                error = error_code(status, doc)
            elif kind == "actor_read" and read_outcome(doc) != "ok":
                error = read_outcome(doc)
        except TimeoutError:
            error = "client_timeout"
        except (OSError, http.client.HTTPException):
            error = "connection_error"
        stats.record_query(kind, time.perf_counter() - t0, error)

    paced(rate, stop, one, lambda n: None)
    http_.close()


# -- attacks -----------------------------------------------------------------------------------
def read_spin(port: int, actor: str, stats: Stats, stop: threading.Event) -> None:
    """Reads of ``spin`` (each runs to the read cycles cap), one at a time, back to back, at most
    ``SPIN_MAX_RATE`` per second (a refused read is retried at the next slot)."""
    http_ = Http(port, timeout=60)
    body = json.dumps({"actor": actor, "handler": "spin", "cycles_limit": SPIN_CYCLES}).encode()
    durations: list[float] = []
    outcomes: Counter[str] = Counter()

    def one() -> None:
        t0 = time.perf_counter()
        try:
            status, doc = http_.request("POST", "/actor/read", body, "application/json", retry=False)
            outcome = error_code(status, doc) if status != 200 else read_outcome(doc)
        except (OSError, http.client.HTTPException) as e:
            outcome = type(e).__name__
        durations.append(time.perf_counter() - t0)
        outcomes[outcome] += 1

    paced(SPIN_MAX_RATE, stop, one, lambda n: None)
    http_.close()
    stats.attacks["read-spin"] = {"reads": len(durations), "outcomes": dict(outcomes),
                                  "read_ms": summary_ms(durations)}


def gapped_nonces(port: int, chain_id: str, senders: list[Account], stats: Stats, stop: threading.Event) -> None:
    """Each sender submits nonces 1..N (nonce 0 never comes): none is ever ready; the pool holds them."""
    http_ = Http(port)
    outcomes: Counter[str] = Counter()
    admitted: list[str] = []
    next_nonce = {a.address: 1 for a in senders}
    i = 0

    def one() -> None:
        nonlocal i
        acct = senders[i % len(senders)]
        i += 1
        nonce = next_nonce[acct.address]
        tx = signed(chain_id, acct, Transfer(SINK, 1), nonce=nonce)
        try:
            status, doc = http_.request("POST", "/submit", tx.to_bytes(), "application/octet-stream", retry=False)
        except (OSError, http.client.HTTPException) as e:
            outcomes[type(e).__name__] += 1
            return
        if status == 200:
            admitted.append("0x" + tx.tx_hash().hex())
            next_nonce[acct.address] = nonce + 1
            outcomes["accepted"] += 1
        else:
            code = error_code(status, doc)
            outcomes[code] += 1
            if code == "nonce_gap_too_large":  # start over above the gap: keep knocking
                next_nonce[acct.address] = 1

    paced(GAPPED_RATE, stop, one, lambda n: None)
    still_pooled = 0
    for h in admitted:
        try:
            status, doc = http_.request("GET", f"/tx/{h}")
            still_pooled += status == 200 and doc.get("status") == "pending"
        except (OSError, http.client.HTTPException):
            pass
    http_.close()
    stats.attacks["gapped-nonces"] = {"senders": len(senders), "submitted": sum(outcomes.values()),
                                      "outcomes": dict(outcomes), "admitted": len(admitted),
                                      "still_pooled_at_end": still_pooled}


def slow_headers(port: int, connections: int, stats: Stats, stop: threading.Event) -> None:
    """``connections`` sockets each trickling one header line every 5 s; reopened when the server closes them."""
    opened = closed_by_server = failed = 0
    lifetimes: list[float] = []
    socks: list[tuple[socket.socket, float] | None] = [None] * connections
    live_counts: list[int] = []
    while not stop.is_set():
        for i in range(connections):
            entry = socks[i]
            if entry is None:
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=5)
                    s.sendall(b"POST /submit HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n")
                    s.setblocking(False)
                    socks[i] = (s, time.monotonic())
                    opened += 1
                except OSError:
                    failed += 1
                continue
            s, since = entry
            try:
                try:
                    if s.recv(4096) == b"":  # the server closed it (or answered and closed)
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                s.sendall(f"X-Trickle-{random.randrange(10**6)}: a\r\n".encode())
            except OSError:
                s.close()
                socks[i] = None
                closed_by_server += 1
                lifetimes.append(time.monotonic() - since)
        live_counts.append(sum(e is not None for e in socks))
        stop.wait(SLOW_HEADER_EVERY_S)
    for e in socks:
        if e is not None:
            e[0].close()
    stats.attacks["slow-headers"] = {
        "connections": connections, "opened": opened, "closed_by_server": closed_by_server,
        "connect_failures": failed, "lifetime_s_p50": percentile(lifetimes, 50),
        "held_open_min": min(live_counts, default=0), "held_open_last": live_counts[-1] if live_counts else 0}


# -- the run -----------------------------------------------------------------------------------
def verdicts(args: argparse.Namespace, samples: list[dict[str, Any]], load_intervals: list[float],
             idle_intervals: list[float], inclusion: dict[str, Any], stats: Stats) -> dict[str, Any]:
    target = args.block_ms
    half = [s for s in samples if s["t_s"] >= args.duration / 2]
    slope: float | None = None
    if len(half) >= 2:
        first, last = half[0]["rss_kb"], half[-1]["rss_kb"]
        growth: float | None = round(100 * (last - first) / first, 2)
        slope = round(60 * (last - first) / (half[-1]["t_s"] - half[0]["t_s"]), 1)
    else:
        first = last = None
        growth = None
    p99 = percentile(load_intervals, 99)
    query = {kind: ms(percentile(v, 99)) for kind, v in stats.latency.items()}
    return {
        "rss_plateau": {"rss_kb_at_half": first, "rss_kb_at_end": last, "growth_last_half_pct": growth,
                        "slope_kb_per_min_last_half": slope, "limit_pct": 5.0,
                        "met": None if growth is None else growth <= 5.0},
        "block_interval_p99": {"p99_ms": p99, "limit_ms": 1.2 * target, "target_ms": target,
                               "baseline_idle_p99_ms": percentile(idle_intervals, 99),
                               "met": None if p99 is None else p99 <= 1.2 * target},
        "accepted_included_or_evicted": {"accepted": inclusion["accepted"], "included": inclusion["included"],
                                         "evicted": inclusion["evicted"], "pending": inclusion["pending"],
                                         "lost": inclusion["lost"],
                                         "met": inclusion["pending"] == 0 and inclusion["lost"] == 0},
        "query_p99": {"p99_ms": query, "limit_ms": args.query_p99_ms,
                      "met": all(v is not None and v <= args.query_p99_ms for v in query.values())},
    }


def check_inclusion(port: int, stats: Stats, blocks: Blocks) -> dict[str, Any]:
    """Receipt of every accepted transfer (and ``/tx`` of any without one)."""
    http_ = Http(port)
    counts: Counter[str] = Counter()
    receipt_status: Counter[str] = Counter()
    examples: dict[str, str] = {}
    t0 = time.monotonic()
    for h in stats.accepted:
        status, doc = http_.request("GET", f"/tx/{h}/receipt")
        if status == 200:
            counts["included"] += 1
            receipt_status[str(doc.get("status"))] += 1
            if h not in blocks.included:
                counts["receipt_but_not_in_a_watched_block"] += 1
            continue
        status, doc = http_.request("GET", f"/tx/{h}")
        text = json.dumps(doc)
        kind = ("evicted" if "evict" in text else "pending" if status == 200 and doc.get("status") == "pending"
                else "lost")
        counts[kind] += 1
        examples.setdefault(kind, h)
    http_.close()
    return {"accepted": len(stats.accepted), "included": counts["included"], "evicted": counts["evicted"],
            "pending": counts["pending"], "lost": counts["lost"], "receipt_status": dict(receipt_status),
            "receipt_but_not_in_a_watched_block": counts["receipt_but_not_in_a_watched_block"],
            "examples": examples, "check_s": round(time.monotonic() - t0, 1)}


def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    node = NodeProcess(home, block_time_ms=args.block_ms)
    node.start()
    assert node.proc is not None
    pid, port = node.proc.pid, node.rpc_port
    try:
        return drive(args, node, pid, port)
    finally:
        rc = node.terminate(timeout=60)
        if rc != 0:
            print(f"warning: node exited with {rc}; log tail:\n{node.read_log()[-2000:]}", file=sys.stderr)


def drive(args: argparse.Namespace, node: NodeProcess, pid: int, port: int) -> dict[str, Any]:
    attacks = set(args.attack or ())
    http_ = Http(port)
    chain_id = str(http_.get("/status")["chain_id"])
    sk, address = load_account_private_key(node.home / "keys" / "faucet.key")
    faucet = Account(sk, address)
    rng = random.Random(22)
    accounts = [Account(k, private_key_to_address(k))
                for k in (rng.randbytes(31).rjust(32, b"\x01") for _ in range(args.accounts))]
    gapped = [Account(k, private_key_to_address(k)) for k in
              (rng.randbytes(31).rjust(32, b"\x02") for _ in range(args.gapped_senders if "gapped-nonces" in attacks
                                                                  else 0))]
    t_setup = time.monotonic()
    fund(http_, chain_id, faucet, [a.address for a in accounts + gapped])
    actor = deploy_actor(http_, chain_id, faucet)
    setup_s = time.monotonic() - t_setup

    blocks = Blocks(port)
    blocks.poll()
    tracker_stop = threading.Event()

    def track() -> None:
        while not tracker_stop.wait(0.2):
            blocks.poll()

    tracker = threading.Thread(target=track, name="blocks", daemon=True)
    tracker.start()

    # same-run baseline: the idle chain
    idle_from = blocks.height
    time.sleep(args.idle_s)
    blocks.poll()
    idle_to = blocks.height
    idle_intervals = blocks.intervals_ms(idle_from + 1, idle_to)  # the first idle block may follow the deploy's

    stats = Stats()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    workers = max(1, min(args.workers, args.accounts))
    for w in range(workers):
        threads.append(threading.Thread(target=transfer_worker, name=f"tx-{w}", daemon=True,
                                        args=(port, chain_id, accounts[w::workers], args.tps / workers, stats, stop)))
    read_body = json.dumps({"actor": actor, "handler": "get"}).encode()

    def query_kind(i: int) -> tuple[str, str, str, bytes | None]:
        if i % 2 == 0:
            return "status", "GET", "/status", None
        return "account", "GET", f"/account/{to_checksum_address(accounts[i % len(accounts)].address)}", None

    if args.qps > 0:
        threads.append(threading.Thread(target=query_worker, name="q", daemon=True,
                                        args=(port, args.qps, query_kind, stats, stop)))
    if args.read_qps > 0:
        threads.append(threading.Thread(target=query_worker, name="read", daemon=True,
                                        args=(port, args.read_qps, lambda i: ("actor_read", "POST", "/actor/read",
                                                                              read_body), stats, stop)))
    if "read-spin" in attacks:
        threads.append(threading.Thread(target=read_spin, name="spin", daemon=True, args=(port, actor, stats, stop)))
    if "gapped-nonces" in attacks:
        threads.append(threading.Thread(target=gapped_nonces, name="gapped", daemon=True,
                                        args=(port, chain_id, gapped, stats, stop)))
    if "slow-headers" in attacks:
        threads.append(threading.Thread(target=slow_headers, name="slow", daemon=True,
                                        args=(port, args.slow_connections, stats, stop)))

    samples: list[dict[str, Any]] = []
    rss0, cpu0 = proc_sample(pid)
    load_from = blocks.height
    t0 = time.monotonic()
    for t in threads:
        t.start()
    prev_t, prev_cpu, prev_height = t0, cpu0, load_from
    node_died = None
    while True:
        end = t0 + args.duration
        now = time.monotonic()
        if now >= end - 1e-3:
            break
        time.sleep(min(args.sample_s, end - now))
        if node.proc is not None and node.proc.poll() is not None:
            node_died = node.proc.returncode
            break
        now = time.monotonic()
        rss, cpu = proc_sample(pid)
        try:
            st = http_.get("/status")
            mempool = st["mempool"]
        except (OSError, http.client.HTTPException, RuntimeError):
            mempool = None
        blocks.poll()
        height = blocks.height
        window = stats.swap()
        intervals = blocks.intervals_ms(prev_height, height)
        samples.append({
            "t_s": round(now - t0, 1), "rss_kb": rss, "cpu_pct": round(100 * (cpu - prev_cpu) / (now - prev_t), 1),
            "height": height, "blocks": height - prev_height,
            "block_interval_ms": {"p50": percentile(intervals, 50), "p99": percentile(intervals, 99),
                                  "max": max(intervals, default=None)},
            "mempool": mempool, "accepted": window.accepted, "rejected": dict(window.rejected),
            "query": {kind: latency(v) for kind, v in window.latency.items()},
        })
        prev_t, prev_cpu, prev_height = now, cpu, height
    stop.set()
    load_s = time.monotonic() - t0
    for t in threads:
        t.join(timeout=120)
    load_to = blocks.height
    load_intervals = blocks.intervals_ms(load_from, load_to)

    # drain: every accepted transfer in a block
    t_drain = time.monotonic()
    pending = [h for h in stats.accepted if h not in blocks.included]
    while pending and time.monotonic() - t_drain < args.drain_s and node_died is None:
        time.sleep(0.25)
        with blocks.lock:
            pending = [h for h in pending if h not in blocks.included]
    drain_s = time.monotonic() - t_drain
    tracker_stop.set()
    tracker.join(timeout=10)
    inclusion: dict[str, Any] = check_inclusion(port, stats, blocks) if node_died is None else {
        "accepted": len(stats.accepted), "included": 0, "evicted": 0, "pending": 0, "lost": len(stats.accepted)}
    inclusion["drain_s"] = round(drain_s, 1)
    rss_end, cpu_end = proc_sample(pid)
    http_.close()

    out: dict[str, Any] = {
        "benchmark": "soak",
        "params": {"duration_s": args.duration, "tps": args.tps, "accounts": args.accounts, "qps": args.qps,
                   "read_qps": args.read_qps, "block_ms": args.block_ms, "sample_s": args.sample_s,
                   "idle_s": args.idle_s, "attacks": sorted(attacks), "workers": workers},
        "machine": {"cpus": os.cpu_count(), "platform": sys.platform, "python": sys.version.split()[0]},
        "setup_s": round(setup_s, 1),
        "baseline": {"idle_s": args.idle_s, "blocks": len(idle_intervals),
                     "block_interval_ms": {"p50": percentile(idle_intervals, 50),
                                           "p99": percentile(idle_intervals, 99),
                                           "max": max(idle_intervals, default=None)}},
        "load": {"seconds": round(load_s, 1), "sent": stats.sent, "accepted": len(stats.accepted),
                 "rejected": dict(stats.rejected), "achieved_tps": round(len(stats.accepted) / load_s, 1),
                 "missed_slots": stats.missed_slots, "blocks": load_to - load_from,
                 "block_interval_ms": {"p50": percentile(load_intervals, 50), "p99": percentile(load_intervals, 99),
                                       "max": max(load_intervals, default=None)}},
        "queries": {kind: summary_ms(v) for kind, v in stats.latency.items()},
        "query_errors": dict(stats.query_errors),
        "node": {"pid": pid, "rss_kb_start": rss0, "rss_kb_end": rss_end, "cpu_s_during_load_and_drain":
                 round(cpu_end - cpu0, 1), "exited_with": node_died, "block_poll_errors": blocks.errors},
        "samples": samples,
        "inclusion": inclusion,
        "attacks": stats.attacks,
    }
    out["goals"] = verdicts(args, samples, load_intervals, idle_intervals, inclusion, stats)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    ap.add_argument("--tps", type=float, default=50.0, help="signed transfers per second (default 50)")
    ap.add_argument("--accounts", type=int, default=100, help="load accounts funded from the faucet (default 100)")
    ap.add_argument("--workers", type=int, default=4, help="submitting threads, each owning a share of the accounts")
    ap.add_argument("--qps", type=float, default=20.0, help="/status and /account queries per second (default 20)")
    ap.add_argument("--read-qps", type=float, default=5.0, help="POST /actor/read per second (default 5)")
    ap.add_argument("--block-ms", type=int, default=1000, help="the node's block time, the interval target")
    ap.add_argument("--sample-s", type=float, default=15.0, help="sampling period (default 15)")
    ap.add_argument("--idle-s", type=float, default=30.0, help="idle baseline window before the load (default 30)")
    ap.add_argument("--drain-s", type=float, default=120.0, help="longest wait for the accepted txs to be included")
    ap.add_argument("--query-p99-ms", type=float, default=100.0, help="query p99 goal per kind (default 100)")
    ap.add_argument("--attack", action="append", choices=ATTACKS, help="add an attack (repeatable)")
    ap.add_argument("--gapped-senders", type=int, default=4, help="senders of the gapped-nonces attack")
    ap.add_argument("--slow-connections", type=int, default=20, help="connections of the slow-headers attack")
    args = ap.parse_args()
    if args.duration <= 0 or args.tps <= 0 or args.accounts < 1 or args.sample_s <= 0 or args.idle_s < 0:
        ap.error("--duration, --tps, --sample-s must be > 0, --accounts ≥ 1, --idle-s ≥ 0")
    with tempfile.TemporaryDirectory(prefix="cowboy-soak-") as d:
        out = run(args, Path(d) / "home")
    print(json.dumps(out, indent=2))
    return 1 if out["node"]["exited_with"] is not None else 0


if __name__ == "__main__":
    sys.exit(main())
