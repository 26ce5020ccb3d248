"""Block cadence with and without slow subscribers, in one run against one real node process.

A fresh single-validator node (``cowboy-node init`` + ``run``, loopback, ``--block-ms``) produces empty blocks.
The benchmark measures the interval between consecutive block timestamps (set by the proposer when it builds the
block, so they show production cadence) over ``--blocks`` blocks with one fast subscriber only (the baseline),
then over the same number of blocks with ``--slow`` more subscribers connected that are slow consumers: half are
stalled (a raw socket with a 4 KiB receive buffer that sends the upgrade and reads nothing), half read one message
per second; every slow one subscribes ``from`` as far back as the node allows (``--replay``), so the node replays as
much as it can to them. The node's limits are set small for the run (``--buffer-bytes``, ``--send-timeout-ms``) so
slow consumers are found within it. The fast subscriber must receive every height once in
both phases. Prints one JSON object: both phases' interval percentiles, their ratio and their late blocks
(interval above 1.5x the block time), the slow subscribers the node told and dropped (``{"type": "dropped"}``
received) or closed, and what the fast one received.

The node runs under ``bench/node_loop_probe.py``, so each phase also reports the node's event loop: its lag (a
5 ms ticker), its stalls over 50 ms with the stack the loop was in and how its thread spent the stall (on a CPU,
waiting for one, or blocked in a system call), GC pauses, the node's CPU use, and for each late block the cause of
the longest stall in its interval (``late_block_causes``). ``--runs N`` repeats the whole measurement on N fresh
nodes; ``summary`` lists each figure per run, baseline beside loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench.bench_harness import summary_ms

BIN = Path(sys.executable).parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str) -> list[str]:
    exe = BIN / "cowboy-node"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main", *args]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


class Fast:
    """A subscriber that reads everything and records the heights."""

    def __init__(self) -> None:
        self.heights: list[int] = []

    async def run(self, session: aiohttp.ClientSession, ws_url: str, start: int) -> None:
        async with session.ws_connect(f"{ws_url}/subscribe?topic=blocks&from={start}", max_msg_size=0) as ws:
            async for msg in ws:
                doc = json.loads(msg.data)
                if doc["type"] == "block":
                    self.heights.append(doc["height"])


class Stalled:
    """A consumer that stops reading: a raw socket (4 KiB receive buffer) that sends the upgrade request and reads
    nothing until the measurement is over; then it reads what the node left: was it told, and closed?"""

    def __init__(self) -> None:
        self.told = False
        self.closed = False
        self.received = 0
        self.stop_ignoring = asyncio.Event()

    async def run(self, host: str, port: int, path: str) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
        writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        await writer.drain()
        await self.stop_ignoring.wait()
        data = b""
        try:
            while True:
                chunk = await asyncio.wait_for(reader.read(65536), 5)
                if not chunk:
                    self.closed = True
                    break
                data += chunk
        except (TimeoutError, OSError):
            self.closed = self.closed or reader.at_eof()
        self.received = data.count(b'{"type":"block"')
        self.told = b'"type": "dropped"' in data
        writer.close()


class Slow:
    """A slow consumer reading one message every ``pause`` seconds."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.told = False
        self.closed = False
        self.received = 0

    async def run(self, session: aiohttp.ClientSession, url: str) -> None:
        try:
            # compress=0: no permessage-deflate, so the bytes the node buffers are the messages' own size
            async with session.ws_connect(url, max_msg_size=0, compress=0) as ws:
                while True:
                    msg = await ws.receive()
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        self.closed = True
                        return
                    self.received += 1
                    if json.loads(msg.data)["type"] == "dropped":
                        self.told = True
                    await asyncio.sleep(self.pause)
        except (aiohttp.ClientError, OSError):
            self.closed = True


def _stamps(url: str, first: int, last: int) -> list[float]:
    """Block timestamps (s, the proposer's wall clock when it built each block)."""
    return [_get(f"{url}/block/{h}")["timestamp_ms"] / 1000 for h in range(first, last + 1)]


def _intervals(stamps: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(stamps)]


def _cause(stall: dict[str, Any] | None, gcs: list[list[float]]) -> str:
    """What held the node's loop while a late block waited: the longest stall in its interval, by its stack and
    by how the loop thread spent it (on a CPU, waiting for one, or blocked in a system call)."""
    if gcs:
        return "garbage_collection"
    if stall is None:
        return "no_stall_seen"
    stack = " ".join(stall["stack"])
    if "_fsync" in stack or "write_batch" in stack:
        return "disk_sync_on_the_loop (consensus journal / block store)"
    if stall.get("runqueue_ms", 0) > stall["ms"] / 2:
        return "waiting_for_a_cpu (other processes)"
    if "subscriptions.py" in stack or "web_ws.py" in stack or "_websocket" in stack:
        return "subscriptions"
    return "other: " + (stall["stack"][-1] if stall["stack"] else "?")


