"""QUIC echo benchmark (prints JSON): server CPU per ping→signed-pong exchange over N connections.

Two servers answer the same traffic, each in its own child process so that only the server's CPU is
counted (``time.process_time`` of the child between "start" and "stop"):

* ``raw`` — the baseline: a bare aioquic ``QuicConnectionProtocol`` that reassembles length-prefixed
  pings on stream 0 and answers each with an Ed25519 signature over the ping bytes, spliced into a
  pre-encoded HeartbeatPong (no CBOR work, no limits, no channel binding).
* ``adapter`` — ``cowboy_protocol.quic.adapter``: admission checks, channel binding, strict frame decoding
  of the HeartbeatPing, a handler that signs and sends a ``HeartbeatPong`` (encode + self-check).

Neither verifies the ping's secp256k1 signature: that is session work, measured by later benchmarks
against this baseline. The client (this process) opens N connections with the adapter's ``connect`` and
runs ``--rounds`` rounds: every connection sends one HeartbeatPing, then all pongs are awaited.
``ms_per_exchange`` = server CPU / (N × rounds); ``ratio`` = adapter / raw in the same run.

DESIGN.md §4 "Transport" measured ~0.4 ms per exchange for the raw server (1,000 connections ≈ 41% of
a core at 1 Hz).

Usage: python bench/quic_echo.py [--connections 50,200] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent, StreamDataReceived
from nacl.signing import SigningKey

from cowboy_protocol.quic.adapter import ALPN, ClientConnection, FrameConnection, connect, start_server
from cowboy_protocol.quic.certs import generate_self_signed, load_certificate
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.transport.frames import Frame, HeartbeatPing, HeartbeatPong, encode_frame

SIGNER = SigningKey(bytes(range(32)))
PONG_TEMPLATE = encode_frame(HeartbeatPong(0, True, 0, bytes(64)))
"""The signature is the last CBOR item (map key 3), so a pong is ``PONG_TEMPLATE[:-64] + signature``."""


def signed_pongs(buf: bytearray, data: bytes) -> list[bytes]:
    """Append ``data`` to ``buf`` and answer every complete length-prefixed ping in it with the pre-encoded pong
    carrying the ping's signature (the echo both stacks run, here and in ``bench/qh3_echo.py``)."""
    buf += data
    out = []
    while len(buf) >= 4:
        n = int.from_bytes(buf[:4], "big")
        if len(buf) < 4 + n:
            break
        ping = bytes(buf[4:4 + n])
        del buf[:4 + n]
        out.append(PONG_TEMPLATE[:-64] + SIGNER.sign(ping).signature)
    return out


class RawEcho(QuicConnectionProtocol):
    """Baseline server connection: length-prefixed reassembly, sign, reply."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._buf = bytearray()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            for pong in signed_pongs(self._buf, event.data):
                self._quic.send_stream_data(event.stream_id, pong)


class AdapterEcho:
    """Adapter handler: decoded HeartbeatPing in, signed HeartbeatPong out."""

    def __init__(self, conn: FrameConnection) -> None:
        self.conn = conn

    def on_open(self, conn: FrameConnection) -> None:
        conn.mark_authenticated()

    def on_frame(self, frame: Frame) -> None:
        if isinstance(frame, HeartbeatPing):
            msg = frame.nonce.to_bytes(8, "big") + frame.block_height.to_bytes(8, "big") + self.conn.channel_binding
            self.conn.send(HeartbeatPong(frame.nonce, True, frame.block_height, SIGNER.sign(msg).signature))

    def on_close(self, reason: str) -> None:
        pass


async def run_server(kind: str) -> None:
    """Child process: serve, print the port, report CPU between "start" and "stop" lines on stdin."""
    cert_pem, key_pem = generate_self_signed("bench.local")
    if kind == "raw":
        config = QuicConfiguration(is_client=False, alpn_protocols=[ALPN])
        config.certificate, config.private_key = load_certificate(cert_pem, key_pem)
        server = await serve("127.0.0.1", 0, configuration=config, create_protocol=RawEcho)
        port = server._transport.get_extra_info("sockname")[1]  # type: ignore[union-attr]
    else:
        limits = ServerLimits(max_half_open=100_000, retry_threshold=100_000, hello_burst_per_peer=100_000)
        server = await start_server("127.0.0.1", 0, handler_factory=AdapterEcho, limits=limits,
                                    certificate_pem=cert_pem, private_key_pem=key_pem)
        port = server.port
    print(port, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    started = 0.0
    while line := (await reader.readline()).strip():
        if line == b"start":
            started = time.process_time()
            print("ok", flush=True)
        elif line == b"stop":
            print(json.dumps({"cpu_s": time.process_time() - started}), flush=True)
    server.close()


async def exchange(clients: list[ClientConnection], nonce: int) -> None:
    """One round: every connection pings, then every pong is awaited."""
    for c in clients:
        c.send(HeartbeatPing(nonce, nonce, bytes(65)))
    for c in clients:
        pong = await asyncio.wait_for(c.recv(), 30)
        assert isinstance(pong, HeartbeatPong) and len(pong.signature) == 64


async def measure(kind: str, n: int, rounds: int) -> dict[str, float]:
    """Server CPU per exchange for ``kind`` with ``n`` connections."""
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--serve", kind,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        port = int(await proc.stdout.readline())
        clients = [await connect("127.0.0.1", port, idle_timeout_s=120) for _ in range(n)]
        await exchange(clients, 0)  # warm-up: stream 0 opened everywhere
        proc.stdin.write(b"start\n")
        await proc.stdin.drain()
        await proc.stdout.readline()
        t0 = time.perf_counter()
        for r in range(1, rounds + 1):
            await exchange(clients, r)
        wall = time.perf_counter() - t0
        proc.stdin.write(b"stop\n")
        await proc.stdin.drain()
        cpu = json.loads(await proc.stdout.readline())["cpu_s"]
        for c in clients:
            c.abort()
    finally:
        proc.stdin.close()
        await proc.wait()
    exchanges = n * rounds
    return {"server_cpu_s": round(cpu, 4), "wall_s": round(wall, 4),
            "ms_per_exchange": round(1000 * cpu / exchanges, 4), "exchanges": exchanges}


async def main(sizes: list[int], rounds: int) -> None:
    results = []
    for n in sizes:
        raw = await measure("raw", n, rounds)
        adapter = await measure("adapter", n, rounds)
        results.append({"connections": n, "raw": raw, "adapter": adapter,
                        "ratio": round(adapter["ms_per_exchange"] / max(raw["ms_per_exchange"], 1e-9), 3)})
    print(json.dumps({"benchmark": "quic_echo", "rounds": rounds, "results": results}, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=["raw", "adapter"], help=argparse.SUPPRESS)
    parser.add_argument("--connections", default="50,200")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(run_server(args.serve))
    else:
        asyncio.run(main([int(x) for x in args.connections.split(",")], args.rounds))
