"""Join time: state sync from a snapshot against replaying every block, in the same run (issue 34 §1; prints JSON).

Builds (``--cache DIR`` keeps it for the next run, outside git) a certified chain of ``--blocks`` blocks of ``--txs``
transfers each to new accounts, so the state holds about ``blocks × txs`` keys: the real executor and commit
(``Forks.build`` / ``Forks.commit``, real threshold seeds and finalization certificates of a 4-validator network),
transactions signed in worker processes, no consensus over the network. A snapshot is taken at height
``blocks − --tail`` while the chain is built (from a store view, as the node's snapshotter does). Then, in one run:

- **join** (state sync): two serving validators (a child process, standing for other machines; each a
  ``PeerNetwork`` over loopback QUIC with the node's own ``SnapshotServer`` and block-sync ``Resolver``) and one
  empty validator, which state-syncs (``node/statesync.py``: offers, several chunks in flight from both peers,
  every chunk verified against the finalized state root, atomic install) and then block-syncs the ``--tail`` blocks
  after the snapshot up to the head. Split: ``manifest_s`` (offers collected and verified), ``chunks_s`` (fetch,
  verify and write of every chunk, overlapped), ``install_s`` (the final batch and the opening as a chain),
  ``block_tail_s`` (block sync to the head).
- **replay** (the baseline): a fresh LevelDB chain verifies (signatures checked), executes and commits the chain's
  blocks from genesis, as a validator joining by block sync does (the network transfer left out, which favours
  replay). ``--replay-blocks N`` replays only the first N blocks and extrapolates linearly to the whole chain (every
  block holds the same number of transfers to new accounts, so a prefix is representative); the JSON then says
  ``"replay_extrapolated": true`` and gives the measured prefix.

Reported: keys, blocks, the join seconds and their split, keys/s, replay seconds, ``speedup`` = replay ÷ join, and
the load average of the machine during the run (``os.getloadavg()`` before and after each phase). Issue 34's goal:
≥ 10^6 keys and ≥ 50,000 blocks joined in ≤ 60 s, ≥ 20× faster than replay.

Usage: python bench/join_time.py [--blocks 50000] [--txs 20] [--tail 100] [--cache /work/bench-cache]
                                 [--replay-blocks N]
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.types import Finalization, Proposal, finalize_message, seed_message
from cowboy_node.consensus.sync_messages import CH_SYNC
from cowboy_node.crypto import bls
from cowboy_node.node.snapshot_server import SnapshotServer
from cowboy_node.node.statesync import StateSync
from cowboy_node.node.sync_resolver import Resolver
from cowboy_node.observability.logging import configure_logging
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from cowboy_node.snapshot.create import create_snapshot, list_snapshots
from cowboy_node.snapshot.messages import CH_SNAPSHOT
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE_SK, transfer
from tests.unit.node.sync_chain import NET, group_sign, scheme

CLIENT = 3
"""The joining validator's index (0 and 1 serve)."""
SERVERS = (0, 1)


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------------------------------------- building the chain

def _recipient(n: int) -> bytes:
    return (0x40_0000 + n).to_bytes(20, "big")


def _sign_blocks(job: tuple[int, int, int]) -> list[bytes]:
    """Raw signed transfers of blocks ``first..last`` (worker process): ALICE's nonces in order, each to a new
    account."""
    first, last, txs = job
    out = []
    for h in range(first, last + 1):
        base = txs * (h - 1)
        out.append(b"".join(len(t).to_bytes(4, "big") + t for t in (
            transfer(ALICE_SK, base + i, _recipient(base + i), 1).to_bytes() for i in range(txs))))
    return out


def _unpack(packed: bytes) -> list[Transaction]:
    out, i = [], 0
    while i < len(packed):
        n = int.from_bytes(packed[i:i + 4], "big")
        out.append(Transaction.from_bytes(packed[i + 4:i + 4 + n]))
        i += 4 + n
    return out