def late_block_causes(stamps: list[float], late_s: float, probe: dict[str, Any]) -> dict[str, int]:
    """Each late block (interval above ``late_s``) counted under the cause of the longest loop stall in it."""
    out: dict[str, int] = {}
    for a, b in pairwise(stamps):
        if b - a <= late_s:
            continue
        inside = [x for x in probe["stalls"] if a - 0.05 <= x["t"] <= b]
        gcs = [g for g in probe.get("gc", []) if a <= g[0] <= b and g[1] >= 50]
        cause = _cause(max(inside, key=lambda x: x["ms"]) if inside else None, gcs)
        out[cause] = out.get(cause, 0) + 1
    return out


async def _wait_height(url: str, height: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if await asyncio.to_thread(lambda: _get(url + "/height")["height"]) >= height:
                return
        except TimeoutError:  # a machine loaded by others can starve one poll; the deadline still bounds the wait
            POLL_TIMEOUTS.append(time.time())
        await asyncio.sleep(0.05)
    raise TimeoutError(f"height {height} not reached")


POLL_TIMEOUTS: list[float] = []
"""Wall times of ``GET /height`` polls that got no answer within 10 s (reported: a sign of a starved machine)."""


def _small_socket(addr_info: Any) -> socket.socket:
    """A client socket with a small receive buffer: a slow consumer's backlog reaches the node's side soon."""
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


async def measure(url: str, blocks: int, slow_n: int, block_ms: int, warmup: int,
                  replay: bool, ramp_s: float, windows: dict[str, list[float]],
                  stamps: dict[str, list[float]]) -> dict[str, Any]:
    """Both phases against the node at ``url``; ``windows`` gets each phase's wall-clock span and ``stamps``
    its block timestamps (for the probe's figures)."""
    ws_url = url.replace("http://", "ws://")
    timeout = blocks * block_ms / 1000 * 10 + 60
    small = aiohttp.TCPConnector(limit=0, socket_factory=_small_socket)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session, \
            aiohttp.ClientSession(connector=small) as slow_session:
        await _wait_height(url, warmup, timeout + warmup * block_ms / 1000 * 10)
        start = _get(url + "/height")["height"] + 1
        fast = Fast()
        fast_task = asyncio.create_task(fast.run(session, ws_url, start))
        windows["baseline"] = [time.time(), 0.0]
        await _wait_height(url, start + blocks, timeout)
        base_last = _get(url + "/height")["height"]
        windows["baseline"][1] = time.time()
        windows["with_slow"] = [windows["baseline"][1], 0.0]
        back = max(1, base_last - 900) if replay else base_last + 1  # default subscription_max_lag_blocks: 1000
        path = f"/subscribe?topic=blocks&from={back}"
        stalled = [Stalled() for _ in range(slow_n // 2)]
        slow = [Slow(1.0) for _ in range(slow_n - len(stalled))]
        parsed = urllib.parse.urlsplit(url)
        tasks = []
        for i, (a, b) in enumerate(itertools.zip_longest(stalled, slow)):
            if a is not None:
                tasks.append(asyncio.create_task(a.run(parsed.hostname or "", parsed.port or 80, path)))
            if b is not None:
                tasks.append(asyncio.create_task(b.run(slow_session, ws_url + path)))
            if ramp_s:
                await asyncio.sleep(ramp_s / max(1, len(slow)) if i else 0)
        slow_first = base_last + 1
        await _wait_height(url, slow_first + blocks, timeout)
        slow_last = _get(url + "/height")["height"]
        windows["with_slow"][1] = time.time()
        for x in stalled:  # the non-readers now read what the node left them: was each told, and closed?
            x.stop_ignoring.set()
        await asyncio.wait(tasks, timeout=10)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        expect = list(range(start, slow_last + 1))
        fast_ok = fast.heights[:len(expect)] == expect
        fast_task.cancel()
        await asyncio.gather(fast_task, return_exceptions=True)
    stamps["baseline"] = _stamps(url, start, base_last)
    stamps["with_slow"] = _stamps(url, slow_first, slow_last)
    base, loaded = _intervals(stamps["baseline"]), _intervals(stamps["with_slow"])
    b, s = summary_ms(base), summary_ms(loaded)
    late = 1.5 * block_ms / 1000
    b["late_blocks"] = sum(x > late for x in base)
    s["late_blocks"] = sum(x > late for x in loaded)
    return {
        "baseline_one_fast_subscriber": {"heights": [start, base_last], "interval": b},
        "with_slow_subscribers": {"heights": [slow_first, slow_last], "interval": s, "slow_subscribers": slow_n,
                                  "stalled": {"count": len(stalled), "told_dropped": sum(x.told for x in stalled),
                                              "closed_by_node": sum(x.closed for x in stalled),
                                              "blocks_received": sum(x.received for x in stalled)},
                                  "reading_1_per_s": {"count": len(slow), "told_dropped": sum(x.told for x in slow),
                                                      "closed_by_node": sum(x.closed for x in slow),
                                                      "blocks_received": sum(x.received for x in slow)}},
        "ratio_p50": round(s["p50_ms"] / b["p50_ms"], 3) if b["p50_ms"] else None,
        "ratio_p99": round(s["p99_ms"] / b["p99_ms"], 3) if b["p99_ms"] else None,
        "fast_subscriber_every_height_once": fast_ok,
    }


def _lag(probe: dict[str, Any], span: list[float]) -> dict[str, Any]:
    """The node loop's lag (how late its 5 ms ticker ran) and its stalls within ``span`` (wall clock)."""
    lo, hi = span
    lags = [lag / 1000 for t, lag in probe["ticks"] if lo <= t <= hi]
    stalls = [x for x in probe["stalls"] if lo <= x["t"] <= hi]
    gcs = [x for x in probe.get("gc", []) if lo <= x[0] <= hi]
    cpu = [x for x in probe.get("cpu", []) if lo <= x[0] <= hi]
    span = cpu[-1][0] - cpu[0][0] if len(cpu) > 1 else 0.0
    return {"lag": summary_ms(lags), "stalls_over_50ms": len(stalls),
            "node_cpu_cores": round((cpu[-1][1] - cpu[0][1]) / span, 3) if span else None,
            "loop_thread_cpu_cores": round((cpu[-1][2] - cpu[0][2]) / span, 3) if span else None,
            "stall_ms_on_cpu": round(sum(x.get("cpu_ms", 0) for x in stalls), 1),
            "stall_ms_waiting_for_a_cpu": round(sum(x.get("runqueue_ms", 0) for x in stalls), 1),
            "gc_over_10ms": {"count": len(gcs), "max_ms": max((x[1] for x in gcs), default=0.0)},
            "stalls": [{"ms": x["ms"], "cpu_ms": x.get("cpu_ms"), "runqueue_ms": x.get("runqueue_ms"),
                        "where": x["stack"][-3:]} for x in sorted(stalls, key=lambda x: -x["ms"])]}


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    """One fresh node, both phases; the node's loop probe's figures per phase."""
    home = Path(tempfile.mkdtemp(prefix="cowboy-bench-subs-"))
    rpc = _port()
    url = f"http://127.0.0.1:{rpc}"
    subprocess.run(_cli("init", "--home", str(home), "--chain-id", "cowboy-bench-1", "--rpc-addr",
                        f"127.0.0.1:{rpc}", "--quic-addr", f"127.0.0.1:{_port()}", "--metrics-addr",
                        f"127.0.0.1:{_port()}", "--block-time-ms", str(args.block_ms)),
                   check=True, capture_output=True, timeout=120)
    cfg = home / "config.toml"  # every subscriber is on loopback: one source address
    text = re.sub(r"max_connections_per_ip = \d+", "max_connections_per_ip = 4096", cfg.read_text())
    text = re.sub(r"subscription_buffer_bytes = \d+", f"subscription_buffer_bytes = {args.buffer_bytes}", text)
    text = re.sub(r"subscription_send_timeout_ms = \d+", f"subscription_send_timeout_ms = {args.send_timeout_ms}",
                  text)
    cfg.write_text(text)
    probe_file = home / "probe.json"
    log = open(home / "node.log", "wb")  # noqa: SIM115 - closed below
    node = subprocess.Popen([sys.executable, str(Path(__file__).parent / "node_loop_probe.py"), str(probe_file),
                             "run", "--home", str(home)], stdout=log, stderr=subprocess.STDOUT)
    windows: dict[str, list[float]] = {}
    stamps: dict[str, list[float]] = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(url + "/height")
                break
            except OSError:
                if node.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("node did not start") from None
                time.sleep(0.1)
        out = asyncio.run(measure(url, args.blocks, args.slow, args.block_ms, args.warmup, args.replay,
                                  args.ramp_s, windows, stamps))
        out["with_slow_subscribers"]["node_logged_drops"] = (home / "node.log").read_text(
            errors="replace").count("subscriber dropped")
    finally:
        node.terminate()
        try:
            node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait(timeout=10)
        log.close()
        probe = json.loads(probe_file.read_text()) if probe_file.exists() else {"ticks": [], "stalls": []}
        if args.keep_home:
            print(f"node home kept: {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
    out["node_home"] = str(home) if args.keep_home else None
    out["node_gc"] = {"stats": probe.get("gc_stats"), "objects_at_exit": probe.get("objects_at_exit")}
    late = 1.5 * args.block_ms / 1000
    for phase, key in (("baseline", "baseline_one_fast_subscriber"), ("with_slow", "with_slow_subscribers")):
        out[key]["event_loop"] = _lag(probe, windows[phase])
        out[key]["late_block_causes"] = late_block_causes(stamps[phase], late, probe)
    return out


def _sum_counts(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block-ms", type=int, default=250)
    ap.add_argument("--blocks", type=int, default=60, help="blocks measured per phase")
    ap.add_argument("--slow", type=int, default=200, help="slow subscribers of the second phase")
    ap.add_argument("--runs", type=int, default=1, help="fresh nodes measured one after the other")
    ap.add_argument("--replay", action=argparse.BooleanOptionalAction, default=True,
                    help="slow subscribers start from as far back as allowed (default) or at the next block")
    ap.add_argument("--ramp-s", type=float, default=0.0,
                    help="spread the slow subscribers' connections over this many seconds (0: all at once)")
    ap.add_argument("--warmup", type=int, default=100,
                    help="height to reach first (what the slow subscribers are replayed)")
    ap.add_argument("--buffer-bytes", type=int, default=16384, help="[rpc] subscription_buffer_bytes")
    ap.add_argument("--send-timeout-ms", type=int, default=2000, help="[rpc] subscription_send_timeout_ms")
    ap.add_argument("--keep-home", action="store_true",
                    help="keep each node's home (its log, probe.json and consensus-timeline.json) and print its path")
    args = ap.parse_args()
    runs = [run_once(args) for _ in range(args.runs)]

    def each(phase: str, *keys: str) -> list[Any]:
        got = []
        for r in runs:
            v: Any = r[phase]
            for k in keys:
                v = v[k]
            got.append(v)
        return got

    base, slow = "baseline_one_fast_subscriber", "with_slow_subscribers"
    summary = {
        "late_blocks": {"baseline": each(base, "interval", "late_blocks"), "with_slow": each(slow, "interval",
                                                                                           "late_blocks")},
        "interval_p99_ms": {"baseline": each(base, "interval", "p99_ms"), "with_slow": each(slow, "interval",
                                                                                          "p99_ms")},
        "interval_max_ms": {"baseline": each(base, "interval", "max_ms"), "with_slow": each(slow, "interval",
                                                                                          "max_ms")},
        "loop_lag_p99_ms": {"baseline": each(base, "event_loop", "lag", "p99_ms"),
                            "with_slow": each(slow, "event_loop", "lag", "p99_ms")},
        "loop_lag_max_ms": {"baseline": each(base, "event_loop", "lag", "max_ms"),
                            "with_slow": each(slow, "event_loop", "lag", "max_ms")},
        "node_cpu_cores": {"baseline": each(base, "event_loop", "node_cpu_cores"),
                           "with_slow": each(slow, "event_loop", "node_cpu_cores")},
        "late_block_causes": {"baseline": _sum_counts(each(base, "late_block_causes")),
                              "with_slow": _sum_counts(each(slow, "late_block_causes"))},
    }
    ok = all(r["fast_subscriber_every_height_once"] for r in runs)
    summary["height_polls_unanswered_10s"] = len(POLL_TIMEOUTS)
    doc = {"benchmark": "subscriptions", "params": vars(args), "summary": summary, "runs": runs,
           "goals": {"cadence_unchanged_p50_within_10pct": all(r["ratio_p50"] is not None and r["ratio_p50"] <= 1.1
                                                               for r in runs),
                     "no_late_block_caused_by_subscriptions": "subscriptions" not in
                     summary["late_block_causes"]["with_slow"],
                     "fast_subscriber_every_height_once": ok}}
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
