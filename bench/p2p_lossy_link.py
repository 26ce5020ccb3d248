"""Validator links on an impaired path: vote latency and body throughput by congestion control (prints JSON).

Two validators' ``PeerNetwork``s talk over loopback through the e2e UDP relay (``tests/e2e/udp_proxy.py``), which
delays every datagram ``--delay-ms`` ± ``--jitter-ms`` (uniform, seeded: it reorders, as ``tc netem`` does) and
drops ``--loss`` of them, each way. Validator 0 sends validator 1 what a leader at load sends a peer: a block body
of ``--body-bytes`` every 100 ms on the blocks channel, and a 200-byte vote every 50 ms on the consensus channel.
Measured at validator 1 over ``--seconds``: the votes' one-way latency (p50/p99/max; a vote waits behind bodies in
the link's single stream) and the body bytes delivered per second.

Three runs in this one process, fresh networks each: a clean link with aioquic's ``reno`` (the floor), the
impaired link with ``reno`` (the baseline: aioquic's default), and the impaired link with the validators'
``cowboy-validator-link`` (``cowboy_node/p2p/peer_congestion.py``). Ratios are against the baseline.

Usage: python bench/p2p_lossy_link.py [--seconds 20] [--delay-ms 100] [--jitter-ms 50] [--loss 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.observability.logging import configure_logging
from cowboy_node.p2p import peer_congestion
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from tests.e2e.udp_proxy import UdpLink
from tests.unit.node.sync_chain import network

CH_CONSENSUS, CH_BLOCKS = 0, 1
"""The peer layer's consensus and blocks channels (``docs/consensus.md``, "Peer channels")."""
VOTE = struct.Struct(">d")


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1) if s else 0.0


async def one_run(args: argparse.Namespace, congestion: str, impaired: bool, tmp: Path) -> dict[str, Any]:
    net_g = network()
    keys = [v.ed25519_public_key for v in net_g.genesis.validators]
    ports = []
    for _ in range(2):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
    links = [UdpLink(0, ("127.0.0.1", ports[1]), name="link-0-1"), UdpLink(0, ("127.0.0.1", ports[0]), name="link-1-0")]
    if impaired:
        for n, link in enumerate(links):
            link.impair(args.delay_ms, args.jitter_ms, args.loss, rng_seed=1000 + n)
    latencies: list[float] = []
    body_bytes = [0]
    measuring = [False]

    def on_message(sender: int, channel: int, payload: bytes) -> None:
        if not measuring[0]:
            return
        if channel == CH_CONSENSUS:
            latencies.append((time.perf_counter() - VOTE.unpack_from(payload)[0]) * 1000)
        elif channel == CH_BLOCKS:
            body_bytes[0] += len(payload)

    limits = PeerLimits(congestion_control=congestion)
    nets = [PeerNetwork(me=i, ed25519_seed=net_g.validator_keys[i].ed25519_seed, listen_host="127.0.0.1",
                        listen_port=ports[i], peers=[PeerInfo(1 - i, keys[1 - i], "127.0.0.1", links[i].port)],
                        validator_keys=keys, network_id=net_g.genesis.hash(), cert_path=tmp / f"{congestion}{i}.crt",
                        key_path=tmp / f"{congestion}{i}.key", on_message=on_message, limits=limits)
            for i in range(2)]
    try:
        for n in nets:
            await n.start()
        deadline = time.monotonic() + 60
        while not all(n.connected() for n in nets):
            if time.monotonic() > deadline:
                raise RuntimeError("the validators did not connect")
            await asyncio.sleep(0.05)
        body = bytes(args.body_bytes)
        measuring[0] = True
        t0 = time.perf_counter()
        sent_votes = sent_bodies = 0
        while time.perf_counter() - t0 < args.seconds:
            nets[0].send(1, CH_CONSENSUS, VOTE.pack(time.perf_counter()) + bytes(192))
            sent_votes += 1
            if sent_votes % 2 == 0:
                nets[0].send(1, CH_BLOCKS, body)
                sent_bodies += 1
            await asyncio.sleep(0.05)
        measuring[0] = False
        wall = time.perf_counter() - t0
        dropped = sum(link.dropped for link in links)
    finally:
        for n in nets:
            await n.stop()
        for link in links:
            link.close()
    return {"congestion": congestion, "impaired": impaired, "votes_sent": sent_votes, "votes_delivered": len(latencies),
            "vote_latency_ms": {"p50": _pct(latencies, 0.5), "p99": _pct(latencies, 0.99),
                                "max": round(max(latencies, default=0.0), 1)},
            "body_kb_per_s_offered": round(sent_bodies * len(body) / wall / 1000, 1),
            "body_kb_per_s_delivered": round(body_bytes[0] / wall / 1000, 1), "datagrams_dropped": dropped}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="p2p-lossy-") as d:
        tmp = Path(d)
        clean = await one_run(args, "reno", False, tmp)
        baseline = await one_run(args, "reno", True, tmp)
        ours = await one_run(args, peer_congestion.NAME, True, tmp)

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 2) if b else None

    return {"bench": "p2p_lossy_link", "seconds": args.seconds, "delay_ms": args.delay_ms,
            "jitter_ms": args.jitter_ms, "loss": args.loss, "body_bytes": args.body_bytes,
            "clean_reno": clean, "impaired_reno_baseline": baseline, "impaired_validator_link": ours,
            "ratio_vote_p50_to_baseline": ratio(ours["vote_latency_ms"]["p50"], baseline["vote_latency_ms"]["p50"]),
            "ratio_vote_p99_to_baseline": ratio(ours["vote_latency_ms"]["p99"], baseline["vote_latency_ms"]["p99"]),
            "ratio_body_throughput_to_baseline": ratio(ours["body_kb_per_s_delivered"],
                                                       baseline["body_kb_per_s_delivered"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--jitter-ms", type=float, default=50.0)
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--body-bytes", type=int, default=12_000, help="one body every 100 ms (120 KB/s by default)")
    args = ap.parse_args()
    configure_logging("console", "error")
    print(json.dumps(asyncio.run(main_async(args)), indent=1))


if __name__ == "__main__":
    main()
