"""The ``--validators N`` segment of ``bench/chain_throughput.py``: transfers/s through a real N-validator network.

``cowboy-node testnet`` homes on loopback (real ``cowboy-node run`` processes, no proxies), with ``--net-senders``
bench accounts added to the genesis balances of every home before the first start (the data directories are
still empty, so every validator derives the same genesis). Each sender's transfers are POSTed to one validator
(sender ``s`` → validator ``s mod N``) in nonce order by ``--net-concurrency`` client tasks; validators gossip
them to each other. Measured:

- transfers/s: transfers included ÷ (wall time of the first POST → the first poll that saw the block holding the
  last one), read from validator 0's finalized blocks;
- proposal→finalization: for every block of the window and every validator, (first time that validator's
  ``/status`` showed the height, polled every ``--poll-ms``) − the block's ``timestamp_ms`` (the proposer's
  clock, the same host), p50/p99 — the definition of ``bench/consensus.py``.

- what the peer layer dropped, what transaction gossip did, nullified views, refused proposals and block execution
  time, summed over the validators' ``/metrics`` at the end (``cowboy_p2p_messages_dropped*``,
  ``cowboy_tx_gossip_total``, ``cowboy_consensus_nullifications_total``, ``..._invalid_blocks_total``,
  ``cowboy_block_execution_duration_seconds_{sum,count}``; absent on code without them).

- where proposal→finalization time goes (code with ``/status`` ``consensus.timeline``): per stage (build, body
  arrival, execution start/end, notarize journaled/sent, notarized, finalize sent, finalized, commit start/end),
  the p50 over views of ms after the leader started building, for the leader and the median follower; block
  executions by kind summed over the validators (a block executed once per validator shows ``build`` + ``verify``
  = 4 × blocks and no ``commit_unverified``);
- CPU: each validator's utime + stime over the run (``/proc``), its signature-pool worker processes included
  (``--net-workers``; also reported apart), CPU-seconds per second, and CPU-µs per included transfer per validator
  (everything the process did: consensus, RPC, gossip, admission, execution, commit, and answering this bench's
  ``/status`` polls).

Loads (``--loads``): ``idle`` (no transfers, ``--idle-s`` of blocks), a paced rate (e.g. ``200``: that many
transfers/s offered for ``--paced-s``), ``max`` (``--net-txs`` as fast as the client lanes go). ``net_pyspy`` (a
(py-spy, directory, seconds) triple, programmatic only) samples every validator during the load.

Bounded: every wait has a deadline (``--net-timeout``); the validators are stopped (SIGTERM, then SIGKILL) in a
``finally``.

Run on its own (``python -m bench.chain_throughput_network --base DIR``) it is an A/B of the validator code: the
same network run, alternately with the validators importing ``cowboy_node`` from ``DIR`` (a ``git worktree`` of the
baseline commit, via ``PYTHONPATH``; the client side stays this checkout's) and from this checkout, ``--rounds``
times per load, interleaved (the machine is shared: load average before each run is reported), then one
single-validator run of this checkout through the same harness; JSON with the medians and the ratios per load.
With ``--base`` this checkout and ``--p2p-transport tcp`` it is an A/B of the validators' link alone (QUIC
baseline, ``[p2p] transport = "tcp"``; ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import aiohttp

from bench.bench_harness import percentile, summary_ms
from bench.chain_throughput import baseline_recover
from bench.consensus import Conn, Poller, stop_all
from cowboy_node.p2p.peer_link import TRANSPORTS
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.e2e.netproc import Testnet

SINK = bytes(19) + b"\x43"


def _set_workers(net: Testnet, workers: int) -> None:
    for v in net.validators:
        path = v.home / "config.toml"
        text = path.read_text()
        assert "# admission_workers = 0" in text, "config.toml template changed"
        path.write_text(text.replace("# admission_workers = 0", f"admission_workers = {workers}"))


def _sign(chain_id: str, n_txs: int, n_senders: int) -> list[list[bytes]]:
    """Per sender, its transfers in nonce order."""
    keys = [(i + 50_000).to_bytes(32, "big") for i in range(n_senders)]
    per = (n_txs + n_senders - 1) // n_senders
    out: list[list[bytes]] = [[] for _ in keys]
    count = 0
    for j in range(per):
        for s, k in enumerate(keys):
            if count == n_txs:
                break
            out[s].append(Transaction(
                chain_id=chain_id, nonce=j, sender=private_key_to_address(k), instruction=Transfer(to=SINK, amount=1),
                cycles_limit=20_000, cells_limit=1_000, max_fee_per_cycle=200_000, max_priority_fee_per_cycle=10,
                max_fee_per_cell=200_000, max_priority_fee_per_cell=10).signed(k).to_bytes())
            count += 1
    return out


async def _submit(urls: list[str], per_sender: list[list[bytes]], concurrency: int,
                  deadline: float, rate: float = 0.0, batch: int = 1) -> dict[str, int]:
    """POST every transfer (sender ``s`` to ``urls[s % N]``, in nonce order); counts of answers by code.

    ``rate`` > 0 paces the offered load: the k-th transfer (in lane-interleaved order) is not sent before
    k / ``rate`` seconds after the start (a lane that falls behind sends as fast as it can). ``batch`` > 1: a
    lane sends ``POST /submit/batch`` of up to ``batch`` transfers per validator (a sender's transfers stay in
    nonce order: one sender, one validator, one lane)."""
    codes: dict[str, int] = {}
    lanes: list[list[int]] = [list(range(i, len(per_sender), concurrency)) for i in range(concurrency)]
    conn = aiohttp.TCPConnector(limit=concurrency)
    start = time.monotonic()
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=30)) as session:
        def count(code: str) -> None:
            codes[code] = codes.get(code, 0) + 1

        async def post_batch(url: str, txs: list[bytes]) -> None:
            async with session.post(url + "/submit/batch", data=b"".join(txs),
                                    headers={"Content-Type": "application/octet-stream"}) as r:
                body = await r.json()
                if r.status != 200:
                    for _ in txs:
                        count(str(body.get("code", r.status)))
                    return
                for item in body["results"]:
                    count("accepted" if "tx_hash" in item else str(item["error"]["code"]))

        async def lane(li: int, senders: list[int]) -> None:
            depth = max((len(per_sender[s]) for s in senders), default=0)
            k = 0
            pending: dict[str, list[bytes]] = {}
            for j in range(depth):
                for s in senders:
                    if j >= len(per_sender[s]) or time.monotonic() > deadline:
                        continue
                    if rate > 0:
                        due = start + (k * concurrency + li) / rate
                        k += 1
                        if due > time.monotonic():
                            await asyncio.sleep(due - time.monotonic())
                    url = urls[s % len(urls)]
                    if batch > 1:
                        queue = pending.setdefault(url, [])
                        queue.append(per_sender[s][j])
                        if len(queue) >= batch:
                            pending[url] = []
                            await post_batch(url, queue)
                        continue
                    async with session.post(url + "/submit", data=per_sender[s][j],
                                            headers={"Content-Type": "application/octet-stream"}) as r:
                        body = await r.json()
                        count("accepted" if r.status == 200 else str(body.get("code", r.status)))
            for url, queue in pending.items():
                if queue:
                    await post_batch(url, queue)

        await asyncio.gather(*(lane(i, s) for i, s in enumerate(lanes) if s))
    return codes


_METRIC = re.compile(r"^(cowboy_p2p_messages_dropped(?:_by_channel)?_total|cowboy_tx_gossip_total"
                     r"|cowboy_consensus_nullifications_total|cowboy_consensus_invalid_blocks_total"
                     r"|cowboy_block_execution_duration_seconds_(?:sum|count))"
                     r"(?:\{([^}]*)\})? ([0-9.e+]+)$", re.M)


class BlockSubscriber:
    """Follows one validator's ``GET /subscribe?topic=blocks`` (a WebSocket) in its own thread: the wall time each
    height reached this process, as :class:`bench.consensus.Poller`'s ``height_seen`` but pushed at commit instead
    of polled, so the validator does not serve 50 ``/status`` a second meanwhile (``--watch subscribe``; the default
    keeps polling, whose cost is part of the validator's CPU figure)."""

    def __init__(self, rpc: str) -> None:
        self.rpc = rpc
        self.height_seen: dict[int, float] = {}
        self.errors = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._follow()), daemon=True)

    def start(self) -> None:
        """Subscribe; returns once the node acknowledged the subscription (or after 10 s)."""
        self._thread.start()
        self._ready.wait(10)

    async def _follow(self) -> None:
        try:
            async with aiohttp.ClientSession() as session, \
                    session.ws_connect(f"http://{self.rpc}/subscribe?topic=blocks", heartbeat=None) as ws:
                while not self._stop.is_set():
                    try:
                        msg = await ws.receive(timeout=0.2)
                    except TimeoutError:
                        continue
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        break
                    doc = json.loads(msg.data)
                    if doc.get("type") == "subscribed":
                        self._ready.set()
                    elif doc.get("type") == "block":
                        self.height_seen.setdefault(int(doc["height"]), time.time())
        except (OSError, aiohttp.ClientError, ValueError):
            self.errors += 1
        finally:
            self._ready.set()

    def join(self) -> None:
        """Unsubscribe and wait for the thread (at most 5 s)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)


def _scrape(net: Testnet) -> dict[str, float]:
    """Peer-layer drops and tx gossip counters summed over the validators (non-zero ones)."""
    out: dict[str, float] = {}
    for v in net.validators:
        addr = tomllib.loads((v.home / "config.toml").read_text())["metrics"]["addr"]
        try:
            conn = Conn(addr)
            status, body = conn.get("/metrics")
            conn.close()
        except (OSError, http.client.HTTPException):
            continue
        if status != 200:
            continue
        for name, labels, value in _METRIC.findall(body.decode()):
            if float(value):
                key = f"{name}{{{labels}}}" if labels else name
                out[key] = out.get(key, 0.0) + float(value)
    return dict(sorted(out.items()))


_PATH_STAGES = ("seen", "body", "exec_start", "exec_end", "journal_notarize", "sent_notarize", "notarized",
                "sent_finalize", "finalized", "commit_start", "committed")


def _executions(net: Testnet) -> dict[str, int]:
    """The validators' ``/status`` ``consensus.executions`` (block executions by kind), summed (absent on code
    without it)."""
    executions: dict[str, int] = {}
    for v in net.validators:
        try:
            conn = Conn(v.rpc_url.removeprefix("http://"))
            st = conn.json("/status")
            conn.close()
        except (OSError, RuntimeError, ValueError, http.client.HTTPException):
            continue
        for k, n in (st.get("consensus", {}).get("executions") or {}).items():
            executions[k] = executions.get(k, 0) + n
    return dict(sorted(executions.items()))


def _timelines(net: Testnet, executions: dict[str, int]) -> dict[str, Any]:
    """The critical path of the views every validator recorded (``data/consensus-timeline.json``, written at
    shutdown; absent on code without it): per stage, the p50 over views of ms after the leader started building,
    for the leader (``L.``) and the median follower (``F.``). The validators share the host's monotonic clock, so
    their records line up."""
    views: dict[int, dict[int, dict[str, Any]]] = {}
    for i, v in enumerate(net.validators):
        found = list(v.home.rglob("consensus-timeline.json"))
        if not found:
            continue
        try:
            records = json.loads(found[0].read_text())
        except (OSError, ValueError):
            continue
        for rec in records:
            views.setdefault(rec["view"], {})[i] = rec
    if not views:
        return {"executions": executions} if executions else {}
    rows: dict[str, list[float]] = {}
    used = 0
    for by in views.values():
        leaders = [i for i, rec in by.items() if rec["leader"]]
        if len(by) < len(net.validators) or len(leaders) != 1 or "seen" not in by[leaders[0]]["ms"]:
            continue
        used += 1
        lt = by[leaders[0]]["ms"]
        t0 = lt["seen"]
        for stage in _PATH_STAGES:
            if stage in lt:
                rows.setdefault(f"L.{stage}", []).append(lt[stage] - t0)
            fol = [by[i]["ms"][stage] - t0 for i in by if i != leaders[0] and stage in by[i]["ms"]]
            if fol:
                rows.setdefault(f"F.{stage}", []).append(statistics.median(fol))
    path = {k: round(statistics.median(vs), 1) for k, vs in rows.items()}
    return {"executions": dict(sorted(executions.items())), "views": used, "critical_path_p50_ms": path}


def _proc_cpu(pid: int, tick: int) -> tuple[float, list[int]]:
    """utime + stime + cutime + cstime of ``pid`` (its waited-for children included) and its live children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return sum(int(f) for f in fields[11:15]) / tick, children


