"""Node-to-node state sync over real loopback QUIC (issue 34 §1): an empty validator asks its peers for a snapshot;
a peer sending a chunk that does not verify is penalized and another is asked; the state installed is the source's;
the double-sign guard then watches. Golden bytes of the channel-7 messages."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.chain.blockstore import KEY_INSTALLING
from cowboy_node.chain.chain import Chain, ChainError
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, marker_path
from cowboy_node.node.snapshot_server import SnapshotServer
from cowboy_node.node.statesync import StateSync, SyncLimits
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from cowboy_node.snapshot.create import create_snapshot
from cowboy_node.snapshot.messages import (
    CH_SNAPSHOT,
    Chunk,
    ChunkRequest,
    Offer,
    OfferRequest,
    Refused,
    SnapshotMessage,
    decode_snapshot_message,
    encode_snapshot_message,
)
from cowboy_node.state.leveldb import LevelDBStore
from tests.helpers import ALICE_SK, transfer
from tests.unit.node.sync_chain import NET, build_chain, scheme
from tests.unit.p2p.test_peer_network import free_udp_port

pytestmark = pytest.mark.timeout(300)

GOLDEN: list[tuple[SnapshotMessage, str]] = [
    (OfferRequest(), "a10000"),                                       # {0: 0}
    (Offer(12, b"m"), "a30001010c02416d"),                            # {0: 1, 1: 12, 2: h'6d'}
    (ChunkRequest(12, 3), "a30002010c0203"),                          # {0: 2, 1: 12, 2: 3}
    (Chunk(12, 3, b"ab"), "a40003010c0203034261 62".replace(" ", "")),  # {0: 3, 1: 12, 2: 3, 3: h'6162'}
    (Refused("no_snapshot"), "a20004016b6e6f5f736e617073686f74"),      # {0: 4, 1: "no_snapshot"}
]


@pytest.mark.parametrize("message,golden", GOLDEN)
def test_golden_bytes(message: SnapshotMessage, golden: str) -> None:
    assert encode_snapshot_message(message).hex() == golden
    assert decode_snapshot_message(bytes.fromhex(golden)) == message


class LyingServer(SnapshotServer):
    """Serves its snapshot, but with one byte of every chunk changed."""

    def _read(self, m: Any) -> SnapshotMessage:
        out = super()._read(m)
        if isinstance(out, Chunk):
            return Chunk(out.height, out.index, out.data[:-1] + bytes([out.data[-1] ^ 1]))
        return out


def _net(tmp: Path, me: int, ports: dict[int, int], on_message: Any) -> PeerNetwork:
    keys = [v.ed25519_public_key for v in NET.genesis.validators]
    peers = [PeerInfo(j, keys[j], "127.0.0.1", ports[j]) for j in ports if j != me]
    return PeerNetwork(me=me, ed25519_seed=NET.validator_keys[me].ed25519_seed, listen_host="127.0.0.1",
                       listen_port=ports[me], peers=peers, validator_keys=keys, network_id=NET.genesis.hash(),
                       cert_path=tmp / f"v{me}.crt", key_path=tmp / f"v{me}.key", on_message=on_message,
                       limits=PeerLimits(reconnect_min_s=0.05, reconnect_max_s=0.5, idle_timeout_s=10.0))


async def test_an_empty_validator_state_syncs_past_a_lying_peer(tmp_path: Path) -> None:
    source, _ = build_chain(6, store=LevelDBStore(tmp_path / "src"),
                            txs=lambda h: [transfer(ALICE_SK, 30 * (h - 1) + i, (0x30_0000 + 30 * h + i).to_bytes(
                                20, "big"), 5) for i in range(30)])
    view = source.store.snapshot()
    try:
        create_snapshot(view, height=6, chain_id=NET.genesis.chain_id, genesis_hash=NET.genesis.hash(),
                        out_root=tmp_path / "snapshots", chunk_bytes=2048)
    finally:
        view.close()
    ports = {i: free_udp_port() for i in (0, 1, 3)}
    nets: dict[int, PeerNetwork] = {}
    servers = {0: LyingServer(tmp_path / "snapshots", send=lambda *a: nets[0].send(*a)),
               1: SnapshotServer(tmp_path / "snapshots", send=lambda *a: nets[1].send(*a))}
    client_net: list[PeerNetwork] = []
    sync = StateSync(type("Net", (), {"send": lambda s, *a: client_net[0].send(*a),
                                      "connected": lambda s: client_net[0].connected(),
                                      "penalize": lambda s, p, r: client_net[0].penalize(p, r)})(),
                     NET.genesis, scheme(NET, None), limits=SyncLimits(offers_s=1.0, chunk_timeout_s=10.0))
    for i in (0, 1):
        nets[i] = _net(tmp_path, i, ports, lambda s, c, p, i=i: servers[i].receive(s, p) if c == CH_SNAPSHOT else None)
    nets[3] = _net(tmp_path, 3, ports, lambda s, c, p: sync.receive(s, p) if c == CH_SNAPSHOT else None)
    client_net.append(nets[3])
    for n in nets.values():
        await n.start()
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while nets[3].connected() != frozenset({0, 1}):
            assert asyncio.get_running_loop().time() < deadline, "peers did not connect"
            await asyncio.sleep(0.05)
        store = LevelDBStore(tmp_path / "data")
        try:
            done = await sync.run(store, tmp_path / "data", tmp_path / "staging")
            assert done.height == 6
            assert sync.penalized == [(0, "snapshot_bad_chunk")]  # the liar, once; the honest peer served the rest
            joined = Chain(store, NET.genesis)
            assert joined.head.hash() == source.head.hash()
            assert {k: v for k, v in store.iterate(b"s/")} == {k: v for k, v in source.store.iterate(b"s/")}
        finally:
            store.close()
        assert marker_path(tmp_path / "data" / VOTE_JOURNAL_FILE).exists()  # it will watch before voting
    finally:
        for n in nets.values():
            await n.stop()
        for s in servers.values():
            s.close()
        source.close()


async def test_with_only_lying_peers_nothing_is_installed(tmp_path: Path) -> None:
    source, _ = build_chain(3, store=LevelDBStore(tmp_path / "src"))
    view = source.store.snapshot()
    try:
        create_snapshot(view, height=3, chain_id=NET.genesis.chain_id, genesis_hash=NET.genesis.hash(),
                        out_root=tmp_path / "snapshots")
    finally:
        view.close()
    ports = {i: free_udp_port() for i in (0, 3)}
    nets: dict[int, PeerNetwork] = {}
    liar = LyingServer(tmp_path / "snapshots", send=lambda *a: nets[0].send(*a))
    holder: list[PeerNetwork] = []
    sync = StateSync(type("Net", (), {"send": lambda s, *a: holder[0].send(*a),
                                      "connected": lambda s: holder[0].connected(),
                                      "penalize": lambda s, p, r: holder[0].penalize(p, r)})(),
                     NET.genesis, scheme(NET, None), limits=SyncLimits(offers_s=1.0, chunk_timeout_s=10.0))
    nets[0] = _net(tmp_path, 0, ports, lambda s, c, p: liar.receive(s, p) if c == CH_SNAPSHOT else None)
    nets[3] = _net(tmp_path, 3, ports, lambda s, c, p: sync.receive(s, p) if c == CH_SNAPSHOT else None)
    holder.append(nets[3])
    for n in nets.values():
        await n.start()
    try:
        store = LevelDBStore(tmp_path / "data")
        try:
            from cowboy_node.snapshot.manifest import SnapshotError

            with pytest.raises(SnapshotError) as e:
                await sync.run(store, tmp_path / "data", tmp_path / "staging")
            assert e.value.code == "no_source" and sync.penalized == [(0, "snapshot_bad_chunk")]
            # Nothing of the snapshot written: only the install's marker, so the store never opens as a chain (the
            # next start restarts the install).
            assert [k for k, _ in store.iterate(b"")] == [KEY_INSTALLING]
            with pytest.raises(ChainError):
                Chain(store, NET.genesis)
        finally:
            store.close()
    finally:
        for n in nets.values():
            await n.stop()
        liar.close()
        source.close()


async def test_the_snapshot_server_refuses_a_peer_over_its_budget_and_reads_nothing(tmp_path: Path) -> None:
    from cowboy_node.node.snapshot_server import ServeLimits

    source, _ = build_chain(2, store=LevelDBStore(tmp_path / "src"))
    view = source.store.snapshot()
    try:
        create_snapshot(view, height=2, chain_id=NET.genesis.chain_id, genesis_hash=NET.genesis.hash(),
                        out_root=tmp_path / "snapshots")
    finally:
        view.close()
    source.close()
    sent: list[tuple[int, SnapshotMessage]] = []
    now = [0.0]
    server = SnapshotServer(tmp_path / "snapshots", send=lambda to, ch, p: sent.append(
        (to, decode_snapshot_message(p))) is None, limits=ServeLimits(requests_per_s=1.0), clock=lambda: now[0])
    try:
        for _ in range(3):  # burst 2, then refused
            server.receive(5, encode_snapshot_message(ChunkRequest(2, 0)))
        server.receive(6, encode_snapshot_message(OfferRequest()))  # another peer has its own budget
        while len(sent) < 4:
            await asyncio.sleep(0.01)
    finally:
        server.close()
    to5 = [m for to, m in sent if to == 5]
    assert sum(isinstance(m, Chunk) for m in to5) == 2 and to5.count(Refused("over_budget")) == 1
    assert any(to == 6 and isinstance(m, Offer) and m.height == 2 for to, m in sent)
    assert server.refused == {"over_budget": 1}


class _HeldNet:
    """A fake peer layer: chunk requests are held, then answered from the snapshot directory by :meth:`serve`."""

    def __init__(self, snaps: Path, sources: frozenset[int]) -> None:
        self.snaps = snaps
        self.sources = sources
        self.held: list[tuple[int, ChunkRequest]] = []
        self.most_held = 0
        self.most_held_per_peer = 0
        self.served: dict[int, int] = {}
        self.refuse_first_of: int | None = None
        self.penalties: list[tuple[int, str]] = []

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        m = decode_snapshot_message(payload)
        assert isinstance(m, ChunkRequest)
        self.held.append((to, m))
        self.most_held = max(self.most_held, len(self.held))
        self.most_held_per_peer = max(self.most_held_per_peer, sum(1 for p, _ in self.held if p == to))
        return True

    def connected(self) -> frozenset[int]:
        return self.sources

    def penalize(self, peer: int, reason: str) -> None:
        self.penalties.append((peer, reason))

    async def serve(self, sync: StateSync, done: asyncio.Event) -> None:
        from cowboy_node.snapshot.create import chunk_file

        while not done.is_set():
            await asyncio.sleep(0.02)
            held, self.held = self.held, []
            for peer, m in held:
                if peer == self.refuse_first_of:
                    self.refuse_first_of = None
                    sync.receive(peer, encode_snapshot_message(Refused("over_budget")))
                    continue
                data = (self.snaps / str(m.height) / chunk_file(m.index)).read_bytes()
                self.served[peer] = self.served.get(peer, 0) + 1
                sync.receive(peer, encode_snapshot_message(Chunk(m.height, m.index, data)))


@pytest.mark.parametrize("window,per_peer,most", [(4, 2, 4), (4, 1, 2), (3, 2, 3)])
async def test_chunks_are_fetched_several_at_once_from_every_source_within_the_window(
        tmp_path: Path, window: int, per_peer: int, most: int) -> None:
    """At most ``window`` in flight, ``per_peer`` per source, both sources used; a source over its budget is rested,
    not dropped nor penalized, and serves again."""
    from cowboy_node.snapshot.create import MANIFEST_FILE, list_snapshots
    from cowboy_node.snapshot.manifest import decode_manifest
    from cowboy_node.snapshot.verify import verify_manifest

    source, _ = build_chain(4, store=LevelDBStore(tmp_path / "src"),
                            txs=lambda h: [transfer(ALICE_SK, 40 * (h - 1) + i, (0x50_0000 + 40 * h + i).to_bytes(
                                20, "big"), 5) for i in range(40)])
    view = source.store.snapshot()
    try:
        create_snapshot(view, height=4, chain_id=NET.genesis.chain_id, genesis_hash=NET.genesis.hash(),
                        out_root=tmp_path / "snapshots", chunk_bytes=1024)
    finally:
        view.close()
    (m,) = list_snapshots(tmp_path / "snapshots")
    assert len(m.chunks) >= 8
    net = _HeldNet(tmp_path / "snapshots", frozenset({0, 1}))
    net.refuse_first_of = 1
    sync = StateSync(net, NET.genesis, scheme(NET, None),
                     limits=SyncLimits(window=window, per_peer=per_peer, verify_workers=0, busy_retry_s=0.001))
    verified = verify_manifest(decode_manifest((tmp_path / "snapshots" / "4" / MANIFEST_FILE).read_bytes()),
                               NET.genesis, scheme(NET, None))
    done = asyncio.Event()
    server = asyncio.get_running_loop().create_task(net.serve(sync, done))
    store = LevelDBStore(tmp_path / "data")
    try:
        installed = await sync.fetch_and_install(verified, [0, 1], store, tmp_path / "data")
        assert installed.height == 4
        assert {k: v for k, v in store.iterate(b"s/")} == {k: v for k, v in source.store.iterate(b"s/")}
    finally:
        done.set()
        await server
        store.close()
        source.close()
    assert net.most_held == most and net.most_held_per_peer == per_peer  # pipelined, within both bounds
    # The refusing source served again after its rest (its first request was refused, so any chunk it served came
    # after); its rest (1 ms) is shorter than one serving round (20 ms), so how many it served is not a race.
    assert net.served.get(0, 0) >= 1 and net.served.get(1, 0) >= 1
    assert net.penalties == [] and sync.penalized == []
