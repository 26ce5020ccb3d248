"""Validator links on an impaired path, QUIC and TCP alike: vote latency and body throughput (prints JSON).

``bench/p2p_lossy_link.py`` impairs the path with a userland UDP relay, which cannot carry the TCP link
(``cowboy_node/p2p/peer_tcp.py``). This bench impairs an IP path instead, between two network namespaces of its
own (10.213.0.1/24 in ``a`` ↔ 10.213.0.2/24 in ``b``), each way: ``--delay-ms`` ± ``--jitter-ms`` (uniform, so
it reorders, as the relay does) and ``--loss`` of the packets dropped. ``--path`` picks how:

- ``netem``: a veth pair with ``tc qdisc add dev <veth> root netem delay <D>ms <J>ms loss <L>%`` on both ends
  (none when clean). Both ends have ``gso_max_segs 1``, so netem drops one MSS-sized segment, not a 64 KB burst.
- ``tun``: a TUN device in each namespace, both held by this process, whose thread carries every IP packet across
  with netem's model (seeded per direction). Clean, it passes packets on at once. For kernels without
  ``sch_netem``; ``auto`` (the default) takes netem when ``tc`` can add it, else this.

The TCP link uses the kernel's congestion control: ``--tcp-cc`` (default ``cubic``), set on each link socket with
``TCP_CONGESTION`` as it connects (a new namespace inherits the host's default and may not pick a restricted one
with the sysctl); the JSON reports what the sockets use and the sender's TCP retransmissions.

The traffic and the measurement are ``p2p_lossy_link.py``'s: validator 0 (the sender, in ``a``) sends validator 1
(the receiver, in ``b``) a block body of ``--body-bytes`` every 100 ms on the blocks channel and a 200-byte vote
every 50 ms on the consensus channel, whose first 8 bytes are the ``time.perf_counter()`` at send. CLOCK_MONOTONIC
is shared across network namespaces, so the receiver, another process, computes each vote's one-way latency from
it (p50/p99/max; a vote waits behind bodies in the link's single stream) and counts the body bytes that arrive
within the sender's ``--seconds`` window. Each validator is a ``PeerNetwork`` in a subprocess of this script
(``ip netns exec NS python bench/p2p_lossy_netns.py --role sender|receiver ...``) listening on its namespace's
address with the other as its only peer; each prints one JSON line that the parent collects.

Six runs per invocation, fresh processes each: for each configuration — ``quic-reno`` (aioquic's ``reno``, the
baseline), ``quic-validator-link`` (``PeerLimits()``: ``cowboy_node/p2p/peer_congestion.py``) and ``tcp``
(``PeerLimits(transport="tcp")``) — a clean run and an impaired run. Ratios are each impaired configuration's
against impaired ``quic-reno``. Needs root and ``ip`` (and ``tc`` for netem); the namespaces are always deleted.

Usage: sudo .venv/bin/python bench/p2p_lossy_netns.py [--seconds 20] [--delay-ms 100] [--jitter-ms 50]
       [--loss 0.05] [--path auto|netem|tun]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import heapq
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.observability.logging import configure_logging
from cowboy_node.p2p import peer_tcp
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from tests.unit.node.sync_chain import network

CH_CONSENSUS, CH_BLOCKS = 0, 1
"""The peer layer's consensus and blocks channels (``docs/consensus.md``, "Peer channels")."""
STAMP = struct.Struct(">dd")
"""A vote's first 16 bytes: its send time and the sender's window start (both ``time.perf_counter()``)."""
WINDOW = struct.Struct(">d")
"""A body's first 8 bytes: the sender's window start."""
CONFIGS: dict[str, PeerLimits] = {"quic-reno": PeerLimits(congestion_control="reno"),
                                  "quic-validator-link": PeerLimits(), "tcp": PeerLimits(transport="tcp")}
ADDRS = ("10.213.0.1", "10.213.0.2")
PORT = 9710
CONNECT_TIMEOUT_S = 60.0
SLACK_S = 40.0
"""Per run, beyond ``--seconds`` and the connect timeout: process start-up, the sender's linger, shutdown."""


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1) if s else 0.0


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# --- the validators (children, inside a namespace) -----------------------------------------------------------


def _peer_network(args: argparse.Namespace, on_message: Any) -> PeerNetwork:
    net_g = network()
    keys = [v.ed25519_public_key for v in net_g.genesis.validators]
    me = 0 if args.role == "sender" else 1
    tmp = Path(args.tmp)
    return PeerNetwork(me=me, ed25519_seed=net_g.validator_keys[me].ed25519_seed, listen_host=ADDRS[me],
                       listen_port=PORT, peers=[PeerInfo(1 - me, keys[1 - me], ADDRS[1 - me], PORT)],
                       validator_keys=keys, network_id=net_g.genesis.hash(), cert_path=tmp / f"{me}.crt",
                       key_path=tmp / f"{me}.key", on_message=on_message, limits=CONFIGS[args.config])