def _cpu_seconds(net: Testnet) -> list[tuple[float, float]]:
    """Per validator, (CPU seconds of its own process, CPU seconds of its descendants: signature-pool workers,
    ``[mempool] admission_workers``) so far, from ``/proc``; (0, 0) when unreadable. A worker that exits is
    counted in its parent's cutime once waited for."""
    tick = os.sysconf("SC_CLK_TCK")
    out: list[tuple[float, float]] = []
    for v in net.validators:
        try:
            own, todo = _proc_cpu(v.proc.pid, tick) if v.proc else (0.0, [])
            desc = 0.0
            while todo:
                pid = todo.pop()
                with contextlib.suppress(OSError, IndexError, ValueError):
                    cpu, more = _proc_cpu(pid, tick)
                    desc += cpu
                    todo += more
            out.append((own, desc))
        except (OSError, IndexError, ValueError):
            out.append((0.0, 0.0))
    return out


def _warm_workers(urls: list[str]) -> None:
    """Start every validator's signature-pool workers before the measured window: they start on the first
    submission and spend about a CPU-second importing the node's modules, which is not a per-transfer cost. One
    malformed submission each goes through the pool and is refused (``malformed``, nothing pooled)."""
    for url in urls:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request("POST", "/submit", body=b"\x00\x00\x00\x01\xff",
                         headers={"Content-Type": "application/octet-stream"})
            conn.getresponse().read()
        finally:
            conn.close()


