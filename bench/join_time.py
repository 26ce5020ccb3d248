"""Join time: state sync from a snapshot against replaying every block, in the same run (issue 34 §1; prints JSON).

Builds a certified chain of ``--blocks`` blocks of ``--txs`` transfers each to new accounts (so the state holds about
``blocks × txs`` keys) on LevelDB, then measures on this machine:

- **replay** (the baseline): a fresh LevelDB chain re-executes and commits every block, signatures checked, as a
  validator joining by block sync does (the network transfer left out, which favours replay);
- **snapshot create**: the serving side's cost, taken from a store view;
- **state sync**: an empty validator fetches that snapshot from a serving validator over loopback QUIC
  (``node/statesync.py``: offers, every chunk verified against the finalized state root, atomic install) until its
  data directory opens as a chain at the snapshot's height.

Reported: seconds of each, state keys, blocks, snapshot bytes, and ``speedup`` = replay ÷ state sync. Issue 34's goal
(≥ 10^6 keys and ≥ 50,000 blocks joined in ≤ 60 s, ≥ 20× faster than replay) is a scale this run does not build by
default (building the chain alone would take hours here); ``--blocks``/``--txs`` scale it.

Usage: python bench/join_time.py [--blocks 100] [--txs 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.node.snapshot_server import SnapshotServer
from cowboy_node.node.statesync import StateSync
from cowboy_node.observability.logging import configure_logging
from cowboy_node.snapshot.create import create_snapshot, list_snapshots
from cowboy_node.snapshot.messages import CH_SNAPSHOT
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.transport.peers import PeerInfo, PeerLimits, PeerNetwork
from tests.helpers import ALICE_SK, transfer
from tests.unit.node.sync_chain import NET, build_chain, scheme


def _port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _net(tmp: Path, me: int, ports: dict[int, int], on_message: Any) -> PeerNetwork:
    keys = [v.ed25519_public_key for v in NET.genesis.validators]
    return PeerNetwork(me=me, ed25519_seed=NET.validator_keys[me].ed25519_seed, listen_host="127.0.0.1",
                       listen_port=ports[me], peers=[PeerInfo(j, keys[j], "127.0.0.1", ports[j]) for j in ports
                                                     if j != me],
                       validator_keys=keys, network_id=NET.genesis.hash(), cert_path=tmp / f"v{me}.crt",
                       key_path=tmp / f"v{me}.key", on_message=on_message, limits=PeerLimits())


async def state_sync(tmp: Path, snapshots: Path) -> float:
    ports = {0: _port(), 3: _port()}
    nets: dict[int, PeerNetwork] = {}
    server = SnapshotServer(snapshots, send=lambda *a: nets[0].send(*a))

    class Net:
        def send(self, to: int, ch: int, p: bytes) -> bool:
            return nets[3].send(to, ch, p)

        def connected(self) -> frozenset[int]:
            return nets[3].connected()

        def penalize(self, peer: int, reason: str) -> None:
            nets[3].penalize(peer, reason)

    sync = StateSync(Net(), NET.genesis, scheme(NET, None))
    nets[0] = _net(tmp, 0, ports, lambda s, c, p: server.receive(s, p) if c == CH_SNAPSHOT else None)
    nets[3] = _net(tmp, 3, ports, lambda s, c, p: sync.receive(s, p) if c == CH_SNAPSHOT else None)
    for n in nets.values():
        await n.start()
    while nets[3].connected() != frozenset({0}) or nets[0].connected() != frozenset({3}):
        await asyncio.sleep(0.02)  # both directions up: the join is timed from here
    store = LevelDBStore(tmp / "joined")
    try:
        t0 = time.perf_counter()
        await sync.run(store, tmp / "joined", tmp / "staging")
        elapsed = time.perf_counter() - t0
        Chain(store, NET.genesis)
    finally:
        store.close()
        for n in nets.values():
            await n.stop()
        server.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=100)
    ap.add_argument("--txs", type=int, default=500)
    args = ap.parse_args()
    configure_logging("json", "warning")
    with tempfile.TemporaryDirectory(prefix="cowboy-join-") as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        source, blocks = build_chain(args.blocks, store=LevelDBStore(tmp / "src"), txs=lambda h: [
            transfer(ALICE_SK, args.txs * (h - 1) + i, (0x40_0000 + args.txs * (h - 1) + i).to_bytes(20, "big"), 1)
            for i in range(args.txs)])
        build_s = time.perf_counter() - t0
        keys = sum(1 for _ in source.store.iterate(b"s/"))

        fresh = Chain(LevelDBStore(tmp / "replay"), NET.genesis)
        t0 = time.perf_counter()
        for block in blocks:
            fresh.commit(verify_and_prepare(fresh, block))
        replay_s = time.perf_counter() - t0
        assert fresh.head.hash() == source.head.hash()
        fresh.close()

        view = source.store.snapshot()
        t0 = time.perf_counter()
        try:
            create_snapshot(view, height=source.height, chain_id=NET.genesis.chain_id, genesis_hash=NET.genesis.hash(),
                            out_root=tmp / "snapshots")
        finally:
            view.close()
        create_s = time.perf_counter() - t0
        (m,) = list_snapshots(tmp / "snapshots")
        source.close()
        sync_s = asyncio.run(state_sync(tmp, tmp / "snapshots"))
    print(json.dumps({
        "bench": "join_time", "cpus": os.cpu_count(), "blocks": args.blocks, "txs_per_block": args.txs,
        "state_keys": keys, "snapshot_bytes": sum(c.size for c in m.chunks), "snapshot_chunks": len(m.chunks),
        "build_s": round(build_s, 2), "replay_s": round(replay_s, 2), "snapshot_create_s": round(create_s, 2),
        "state_sync_s": round(sync_s, 2), "speedup": round(replay_s / sync_s, 2),
        "goal": {"keys": 10**6, "blocks": 50_000, "join_s": 60, "speedup": 20, "measured_at_that_scale": False},
    }, indent=2))


if __name__ == "__main__":
    main()