async def _wait_connected(net: PeerNetwork) -> float:
    t = time.perf_counter()
    while not net.connected():
        if time.perf_counter() - t > CONNECT_TIMEOUT_S:
            raise RuntimeError("the validators did not connect")
        await asyncio.sleep(0.05)
    return round(time.perf_counter() - t, 2)


async def sender(args: argparse.Namespace) -> dict[str, Any]:
    net = _peer_network(args, lambda sender, channel, payload: None)
    await net.start()
    try:
        connect_s = await _wait_connected(net)
        await asyncio.sleep(0.5)  # let the receiver's own dial settle as well
        t0 = time.perf_counter()
        body = WINDOW.pack(t0) + bytes(args.body_bytes - WINDOW.size)
        sent_votes = sent_bodies = refused = 0
        while time.perf_counter() - t0 < args.seconds:
            refused += not net.send(1, CH_CONSENSUS, STAMP.pack(time.perf_counter(), t0) + bytes(200 - STAMP.size))
            sent_votes += 1
            if sent_votes % 2 == 0:
                refused += not net.send(1, CH_BLOCKS, body)
                sent_bodies += 1
            await asyncio.sleep(0.05)
        wall = time.perf_counter() - t0
        await asyncio.sleep(1.5)  # the receiver's window closes at t0 + seconds; do not end the link before it
    finally:
        await net.stop()
    return {"role": "sender", "connect_s": connect_s, "votes_sent": sent_votes, "bodies_sent": sent_bodies,
            "sends_refused": refused, "wall_s": round(wall, 3),
            "body_kb_per_s_offered": round(sent_bodies * len(body) / wall / 1000, 1)}


async def receiver(args: argparse.Namespace) -> dict[str, Any]:
    latencies: list[float] = []
    body_bytes = [0]
    window: list[float] = []
    """The sender's window start, from the first message."""

    def on_message(sender: int, channel: int, payload: bytes) -> None:
        now = time.perf_counter()
        if channel == CH_CONSENSUS:
            sent, t0 = STAMP.unpack_from(payload)
        elif channel == CH_BLOCKS:
            sent, t0 = None, WINDOW.unpack_from(payload)[0]
        else:
            return
        if not window:
            window.append(t0)
        if now > window[0] + args.seconds:
            return
        if sent is not None:
            latencies.append((now - sent) * 1000)
        else:
            body_bytes[0] += len(payload)

    net = _peer_network(args, on_message)
    await net.start()
    try:
        connect_s = await _wait_connected(net)
        deadline = time.perf_counter() + CONNECT_TIMEOUT_S
        while not window:
            if time.perf_counter() > deadline:
                raise RuntimeError("no message from the sender")
            await asyncio.sleep(0.05)
        await asyncio.sleep(max(0.0, window[0] + args.seconds - time.perf_counter()) + 0.05)
    finally:
        await net.stop()
    return {"role": "receiver", "connect_s": connect_s, "votes_delivered": len(latencies),
            "vote_latency_ms": {"p50": _pct(latencies, 0.5), "p99": _pct(latencies, 0.99),
                                "max": round(max(latencies, default=0.0), 1)},
            "body_kb_per_s_delivered": round(body_bytes[0] / args.seconds / 1000, 1)}


