"""Sync catch-up benchmark (issue 30 §3; prints JSON).

In one run on this machine:
 - builds a finalized chain of ``--blocks`` full transfer blocks (``--txs`` transfers each, signed in worker
   processes; real threshold seeds and finalization certificates) on a LevelDB store (``--cache DIR`` keeps it for
   the next run: building 2,000 full blocks takes longer than catching up on them);
 - measures the **production** rate in this run: a validator verifying (signatures checked), executing and
   committing ``--sample`` of those blocks on a fresh store, as a follower does while the network produces them,
   capped by the network's cadence at ``--block-ms`` (no network produces faster than one block per block time);
 - starts ``--servers`` serving validators (sharing that store, in a child process: they stand for other
   machines, and their QUIC sending would otherwise share this process's core) and one empty validator, each with
   its own ``PeerNetwork`` over loopback QUIC and the node's own
   :class:`~cowboy_node.node.sync_resolver.Resolver`; the servers announce their height each second; the empty
   one catches up: **catch-up** blocks/s and MB/s, and the ratio catch-up ÷ production (goal ≥ 3);
 - the event loop's lag (a 5 ms ticker: how late it runs) before and during the catch-up, p50/p99/max: serving and
   applying must never hold the loop (where votes are handled) for more than a few ms (the catching-up validator's
   loop: its receiving, verifying and applying);
 - the refusals counted by the servers (``cowboy_consensus_requests_refused_total``): honest full-speed sync must
   never hit a budget.

Usage: python bench/sync_catchup.py [--blocks 2000] [--txs 1200] [--block-ms 500] [--servers 2] [--cache DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.sync_messages import CH_SYNC
from cowboy_node.node.sync_client import FetchLimits
from cowboy_node.node.sync_resolver import Resolver
from cowboy_node.observability.logging import configure_logging
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.types.block import Block
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import BOB, transfer
from tests.unit.node.sync_chain import build_chain, network, scheme


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2)


class _Lag:
    """How late a 5 ms ticker runs on the event loop (ms)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.phase = "idle"
        self.by_phase: dict[str, list[float]] = {}

    async def run(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            self.by_phase.setdefault(self.phase, []).append((time.perf_counter() - t - 0.005) * 1000)

    def summary(self, phase: str) -> dict[str, float]:
        xs = self.by_phase.get(phase, [])
        return {"p50_ms": _pct(xs, 0.5), "p99_ms": _pct(xs, 0.99), "max_ms": round(max(xs, default=0.0), 2),
                "samples": len(xs)}


def _refusals(metrics: NodeMetrics, server: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    family = metrics.consensus_requests_refused if server else metrics.consensus_sync_refused
    for metric in family.collect():
        for s in metric.samples:
            if s.name.endswith("_total") and s.value:
                key = f"{s.labels['kind']}.{s.labels['reason']}" if server else s.labels["reason"]
                out[key] = out.get(key, 0) + int(s.value)
    return out


class _Validators:
    """Some validators of the bench's network in this process: a Resolver and a PeerNetwork each."""

    def __init__(self, net_g: Any, here: dict[int, Chain], ports: dict[int, int], tmp: Path,
                 verify_workers: dict[int, int], on_applied: Any, fetch: FetchLimits | None = None) -> None:
        keys = [v.ed25519_public_key for v in net_g.genesis.validators]
        self.builder = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="block-builder")
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.metrics = {i: NodeMetrics() for i in here}
        self.nets: dict[int, PeerNetwork] = {}
        self.resolvers: dict[int, Resolver] = {}
        for i, chain in here.items():
            self.resolvers[i] = Resolver(chain, ConsensusRecords(chain.store), scheme(net_g, None),
                                         net=lambda i=i: self.nets.get(i), metrics=self.metrics[i],
                                         in_builder=self._in_builder, spawn=self._spawn, memory_body=lambda d: None,
                                         on_applied=on_applied, verify_workers=verify_workers.get(i, 0),
                                         fetch=fetch)
            peers = [PeerInfo(j, keys[j], "127.0.0.1", ports[j]) for j in ports if j != i]
            self.nets[i] = PeerNetwork(
                me=i, ed25519_seed=net_g.validator_keys[i].ed25519_seed, listen_host="127.0.0.1",
                listen_port=ports[i], peers=peers, validator_keys=keys, network_id=net_g.genesis.hash(),
                cert_path=tmp / f"v{i}.crt", key_path=tmp / f"v{i}.key",
                on_message=lambda s, c, p, i=i: self.resolvers[i].on_sync(s, p) if c == CH_SYNC else None,
                limits=PeerLimits())

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _in_builder(self, fn: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return fn()
        return await asyncio.get_running_loop().run_in_executor(self.builder, locked)

    async def start(self, peers: int) -> None:
        for n in self.nets.values():
            await n.start()
        deadline = time.monotonic() + 60
        while not all(len(n.connected()) == peers for n in self.nets.values()):
            if time.monotonic() > deadline:
                raise RuntimeError("peers did not connect")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for n in self.nets.values():
            await n.stop()
        for r in self.resolvers.values():
            r.close()
        self.builder.shutdown(wait=True)


async def serve(args: argparse.Namespace) -> None:
    """The serving validators, in a process of their own (``--serve``: they stand for other machines): announce
    their height every second until stdin closes, then print their refusals as JSON."""
    net_g = _network(args.txs)
    chain = Chain(LevelDBStore(args.serve), net_g.genesis)
    ports = {int(k): v for k, v in json.loads(args.ports).items()}
    servers = [i for i in ports if i != CLIENT]
    vals = _Validators(net_g, {i: chain for i in servers}, ports, Path(args.tmp), {}, lambda *a: None)
    await vals.start(len(ports) - 1)
    loop = asyncio.get_running_loop()
    done = loop.run_in_executor(None, sys.stdin.read)
    while not done.done():
        for i in servers:
            vals.nets[i].broadcast(CH_SYNC, vals.resolvers[i].status())
        await asyncio.wait([done], timeout=1.0)
    refused: dict[str, int] = {}
    for i in servers:
        for k, v in _refusals(vals.metrics[i], server=True).items():
            refused[k] = refused.get(k, 0) + v
    await vals.stop()
    chain.store.close()
    print(json.dumps(refused), flush=True)


CLIENT = 3
"""The catching-up validator's index."""


async def catch_up(args: argparse.Namespace, net_g: Any, store_path: Path, target: tuple[int, bytes, int],
                   tmp: Path) -> dict[str, Any]:
    """The empty validator catches up with ``args.servers`` serving validators run by a child process."""
    total, head_hash, size = target
    ports = {i: _port() for i in [*range(args.servers), CLIENT]}
    client_chain = Chain(LevelDBStore(str(tmp / "client")), net_g.genesis)
    vals = _Validators(net_g, {CLIENT: client_chain}, ports, tmp, {CLIENT: args.verify_workers}, lambda *a: None,
                       fetch=FetchLimits(packed=not args.plain))
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", str(store_path), "--ports", json.dumps(ports), "--tmp", str(tmp),
        "--txs", str(args.txs), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        await vals.start(args.servers)
        lag = _Lag()
        ticker = asyncio.get_running_loop().create_task(lag.run())
        await asyncio.sleep(1.0)  # the idle loop's lag, before any sync
        lag.phase = "catch_up"
        resolver = vals.resolvers[CLIENT]
        t0 = time.perf_counter()
        while client_chain.height < total:
            resolver.tick()
            await asyncio.sleep(0.25)
            if time.perf_counter() - t0 > args.timeout:
                break
        wall = time.perf_counter() - t0
        lag.phase = "after"
        ticker.cancel()
        ok = client_chain.height == total and client_chain.head.hash() == head_hash
        client_refused = _refusals(vals.metrics[CLIENT], server=False)
    finally:
        await vals.stop()
        assert child.stdin is not None
        child.stdin.close()
        out, _ = await asyncio.wait_for(child.communicate(), 60)
    client_chain.store.close()
    return {"blocks": client_chain.height, "same_head": ok, "seconds": round(wall, 2),
            "blocks_per_s": round(client_chain.height / wall, 2), "mb_per_s": round(size / wall / 1e6, 2),
            "chain_mb": round(size / 1e6, 2), "loop_lag_idle": lag.summary("idle"),
            "loop_lag_catch_up": lag.summary("catch_up"),
            "server_refusals": json.loads(out.decode().strip().splitlines()[-1] or "{}"),
            "client_refusals": client_refused}


def _network(txs: int) -> Any:
    senders = [(0x10000 + i).to_bytes(32, "big") for i in range(txs)]
    return network({private_key_to_address(sk): 10**24 for sk in senders})


def _sign_blocks(job: tuple[int, int, int]) -> list[bytes]:
    """Raw signed transfers of blocks ``first..last`` (worker process): sender ``i`` sends nonce ``h - 1``."""
    first, last, txs = job
    senders = [(0x10000 + i).to_bytes(32, "big") for i in range(txs)]
    return [b"".join(len(t).to_bytes(4, "big") + t for t in (transfer(sk, h - 1, BOB, 1).to_bytes()
                                                             for sk in senders)) for h in range(first, last + 1)]


def _unpack(packed: bytes) -> list[Transaction]:
    out, i = [], 0
    while i < len(packed):
        n = int.from_bytes(packed[i:i + 4], "big")
        out.append(Transaction.from_bytes(packed[i + 4:i + 4 + n]))
        i += 4 + n
    return out


def production_sample(net_g: Any, server_chain: Chain, blocks: int, tmp: Path) -> dict[str, float]:
    """What producing costs a validator at this load, measured in this run: verify (signatures checked), execute
    and commit the chain's first ``blocks`` blocks on a fresh LevelDB store, as a follower does at production."""
    chain = Chain(LevelDBStore(str(tmp / "production-sample")), net_g.genesis)
    t0 = time.perf_counter()
    for h in range(1, blocks + 1):
        raw = server_chain.blocks.block_bytes(h)
        assert raw is not None
        prepared = verify_and_prepare(chain, Block.decode(raw))
        chain.commit(prepared, [])
    wall = time.perf_counter() - t0
    chain.store.close()
    return {"blocks": blocks, "blocks_per_s": round(blocks / wall, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=2000)
    ap.add_argument("--txs", type=int, default=1200, help="transfers per block")
    ap.add_argument("--block-ms", type=int, default=500, help="the network's block time (its cadence)")
    ap.add_argument("--servers", type=int, default=2, help="serving validators (1..3)")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--verify-workers", type=int, default=1,
                    help="the catching-up validator's [consensus] sync_verify_workers (node default 1)")
    ap.add_argument("--plain", action="store_true", help="ask for plain answers, not PackedPages (A/B)")
    ap.add_argument("--sample", type=int, default=100, help="blocks of the same-run production sample")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep the built chain here (outside the repository) and reuse it on the next run")
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # the child process of the serving validators
    ap.add_argument("--ports", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    configure_logging("console", "error")
    if args.serve:
        asyncio.run(serve(args))
        return
    net_g = _network(args.txs)
    with tempfile.TemporaryDirectory(prefix="sync-bench-") as d:
        tmp = Path(d)
        key = f"sync-{args.blocks}x{args.txs}-{args.block_ms}ms"
        store_dir = (args.cache / key) if args.cache else tmp / "server"
        built = store_dir.is_dir() and (store_dir / "COMPLETE").exists()
        sign_s = build_s = 0.0
        if built:
            server_chain = Chain(LevelDBStore(str(store_dir / "db")), net_g.genesis)
        else:
            shutil.rmtree(store_dir, ignore_errors=True)
            store_dir.mkdir(parents=True)
            t0 = time.perf_counter()
            step = 25
            jobs = [(f, min(args.blocks, f + step - 1), args.txs) for f in range(1, args.blocks + 1, step)]
            with concurrent.futures.ProcessPoolExecutor(os.cpu_count() or 1) as pool:
                packed = [b for chunk in pool.map(_sign_blocks, jobs) for b in chunk]
            sign_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            server_chain, _ = build_chain(args.blocks, net=net_g, store=LevelDBStore(str(store_dir / "db")),
                                          txs=lambda h: _unpack(packed[h - 1]), block_ms=args.block_ms)
            build_s = time.perf_counter() - t1
            packed.clear()
            (store_dir / "COMPLETE").write_text("built\n")
        sample = production_sample(net_g, server_chain, min(args.sample, args.blocks), tmp)
        production = min(sample["blocks_per_s"], 1000 / args.block_ms)
        total = server_chain.height
        target = (total, server_chain.head.hash(),
                  sum(len(server_chain.blocks.block_bytes(h) or b"") for h in range(1, total + 1)))
        server_chain.store.close()  # the serving process opens it (LevelDB: one process at a time)
        sync = asyncio.run(catch_up(args, net_g, store_dir / "db", target, tmp))
        if args.cache is None:
            shutil.rmtree(store_dir, ignore_errors=True)
    print(json.dumps({
        "bench": "sync_catchup", "blocks": args.blocks, "txs_per_block": args.txs, "block_ms": args.block_ms,
        "servers": args.servers, "verify_workers": args.verify_workers, "packed": not args.plain,
        "chain_from_cache": built,
        "sign_s": round(sign_s, 1), "build_s": round(build_s, 1),
        "production": {"follower_blocks_per_s": sample["blocks_per_s"], "sample_blocks": sample["blocks"],
                       "cadence_blocks_per_s": 1000 / args.block_ms, "blocks_per_s": round(production, 2),
                       "transfers_per_s": round(production * args.txs, 1),
                       "mb_per_s": round(production * sync["chain_mb"] / max(1, args.blocks), 2)},
        "catch_up": sync,
        "catch_up_transfers_per_s": round(sync["blocks_per_s"] * args.txs, 1),
        "ratio_catch_up_to_production": round(sync["blocks_per_s"] / production, 2),
        "ratio_catch_up_to_follower": round(sync["blocks_per_s"] / sample["blocks_per_s"], 2),
        "goal_ratio": 3.0,
    }, indent=1))


if __name__ == "__main__":
    main()