def _start_pyspy(net: Testnet, args: argparse.Namespace) -> list[subprocess.Popen[bytes]]:
    """With ``net_pyspy`` = (py-spy binary, output directory, seconds): sample every validator (all threads,
    idle time excluded) for that long from the start of the load; one speedscope file per validator."""
    spec = getattr(args, "net_pyspy", None)
    if not spec:
        return []
    binary, outdir, seconds = spec
    Path(outdir).mkdir(parents=True, exist_ok=True)
    spies = []
    for i, v in enumerate(net.validators):
        if v.proc is None:
            continue
        spies.append(subprocess.Popen([binary, "record", "--pid", str(v.proc.pid), "--duration", str(seconds),
                                       "--rate", "200", "--format", "raw", "--threads", "--output",
                                       str(Path(outdir) / f"v{i}.txt")], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    return spies


def network_run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the network, drive it, stop it; the segment's report."""
    rate = float(getattr(args, "net_rate", 0.0))
    idle_s = float(getattr(args, "net_idle_s", 20.0))
    rep: dict[str, Any] = {"validators": args.validators, "block_time_ms": args.net_block_ms,
                           "admission_workers": args.net_workers, "txs": args.net_txs, "senders": args.net_senders,
                           "offered_rate": rate or None}
    with tempfile.TemporaryDirectory(prefix="throughput-net-") as tmp:
        if args.net_keep:  # the homes (node.log) outlive the run, for a look at what the validators did
            tmp = tempfile.mkdtemp(prefix="throughput-net-kept-")
            rep["homes"] = tmp
        net = Testnet.create(Path(tmp), n=args.validators, block_time_ms=args.net_block_ms, proxied=False)
        pollers: list[Poller | BlockSubscriber] = []
        executions: dict[str, int] = {}
        try:
            keys = [(i + 50_000).to_bytes(32, "big") for i in range(args.net_senders)]
            net.fund_in_genesis([private_key_to_address(k) for k in keys])
            if args.net_workers:
                _set_workers(net, args.net_workers)
            if getattr(args, "net_p2p_transport", "quic") != "quic":  # a baseline without the key runs QUIC
                net.set_p2p_transport(args.net_p2p_transport)
            chain_id = json.loads((net.validators[0].home / "genesis.json").read_text())["chain_id"]
            per_sender = _sign(chain_id, args.net_txs, args.net_senders)
            net.start(timeout=60)
            net.wait_heights(2, 90)
            urls = [v.rpc_url for v in net.validators]
            pollers = ([Poller(u.removeprefix("http://"), args.poll_ms / 1000) for u in urls]
                       if getattr(args, "net_watch", "poll") == "poll"
                       else [BlockSubscriber(u.removeprefix("http://")) for u in urls])
            for p in pollers:
                p.start()
            conn0 = Conn(urls[0].removeprefix("http://"))
            start_height = int(conn0.json("/status")["height"])
            deadline = time.monotonic() + args.net_timeout
            if args.net_workers:
                _warm_workers(urls)
            spies = _start_pyspy(net, args)
            cpu0 = _cpu_seconds(net)
            t0 = time.time()
            if args.net_txs:
                codes = asyncio.run(_submit(urls, per_sender, args.net_concurrency, deadline, rate,
                                            getattr(args, "net_submit_batch", 1)))
            else:  # idle: no transfers, blocks of the window only
                codes = {}
                time.sleep(idle_s)
            submit_s = time.time() - t0
            accepted = codes.get("accepted", 0)
            included = 0
            h = start_height
            last_seen: float | None = None
            blocks: dict[int, dict[str, Any]] = {}
            first_pass = True
            while (first_pass or included < accepted) and time.monotonic() < deadline:
                first_pass = False
                top = int(conn0.json("/status")["height"])
                while h < top:
                    h += 1
                    b = conn0.json(f"/block/{h}")
                    blocks[h] = b
                    included += len(b.get("transactions", []))
                    last_seen = pollers[0].height_seen.get(h, time.time())
                time.sleep(0.05)
            for p in pollers:
                p.join()
            rep["answers"] = codes
            rep["included"] = included
            rep["complete"] = included >= accepted
            rep["submit_s"] = round(submit_s, 3)
            rep["submitted_per_s"] = accepted / submit_s if accepted else 0.0
            # Incomplete (deadline passed): what was included over the whole time waited, not up to the last block.
            end = last_seen if rep["complete"] and last_seen is not None else time.time()
            rep["wall_s"] = round(end - t0, 3)
            rep["transfers_per_s"] = included / (end - t0)
            fin = [seen - b["timestamp_ms"] / 1000
                   for p in pollers for hh, b in blocks.items() if (seen := p.height_seen.get(hh)) is not None]
            rep["proposal_to_finalization"] = summary_ms(fin)
            rep["proposal_to_finalization_p50_ms"] = None if not fin else round(1000 * (percentile(fin, 50) or 0), 1)
            rep["blocks"] = len(blocks)
            rep["max_txs_per_block"] = max((len(b.get("transactions", [])) for b in blocks.values()), default=0)
            rep["goal_5000_tps_met"] = rep.get("transfers_per_s", 0) >= 5_000
            rep["goal_p50_250ms_met"] = (rep["proposal_to_finalization_p50_ms"] or 1e9) <= 250
            for spy in spies:
                spy.wait(timeout=120)
            pairs = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(cpu0, _cpu_seconds(net), strict=True)]
            cpu = [own + workers for own, workers in pairs]
            rep["validator_cpu_s"] = [round(c, 2) for c in cpu]
            rep["validator_workers_cpu_s"] = [round(w, 2) for _, w in pairs]
            rep["cpu_s_per_s"] = round(sum(cpu) / max(end - t0, 1e-9), 2)
            if included:  # every validator admits (or receives), executes and commits every transfer
                rep["validator_cpu_us_per_transfer"] = round(1e6 * sum(cpu) / len(cpu) / included, 1)
            rep["counters"] = _scrape(net)
            executions.update(_executions(net))
        except (OSError, RuntimeError, AssertionError, http.client.HTTPException, aiohttp.ClientError) as e:
            rep["error"] = f"{type(e).__name__}: {e}"[:2000]
        finally:
            for p in pollers:
                p.join()
            notes = stop_all(net)
            if notes:
                rep["stop_notes"] = notes
            if "error" not in rep:
                rep["timeline"] = _timelines(net, executions)
    return rep


def _defaults(**kw: Any) -> argparse.Namespace:
    base = dict(validators=4, net_txs=6_000, net_senders=200, net_block_ms=500, net_workers=0, net_concurrency=32,
                net_timeout=180.0, poll_ms=20, net_keep=False, net_rate=0.0, net_idle_s=20.0, net_submit_batch=1,
                net_watch="poll", net_p2p_transport="quic")
    base.update(kw)
    return argparse.Namespace(**base)


def _with_pythonpath(path: str | None, args: argparse.Namespace, stress: int = 0) -> dict[str, Any]:
    """:func:`network_run` with the validators importing from ``path`` (None: this checkout), with ``stress``
    busy-loop processes running meanwhile (the load other engineers' work puts on this shared machine, made
    repeatable: the same for both configurations)."""
    saved = os.environ.get("PYTHONPATH")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(stress)]
    try:
        if path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = path
        load = os.getloadavg()
        rep = network_run(args)
        rep["load_average_before"] = [round(x, 2) for x in load]
        rep["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        return rep
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _load_kwargs(load: str, a: argparse.Namespace) -> dict[str, Any]:
    """``idle``: no transfers for ``--idle-s``; a number R: R transfers/s offered for ``--paced-s`` (at most
    ``--net-txs``); ``max``: ``--net-txs`` as fast as the client lanes go."""
    if load == "idle":
        return {"net_txs": 0, "net_idle_s": a.idle_s}
    if load == "max":
        return {}
    r = float(load)
    return {"net_rate": r, "net_txs": min(a.net_txs, int(r * a.paced_s))}


def _summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name in ("baseline", "new"):
        rs = [r for r in runs if r["config"] == name]
        summary[name] = {"transfers_per_s_median": _median(rs, "transfers_per_s"),
                         "p2f_p50_ms_median": _median(rs, "proposal_to_finalization_p50_ms"),
                         "p2f_p99_ms": [r.get("proposal_to_finalization", {}).get("p99_ms") for r in rs],
                         "cpu_s_per_s": [r.get("cpu_s_per_s") for r in rs],
                         "validator_cpu_us_per_transfer": [r.get("validator_cpu_us_per_transfer") for r in rs],
                         "complete": [r.get("complete") for r in rs]}
    b, n = summary["baseline"]["transfers_per_s_median"], summary["new"]["transfers_per_s_median"]
    summary["ratio_transfers_per_s_new_to_baseline"] = n / b if b and n else None
    bp, np_ = summary["baseline"]["p2f_p50_ms_median"], summary["new"]["p2f_p50_ms_median"]
    summary["ratio_p2f_p50_new_to_baseline"] = np_ / bp if bp and np_ else None
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description="A/B of the N-validator network throughput (baseline worktree vs this)")
    ap.add_argument("--base", required=True, help="checkout of the baseline commit (git worktree add DIR COMMIT)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--validators", type=int, default=4)
    ap.add_argument("--net-txs", type=int, default=6_000)
    ap.add_argument("--net-senders", type=int, default=200)
    ap.add_argument("--net-block-ms", type=int, default=500)
    ap.add_argument("--net-workers", type=int, default=0)
    ap.add_argument("--net-concurrency", type=int, default=32)
    ap.add_argument("--net-timeout", type=float, default=180.0)
    ap.add_argument("--loads", default="max",
                    help="comma-separated: idle, a paced rate in transfers/s (e.g. 200), max (default: max)")
    ap.add_argument("--idle-s", type=float, default=20.0, help="window of an idle load")
    ap.add_argument("--paced-s", type=float, default=20.0, help="duration of a paced load")
    ap.add_argument("--no-single", action="store_true", help="skip the single-validator run")
    ap.add_argument("--stress", type=int, default=0, help="busy-loop processes running during every run")
    ap.add_argument("--submit-batch", type=int, default=1,
                    help="the new configuration's client sends POST /submit/batch of this many (1: POST /submit); "
                         "with --base pointing at this checkout, an A/B of the submission path alone")
    ap.add_argument("--base-submit-batch", type=int, default=1, help="the same for the baseline configuration")
    ap.add_argument("--watch", choices=("subscribe", "poll"), default="poll",
                    help="how the bench learns each validator's heights: GET /status every 20 ms (default, as every "
                         "earlier run) or a blocks subscription (2 pairs at load 4-7 showed no CPU saving: each "
                         "pushed block is read and encoded with all its transaction hashes)")
    ap.add_argument("--base-watch", choices=("subscribe", "poll"), default=None,
                    help="the baseline configuration's --watch (default: the same; a baseline commit without "
                         "GET /subscribe needs poll)")
    ap.add_argument("--p2p-transport", choices=TRANSPORTS, default="quic",
                    help="the new configuration's [p2p] transport between the validators")
    ap.add_argument("--base-p2p-transport", choices=TRANSPORTS, default="quic",
                    help="the baseline configuration's (with --base pointing at this checkout: an A/B of the "
                         "transports alone)")
    a = ap.parse_args()
    kw = dict(validators=a.validators, net_txs=a.net_txs, net_senders=a.net_senders, net_block_ms=a.net_block_ms,
              net_workers=a.net_workers, net_concurrency=a.net_concurrency, net_timeout=a.net_timeout)
    base = str(Path(a.base).resolve())
    loads = [x.strip() for x in a.loads.split(",") if x.strip()]
    out: dict[str, Any] = {"base": base, "stress_processes": a.stress, "loads": loads, "runs": []}
    recover_before = baseline_recover()
    for r in range(a.rounds):
        for load in loads:
            order = [("baseline", base), ("new", None)] if r % 2 == 0 else [("new", None), ("baseline", base)]
            for name, path in order:
                batch = a.submit_batch if name == "new" else a.base_submit_batch
                watch = a.watch if name == "new" else (a.base_watch or a.watch)
                transport = a.p2p_transport if name == "new" else a.base_p2p_transport
                rep = _with_pythonpath(path, _defaults(**{**kw, **_load_kwargs(load, a), "net_submit_batch": batch,
                                                          "net_watch": watch, "net_p2p_transport": transport}),
                                       a.stress)
                rep["submit_batch"], rep["watch"], rep["p2p_transport"] = batch, watch, transport
                rep["config"] = name
                rep["load"] = load
                out["runs"].append(rep)
                print(json.dumps({k: rep.get(k) for k in ("config", "load", "submit_batch", "watch", "p2p_transport",
                                                           "transfers_per_s",
                                                           "complete", "proposal_to_finalization", "cpu_s_per_s",
                                                           "validator_cpu_us_per_transfer", "load_average_before")}),
                      flush=True)
    summary: dict[str, Any] = {load: _summarize([r for r in out["runs"] if r["load"] == load]) for load in loads}
    # The issue-33 ratio: CPU-µs per transfer per validator ÷ one secp256k1 recovery's µs, measured in this run
    # (before the networks and after them: the machine's speed moves during a run).
    recoveries = [recover_before, baseline_recover()]
    recovery_us = 1e6 / statistics.median(recoveries)
    summary["baseline_secp256k1_recoveries_per_s"] = [round(x) for x in recoveries]
    for load in loads:
        for name in ("baseline", "new"):
            cpu = [x for x in summary[load][name]["validator_cpu_us_per_transfer"] if x is not None]
            summary[load][name]["ratio_cpu_per_transfer_to_one_recovery"] = (
                round(statistics.median(cpu) / recovery_us, 2) if cpu else None)
    if not a.no_single:
        single = _with_pythonpath(None, _defaults(**{**kw, "validators": 1}), a.stress)
        out["single_validator_new"] = single
        summary["single_validator_transfers_per_s"] = single.get("transfers_per_s")
        n = summary.get("max", {}).get("new", {}).get("transfers_per_s_median")
        summary["ratio_network_to_single_validator"] = (n / single["transfers_per_s"]
                                                         if n and single.get("transfers_per_s") else None)
    out["summary"] = summary
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