class _NoSync:
    """A LevelDB store whose batches skip the fsync while the bench builds its chain (the bytes written are the
    same; only an OS crash mid-build could lose them, and the build is then simply redone)."""

    def __init__(self, store: LevelDBStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def write_batch(self, ops: Any, *, sync: bool = True) -> None:
        self.store.write_batch(ops, sync=False)


def _group_secret() -> int:
    """The group secret of the bench's network, interpolated at 0 from the first ``threshold`` shares (a BLS
    signature is unique, so signing with it gives exactly the signature recovered from partials: checked)."""
    t = NET.genesis.threshold
    keys = NET.validator_keys[:t]
    xs = [k.bls_share_index for k in keys]
    total = 0
    for k, x in zip(keys, xs, strict=True):
        lam = 1
        for xj in xs:
            if xj != x:
                lam = lam * xj * pow(xj - x, -1, bls.R) % bls.R
        total = (total + lam * bls.secret_key_from_bytes(k.bls_secret)) % bls.R
    probe = b"join-bench-probe"
    assert bls.sign(total, probe) == group_sign([scheme(NET, i) for i in range(4)], t, probe)
    return total


def build_chain_fast(n: int, store: Any, txs: Any) -> Chain:
    """``tests/unit/node/sync_chain.build_chain`` (finalized blocks, view = height, proposer 0, a seed and a
    certificate for every block), each group signature made once with the group secret instead of from three
    partials: the same bytes, a third of the signing."""
    chain = Chain(store, NET.genesis)
    forks = Forks(chain, ConsensusRecords(chain.store))
    secret = _group_secret()
    seed0 = NET.validator_keys[0].ed25519_seed
    proposer = ed25519.public_key_from_seed(seed0)
    for v in range(1, n + 1):
        parent = chain.head
        cand = forks.build(parent.hash(), Round(0, v), txs(v), timestamp_ms=NET.genesis.genesis_time_ms + v * 500,
                           proposer=proposer, sign=lambda d: ed25519.sign(seed0, d),
                           fee_recipient=NET.genesis.validators[0].fee_recipient, presence=lambda w: b"\x01\x00")
        block = cand.prepared.block
        p = Proposal(Round(0, v), parent.header.round.view, parent.hash(), block.hash())
        seed = bls.sign(secret, seed_message(p.round))
        cert = Finalization(p, bls.sign(secret, finalize_message(p)), seed)
        forks.commit(block, seed=seed, certificate=cert, inspect=lambda prepared, env: None)
    return chain


def build(store_dir: Path, blocks: int, txs: int, snapshot_height: int) -> dict[str, float]:
    """Build the chain into ``store_dir/db`` and its snapshot at ``snapshot_height`` into ``store_dir/snapshots``."""
    shutil.rmtree(store_dir, ignore_errors=True)
    store_dir.mkdir(parents=True)
    step = 250
    jobs = [(f, min(blocks, f + step - 1), txs) for f in range(1, blocks + 1, step)]
    t0 = time.perf_counter()
    snap_s = 0.0
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        signed: Iterator[list[bytes]] = pool.map(_sign_blocks, jobs)
        pending: list[bytes] = []
        store = _NoSync(LevelDBStore(store_dir / "db"))

        def txs_of(h: int) -> list[Transaction]:
            nonlocal pending, snap_s
            if h == snapshot_height + 1:  # block `snapshot_height` is committed: the snapshotter's moment
                t = time.perf_counter()
                view = store.snapshot()
                try:
                    create_snapshot(view, height=snapshot_height, chain_id=NET.genesis.chain_id,
                                    genesis_hash=NET.genesis.hash(), out_root=store_dir / "snapshots")
                finally:
                    view.close()
                snap_s = time.perf_counter() - t
            if not pending:
                pending = list(next(signed))
            return _unpack(pending.pop(0))

        chain = build_chain_fast(blocks, store, txs_of)
        chain.store.write_batch([], sync=True)
        chain.close()
    (store_dir / "COMPLETE").write_text("built\n")
    return {"build_s": round(time.perf_counter() - t0, 1), "snapshot_create_s": round(snap_s, 2)}


# ---------------------------------------------------------------------------------------------- replay

def replay(store_dir: Path, tmp: Path, count: int) -> float:
    """Seconds to verify, execute and commit the first ``count`` blocks on a fresh LevelDB chain."""
    source = LevelDBStore(store_dir / "db")
    src = Chain(source, NET.genesis)
    fresh = Chain(LevelDBStore(tmp / "replay"), NET.genesis)
    try:
        t0 = time.perf_counter()
        for h in range(1, count + 1):
            raw = src.blocks.block_bytes(h)
            assert raw is not None
            fresh.commit(verify_and_prepare(fresh, Block.decode(raw)))
        elapsed = time.perf_counter() - t0
        expect = src.blocks.block(count)
        assert expect is not None and fresh.head.hash() == expect.hash(), "replay diverged from the built chain"
    finally:
        fresh.close()
        src.close()
    shutil.rmtree(tmp / "replay", ignore_errors=True)
    return elapsed


# ---------------------------------------------------------------------------------------------- the join

class _Peers:
    """Validators of the bench's network in this process: a PeerNetwork each, messages routed by channel."""

    def __init__(self, indices: list[int], ports: dict[int, int], tmp: Path) -> None:
        keys = [v.ed25519_public_key for v in NET.genesis.validators]
        self.routes: dict[int, dict[int, Any]] = {i: {} for i in indices}
        self.nets: dict[int, PeerNetwork] = {}
        for i in indices:
            def route(s: int, c: int, p: bytes, i: int = i) -> None:
                handler = self.routes[i].get(c)
                if handler is not None:
                    handler(s, p)
            self.nets[i] = PeerNetwork(
                me=i, ed25519_seed=NET.validator_keys[i].ed25519_seed, listen_host="127.0.0.1",
                listen_port=ports[i], peers=[PeerInfo(j, keys[j], "127.0.0.1", ports[j]) for j in ports if j != i],
                validator_keys=keys, network_id=NET.genesis.hash(), cert_path=tmp / f"v{i}.crt",
                key_path=tmp / f"v{i}.key", on_message=route, limits=PeerLimits())

    async def start(self, peers: int) -> None:
        for n in self.nets.values():
            await n.start()
        deadline = time.monotonic() + 60
        while not all(len(n.connected()) >= peers for n in self.nets.values()):
            if time.monotonic() > deadline:
                raise RuntimeError("peers did not connect")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for n in self.nets.values():
            await n.stop()


class _Builder:
    """The node's builder thread and state lock, as the resolver expects them."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="block-builder")
        self.lock = threading.Lock()
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def run(self, fn: Any) -> Any:
        def locked() -> Any:
            with self.lock:
                return fn()
        return await asyncio.get_running_loop().run_in_executor(self.pool, locked)


def _resolver(chain: Chain, peers: _Peers, i: int, builder: _Builder) -> Resolver:
    return Resolver(chain, ConsensusRecords(chain.store), scheme(NET, None), net=lambda: peers.nets.get(i),
                    metrics=NodeMetrics(), in_builder=builder.run, spawn=builder.spawn, memory_body=lambda d: None,
                    on_applied=lambda *a: None, verify_workers=0)


async def serve(args: argparse.Namespace) -> None:
    """The serving validators, in a process of their own (``--serve``): snapshots and blocks until stdin closes."""
    store_dir = Path(args.serve)
    chain = Chain(LevelDBStore(store_dir / "db"), NET.genesis)
    ports = {int(k): v for k, v in json.loads(args.ports).items()}
    peers = _Peers(list(SERVERS), ports, Path(args.tmp))
    builder = _Builder()
    servers: dict[int, SnapshotServer] = {}
    resolvers: dict[int, Resolver] = {}
    for i in SERVERS:
        servers[i] = SnapshotServer(store_dir / "snapshots", send=peers.nets[i].send)
        resolvers[i] = _resolver(chain, peers, i, builder)
        peers.routes[i][CH_SNAPSHOT] = servers[i].receive
        peers.routes[i][CH_SYNC] = resolvers[i].on_sync
    await peers.start(len(ports) - 1)
    loop = asyncio.get_running_loop()
    done = loop.run_in_executor(None, sys.stdin.read)
    while not done.done():
        for i in SERVERS:
            peers.nets[i].broadcast(CH_SYNC, resolvers[i].status())
        await asyncio.wait([done], timeout=1.0)
    refused: dict[str, int] = {}
    for s in servers.values():
        for k, v in s.refused.items():
            refused[k] = refused.get(k, 0) + v
    await peers.stop()
    for s in servers.values():
        s.close()
    for r in resolvers.values():
        r.close()
    chain.close()
    print(json.dumps(refused), flush=True)


async def join(store_dir: Path, tmp: Path, head: tuple[int, bytes], timeout: float) -> dict[str, Any]:
    """The empty validator joins: state sync from the two servers, then block sync to ``head``."""
    ports = {i: _port() for i in [*SERVERS, CLIENT]}
    peers = _Peers([CLIENT], ports, tmp)
    sync = StateSync(peers.nets[CLIENT], NET.genesis, scheme(NET, None))
    peers.routes[CLIENT][CH_SNAPSHOT] = sync.receive
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", str(store_dir), "--ports", json.dumps(ports), "--tmp", str(tmp),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    builder = _Builder()
    store = LevelDBStore(tmp / "joined")
    out: dict[str, Any] = {}
    try:
        await peers.start(len(SERVERS))
        load0 = _load()
        t0 = time.perf_counter()
        verified, sources = await sync.choose()
        t1 = time.perf_counter()
        installed = await sync.fetch_and_install(verified, sources, store, tmp / "joined")
        t2 = time.perf_counter()
        chain = Chain(store, NET.genesis)
        t3 = time.perf_counter()
        resolver = _resolver(chain, peers, CLIENT, builder)
        peers.routes[CLIENT][CH_SYNC] = resolver.on_sync
        while chain.height < head[0] and time.perf_counter() - t3 < timeout:
            resolver.tick()
            await asyncio.sleep(0.05)
        t4 = time.perf_counter()
        ok = chain.height == head[0] and chain.head.hash() == head[1]
        resolver.close()
        out = {"join_s": round(t4 - t0, 2), "manifest_s": round(t1 - t0, 2), "chunks_s": round(t2 - t1, 2),
               "install_s": round(t3 - t2, 2), "block_tail_s": round(t4 - t3, 2),
               "snapshot_height": installed.height, "entries": installed.entries, "sources": sources,
               "reached_head": ok, "height": chain.height, "penalized": sync.penalized,
               "load_before": load0, "load_after": _load(), "stages": sync.stages}
    finally:
        await peers.stop()
        store.close()
        assert child.stdin is not None
        child.stdin.close()
        stdout, _ = await asyncio.wait_for(child.communicate(), 120)
    out["server_refusals"] = json.loads(stdout.decode().strip().splitlines()[-1] or "{}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=50_000)
    ap.add_argument("--txs", type=int, default=20, help="transfers per block, each to a new account (a new key)")
    ap.add_argument("--tail", type=int, default=100, help="blocks after the snapshot, block-synced by the join")
    ap.add_argument("--replay-blocks", type=int, default=0,
                    help="replay only this prefix and extrapolate (0: the whole chain)")
    ap.add_argument("--cache", type=Path, default=None, help="keep the built chain here (outside git) for next runs")
    ap.add_argument("--build-only", action="store_true", help="build (or find) the chain, print its figures, stop")
    ap.add_argument("--timeout", type=float, default=600.0, help="bound of the block-sync tail")
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ports", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    configure_logging("json", "error")
    if args.serve:
        asyncio.run(serve(args))
        return
    snapshot_height = args.blocks - args.tail
    if snapshot_height < 1:
        ap.error("--tail must be below --blocks")
    with tempfile.TemporaryDirectory(prefix="cowboy-join-") as d:
        tmp = Path(d)
        key = f"join-{args.blocks}x{args.txs}-tail{args.tail}"
        store_dir = (args.cache / key) if args.cache else tmp / "chain"
        built: dict[str, float] = {}
        cached = (store_dir / "COMPLETE").exists()
        load_build = _load()
        if not cached:
            built = build(store_dir, args.blocks, args.txs, snapshot_height)
        chain = Chain(LevelDBStore(store_dir / "db"), NET.genesis)
        keys = sum(1 for _ in chain.store.iterate(b"s/"))
        head = (chain.height, chain.head.hash())
        chain.close()
        (m,) = list_snapshots(store_dir / "snapshots")
        figures: dict[str, Any] = {
            "bench": "join_time", "cpus": os.cpu_count(), "blocks": args.blocks, "txs_per_block": args.txs,
            "state_keys": keys, "snapshot_height": m.height, "snapshot_entries": m.entries,
            "snapshot_bytes": sum(c.size for c in m.chunks), "snapshot_chunks": len(m.chunks),
            "chain_from_cache": cached, **built, "load_at_build": load_build}
        if args.build_only:
            print(json.dumps(figures, indent=2))
            return
        joined = asyncio.run(join(store_dir, tmp, head, args.timeout))
        count = args.replay_blocks or args.blocks
        load_replay = _load()
        replay_s = replay(store_dir, tmp, min(count, args.blocks))
        whole = replay_s * args.blocks / min(count, args.blocks)
        if args.cache is None:
            shutil.rmtree(store_dir, ignore_errors=True)
    print(json.dumps({
        **figures, "join": joined, "join_s": joined["join_s"],
        "join_keys_per_s": round(m.entries / joined["join_s"]),
        "replay_blocks_measured": min(count, args.blocks), "replay_measured_s": round(replay_s, 2),
        "replay_extrapolated": count < args.blocks, "replay_s": round(whole, 2),
        "speedup": round(whole / joined["join_s"], 2), "load_at_replay_start": load_replay, "load_end": _load(),
        "goal": {"keys": 10**6, "blocks": 50_000, "join_s": 60, "speedup": 20},
        "goal_met": keys >= 10**6 and args.blocks >= 50_000 and joined["join_s"] <= 60
        and whole / joined["join_s"] >= 20 and joined["reached_head"],
    }, indent=2))


if __name__ == "__main__":
    main()