def _set_tcp_cc(name: str) -> set[str]:
    """Make every TCP link socket of this process use congestion control ``name`` from its first byte; the
    returned set fills with what each socket reports using."""
    seen: set[str] = set()
    original = peer_tcp.TcpPeerProtocol.connection_made

    def connection_made(self: peer_tcp.TcpPeerProtocol, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
            seen.add(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode())
        original(self, transport)

    peer_tcp.TcpPeerProtocol.connection_made = connection_made  # type: ignore[method-assign]
    return seen


def child(args: argparse.Namespace) -> None:
    configure_logging("console", "error")
    seen = _set_tcp_cc(args.tcp_cc) if CONFIGS[args.config].transport == "tcp" else None
    try:
        result = asyncio.run(sender(args) if args.role == "sender" else receiver(args))
        if seen is not None:
            result["tcp_cc"] = sorted(seen)
        _emit(result)
    except Exception as e:  # reported to the parent, which fails the run
        _emit({"role": args.role, "error": f"{type(e).__name__}: {e}"})
        sys.exit(1)


# --- the parent: namespaces, netem, the six runs ---------------------------------------------------------------


def _sh(*cmd: str, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
    return r.stdout


class Namespaces:
    """Two namespaces ``a`` and ``b`` with a path between them (a subclass's); :meth:`close` deletes them, and with
    them every device this created."""

    kind = ""

    def __init__(self) -> None:
        pid = os.getpid()
        self.ns = (f"cwb-lossy-a-{pid}", f"cwb-lossy-b-{pid}")
        self.dev = (f"cwla{pid}", f"cwlb{pid}")
        self.created: list[str] = []
        self.default_tcp_cc = ""

    def create(self) -> None:
        for ns in self.ns:
            _sh("ip", "netns", "add", ns)
            self.created.append(ns)
        self.make_devices()
        for ns, dev, addr in zip(self.ns, self.dev, ADDRS, strict=True):
            self.ip(ns, "ip", "addr", "add", f"{addr}/24", "dev", dev)
            self.ip(ns, "ip", "link", "set", dev, "up")
            self.ip(ns, "ip", "link", "set", "lo", "up")
        self.default_tcp_cc = self.ip(self.ns[0], "sysctl", "-n", "net.ipv4.tcp_congestion_control").strip()

    def make_devices(self) -> None:
        raise NotImplementedError

    @staticmethod
    def ip(ns: str, *cmd: str, check: bool = True) -> str:
        return _sh("ip", "netns", "exec", ns, *cmd, check=check)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def impair(self, args: argparse.Namespace) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """Start counting :meth:`stats` afresh (where the path can)."""

    def stats(self) -> list[dict[str, int]] | None:
        """Per direction (a→b, b→a): packets (and, where known, IP bytes) passed on and dropped, since
        :meth:`reset` or :meth:`impair`; None where the path cannot tell."""
        raise NotImplementedError

    def tcp_retrans(self) -> int:
        """TCP segments retransmitted in namespace a (the sender's) so far."""
        snmp = self.ip(self.ns[0], "cat", "/proc/net/snmp")
        lines = [ln.split() for ln in snmp.splitlines() if ln.startswith("Tcp:")]
        return int(lines[1][lines[0].index("RetransSegs")])

    def close(self) -> None:
        for ns in self.created:
            _sh("ip", "netns", "del", ns, check=False)
        self.created.clear()


class VethNetem(Namespaces):
    """A veth pair, ``tc netem`` on both ends when impaired (no qdisc when clean). Both ends have
    ``gso_max_segs 1``, so netem sees (and drops) one MSS-sized segment per skb, not a 64 KB TSO/GSO burst."""

    kind = "veth+netem"

    def make_devices(self) -> None:
        _sh("ip", "link", "add", self.dev[0], "netns", self.ns[0], "gso_max_segs", "1", "type", "veth",
            "peer", "name", self.dev[1], "netns", self.ns[1], "gso_max_segs", "1")

    def describe(self) -> dict[str, Any]:
        segs = []
        for ns, dev in zip(self.ns, self.dev, strict=True):
            words = self.ip(ns, "ip", "-d", "link", "show", "dev", dev).split()
            segs.append(int(words[words.index("gso_max_segs") + 1]) if "gso_max_segs" in words else -1)
        return {"kind": self.kind, "veth_gso_max_segs": segs, "clean": "no qdisc"}

    def impair(self, args: argparse.Namespace) -> None:
        for ns, dev in zip(self.ns, self.dev, strict=True):
            self.ip(ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{args.delay_ms:g}ms",
                    f"{args.jitter_ms:g}ms", "loss", f"{args.loss * 100:g}%")

    def clear(self) -> None:
        for ns, dev in zip(self.ns, self.dev, strict=True):
            self.ip(ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)

    def stats(self) -> list[dict[str, int]] | None:
        out = []
        for ns, dev in zip(self.ns, self.dev, strict=True):
            words = self.ip(ns, "tc", "-s", "qdisc", "show", "dev", dev).replace(",", " ").replace("(", " ").split()
            if "netem" not in words:
                return None
            sent = int(words[words.index("pkt") - 1]) if "pkt" in words else -1
            dropped = int(words[words.index("dropped") + 1]) if "dropped" in words else -1
            out.append({"packets_passed": sent, "packets_dropped": dropped})
        return out


TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000


class TunRelay(Namespaces):
    """A TUN device in each namespace, both held by this process, whose thread moves every IP packet from one to
    the other: when impaired it drops each with probability ``--loss`` and delays the rest ``--delay-ms`` ±
    ``--jitter-ms`` (uniform, seeded per direction, so it reorders) — netem's model, in userland, at the IP layer,
    for UDP and TCP alike. Clean, it passes packets on at once. Without ``IFF_VNET_HDR`` the kernel segments TCP to
    the 1500-byte MTU before the device, so a loss is one segment."""

    kind = "tun-relay"

    def __init__(self) -> None:
        super().__init__()
        self.fds: list[int] = []
        self.params = (0.0, 0.0, 0.0)
        """(delay s, jitter s, loss fraction); replaced whole, read by the relay thread."""
        self.counts = [[0, 0, 0], [0, 0, 0]]
        """Per direction: packets passed on, their IP bytes, packets dropped."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def make_devices(self) -> None:
        for ns, dev in zip(self.ns, self.dev, strict=True):
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            self.fds.append(fd)
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
            _sh("ip", "link", "set", dev, "netns", ns)
        self._thread = threading.Thread(target=self._relay, name="tun-relay", daemon=True)
        self._thread.start()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "clean": "tun relay, no delay or loss"}

    def reset(self) -> None:
        self.counts = [[0, 0, 0], [0, 0, 0]]

    def impair(self, args: argparse.Namespace) -> None:
        self.reset()
        self.params = (args.delay_ms / 1000, args.jitter_ms / 1000, args.loss)

    def clear(self) -> None:
        self.params = (0.0, 0.0, 0.0)

    def stats(self) -> list[dict[str, int]] | None:
        return [{"packets_passed": c[0], "ip_bytes_passed": c[1], "packets_dropped": c[2]} for c in self.counts]

    def _relay(self) -> None:
        rngs = [random.Random(1000), random.Random(1001)]
        due: list[tuple[float, int, int, bytes]] = []
        seq = 0
        while not self._stop.is_set():
            timeout = 0.05 if not due else min(0.05, max(0.0, due[0][0] - time.monotonic()))
            readable, _, _ = select.select(self.fds, [], [], timeout)
            for fd in readable:
                side = self.fds.index(fd)
                while True:
                    try:
                        packet = os.read(fd, 65536)
                    except (BlockingIOError, OSError):
                        break
                    delay, jitter, loss = self.params
                    counts, rng = self.counts[side], rngs[side]
                    if loss and rng.random() < loss:
                        counts[2] += 1
                        continue
                    counts[0] += 1
                    counts[1] += len(packet)
                    wait = max(0.0, delay + rng.uniform(-jitter, jitter)) if delay or jitter else 0.0
                    seq += 1
                    heapq.heappush(due, (time.monotonic() + wait, seq, self.fds[1 - side], packet))
            now = time.monotonic()
            while due and due[0][0] <= now:
                _, _, out, packet = heapq.heappop(due)
                with contextlib.suppress(OSError):
                    os.write(out, packet)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        super().close()


def _netem_available() -> bool:
    """Whether the kernel has ``sch_netem`` (tried on ``lo`` of a namespace made and deleted for it)."""
    ns = f"cwb-lossy-probe-{os.getpid()}"
    _sh("ip", "netns", "add", ns)
    try:
        r = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                            "delay", "1ms"], capture_output=True, timeout=30)
        return r.returncode == 0
    finally:
        _sh("ip", "netns", "del", ns, check=False)


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _last_json(text: str, who: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            obj: dict[str, Any] = json.loads(line)
            return obj
    raise RuntimeError(f"{who} printed no JSON")


def one_run(args: argparse.Namespace, nss: Namespaces, config: str, impaired: bool, tmp: Path,
            deadline: float) -> dict[str, Any]:
    run_tmp = tmp / f"{config}-{'impaired' if impaired else 'clean'}"
    run_tmp.mkdir()
    nss.reset()
    if impaired:
        nss.impair(args)
    retrans0 = nss.tcp_retrans()
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for role, ns in (("receiver", nss.ns[1]), ("sender", nss.ns[0])):
            procs[role] = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, str(Path(__file__).resolve()), "--role", role,
                 "--config", config, "--seconds", str(args.seconds), "--body-bytes", str(args.body_bytes),
                 "--tmp", str(run_tmp), "--tcp-cc", args.tcp_cc],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        run_deadline = min(time.monotonic() + args.seconds + CONNECT_TIMEOUT_S + SLACK_S, deadline)
        results: dict[str, dict[str, Any]] = {}
        for role, proc in procs.items():
            try:
                out, err = proc.communicate(timeout=max(1.0, run_deadline - time.monotonic()))
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"{config} {role}: timed out") from e
            results[role] = _last_json(out, f"{config} {role}") if out.strip() else {"error": err.strip()[-2000:]}
            if "error" in results[role]:
                raise RuntimeError(f"{config} {role}: {results[role]['error']}")
        path = nss.stats()
        retrans = nss.tcp_retrans() - retrans0
    finally:
        for proc in procs.values():
            _kill(proc)
        if impaired:
            nss.clear()
    s, r = results["sender"], results["receiver"]
    res: dict[str, Any] = {"config": config, "impaired": impaired, "votes_sent": s["votes_sent"],
                           "votes_delivered": r["votes_delivered"], "vote_latency_ms": r["vote_latency_ms"],
                           "body_kb_per_s_offered": s["body_kb_per_s_offered"],
                           "body_kb_per_s_delivered": r["body_kb_per_s_delivered"], "sends_refused": s["sends_refused"],
                           "connect_s": {"sender": s["connect_s"], "receiver": r["connect_s"]}}
    if path is not None:
        res["path_packets"] = {"a_to_b": path[0], "b_to_a": path[1]}
    if config == "tcp":
        res["tcp_retrans_segs_sender"] = retrans
        res["tcp_cc_in_use"] = {"sender": s.get("tcp_cc"), "receiver": r.get("tcp_cc")}
    return res


def parent(args: argparse.Namespace) -> dict[str, Any]:
    if os.geteuid() != 0:
        sys.exit("p2p_lossy_netns: must run as root (it creates network namespaces and netem qdiscs)")
    if shutil.which("ip") is None:
        sys.exit("p2p_lossy_netns: ip (iproute2) not found")
    if args.path == "auto":
        args.path = "netem" if shutil.which("tc") is not None and _netem_available() else "tun"
    elif args.path == "netem" and shutil.which("tc") is None:
        sys.exit("p2p_lossy_netns: tc (iproute2) not found; --path tun needs no tc")
    if args.path == "tun" and not os.path.exists("/dev/net/tun"):
        sys.exit("p2p_lossy_netns: /dev/net/tun is missing (and so, or netem, is needed)")
    if args.body_bytes < WINDOW.size:
        sys.exit("p2p_lossy_netns: --body-bytes must be at least 8")
    deadline = time.monotonic() + 6 * (args.seconds + CONNECT_TIMEOUT_S + SLACK_S)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    nss: Namespaces = VethNetem() if args.path == "netem" else TunRelay()
    runs: dict[str, dict[str, Any]] = {}
    try:
        nss.create()
        with tempfile.TemporaryDirectory(prefix="p2p-lossy-netns-") as d:
            for config in CONFIGS:
                for impaired in (False, True):
                    runs[f"{'impaired' if impaired else 'clean'}_{config}"] = one_run(
                        args, nss, config, impaired, Path(d), deadline)
        path = nss.describe()
    finally:
        nss.close()
    base = runs["impaired_quic-reno"]

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 2) if b else None

    ratios = {config: {"vote_p50": ratio(runs[f"impaired_{config}"]["vote_latency_ms"]["p50"],
                                         base["vote_latency_ms"]["p50"]),
                       "vote_p99": ratio(runs[f"impaired_{config}"]["vote_latency_ms"]["p99"],
                                         base["vote_latency_ms"]["p99"]),
                       "body_throughput": ratio(runs[f"impaired_{config}"]["body_kb_per_s_delivered"],
                                                base["body_kb_per_s_delivered"])}
              for config in CONFIGS if config != "quic-reno"}
    return {"bench": "p2p_lossy_netns", "seconds": args.seconds, "delay_ms": args.delay_ms,
            "jitter_ms": args.jitter_ms, "loss": args.loss, "body_bytes": args.body_bytes, "tcp_cc": args.tcp_cc,
            "namespace_default_tcp_cc": nss.default_tcp_cc, "path": path, "runs": runs,
            "ratio_to_impaired_quic_reno": ratios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--jitter-ms", type=float, default=50.0)
    ap.add_argument("--loss", type=float, default=0.05, help="a fraction, each way")
    ap.add_argument("--body-bytes", type=int, default=12_000, help="one body every 100 ms (120 KB/s by default)")
    ap.add_argument("--tcp-cc", default="cubic", help="the TCP link sockets' congestion control (TCP_CONGESTION)")
    ap.add_argument("--path", choices=("auto", "netem", "tun"), default="auto",
                    help="veth with tc netem, or the TUN relay (auto: netem if the kernel has it)")
    ap.add_argument("--role", choices=("sender", "receiver"), help=argparse.SUPPRESS)
    ap.add_argument("--config", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role is not None:
        child(args)
    else:
        print(json.dumps(parent(args), indent=1))


if __name__ == "__main__":
    main()
