"""qh3 vs aioquic experiment (prints JSON): server CPU per ping → signed-pong exchange, same echo on both stacks.

The ``raw`` echo server of ``bench/quic_echo.py`` (length-prefixed pings on stream 0, each answered with an
Ed25519 signature spliced into a pre-encoded HeartbeatPong) is run twice, each in its own child process, over
the same client traffic (this process, ``--connections`` qh3 client connections, ``--rounds`` rounds of one
ping per connection then every pong awaited): once on aioquic (the project's stack, the baseline) and once on
``qh3`` — the aioquic fork whose packet protection, header parsing and TLS run in Rust. qh3 is not a project
dependency: give the directory it was installed into with ``--qh3-path`` (``pip install --target DIR qh3``).
``ratio`` = qh3 / aioquic per exchange, measured in the same run; windows alternate aioquic, qh3, qh3, aioquic
to cancel drift on the shared machine.

The client is qh3's for both servers: qh3 2.1.0's server logs ``packet builder capacity exhausted`` from its
Rust core and drops connections of aioquic's client (the project's ``connect``), while qh3's client works with
both. Only the bare echo is ported: the project's adapter (``cowboy_protocol.quic.adapter``: caps, Retry,
stateless reset, and the channel binding, which hooks aioquic's Python TLS key schedule — qh3's TLS is in Rust)
does not run on qh3, so this measures what a port could gain at most.

Usage: python bench/qh3_echo.py --qh3-path /tmp/qh3lib [--connections 200] [--rounds 20] [--pairs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.quic_echo import signed_pongs
from cowboy_protocol.quic.adapter import ALPN
from cowboy_protocol.quic.certs import generate_self_signed
from cowboy_protocol.transport.frames import HeartbeatPing, encode_frame


class Clients:
    """``n`` qh3 client connections; :meth:`exchange` pings all, then awaits every pong."""

    def __init__(self, qh3_path: str) -> None:
        sys.path.insert(0, qh3_path)
        from qh3.asyncio import QuicConnectionProtocol, connect
        from qh3.quic.configuration import QuicConfiguration
        from qh3.quic.events import StreamDataReceived

        class Pinger(QuicConnectionProtocol):  # type: ignore[misc]
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, **kwargs)
                self.buf = bytearray()
                self.waiter: asyncio.Future[None] | None = None

            def ping(self, nonce: int) -> asyncio.Future[None]:
                self.waiter = asyncio.get_running_loop().create_future()
                self._quic.send_stream_data(0, encode_frame(HeartbeatPing(nonce, nonce, bytes(65))))
                self.transmit()
                return self.waiter

            def quic_event_received(self, event: object) -> None:
                if isinstance(event, StreamDataReceived):
                    self.buf += event.data
                    if len(self.buf) >= 4 and len(self.buf) >= 4 + int.from_bytes(self.buf[:4], "big"):
                        del self.buf[:4 + int.from_bytes(self.buf[:4], "big")]
                        if self.waiter is not None and not self.waiter.done():
                            self.waiter.set_result(None)

        self.connect, self.config_cls, self.protocol = connect, QuicConfiguration, Pinger
        self.stack = contextlib.AsyncExitStack()
        self.conns: list[Any] = []

    async def open(self, port: int, n: int) -> None:
        """Connect ``n`` clients."""
        for _ in range(n):
            config = self.config_cls(is_client=True, alpn_protocols=[ALPN], verify_mode=0, idle_timeout=120)
            self.conns.append(await self.stack.enter_async_context(
                self.connect("127.0.0.1", port, configuration=config, create_protocol=self.protocol)))

    async def exchange(self, nonce: int) -> None:
        """One round."""
        await asyncio.wait_for(asyncio.gather(*[c.ping(nonce) for c in self.conns]), 30)

    async def close(self) -> None:
        """Close every connection."""
        await self.stack.aclose()


async def serve_qh3(qh3_path: str) -> Any:
    """The raw echo on qh3 (same logic as ``quic_echo.RawEcho``)."""
    sys.path.insert(0, qh3_path)
    from qh3.asyncio import QuicConnectionProtocol, serve
    from qh3.quic.configuration import QuicConfiguration
    from qh3.quic.events import StreamDataReceived

    class Qh3Echo(QuicConnectionProtocol):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self._buf = bytearray()

        def quic_event_received(self, event: object) -> None:
            if isinstance(event, StreamDataReceived):
                for pong in signed_pongs(self._buf, event.data):
                    self._quic.send_stream_data(event.stream_id, pong)

    cert_pem, key_pem = generate_self_signed("bench.local")
    config = QuicConfiguration(is_client=False, alpn_protocols=[ALPN])
    config.load_cert_chain(cert_pem, key_pem)
    return await serve("127.0.0.1", 0, configuration=config, create_protocol=Qh3Echo)


async def serve_aioquic() -> Any:
    """The raw echo on aioquic (``quic_echo.RawEcho``)."""
    from aioquic.asyncio.server import serve
    from aioquic.quic.configuration import QuicConfiguration

    from bench.quic_echo import RawEcho
    from cowboy_protocol.quic.certs import load_certificate
    cert_pem, key_pem = generate_self_signed("bench.local")
    config = QuicConfiguration(is_client=False, alpn_protocols=[ALPN])
    config.certificate, config.private_key = load_certificate(cert_pem, key_pem)
    return await serve("127.0.0.1", 0, configuration=config, create_protocol=RawEcho)


async def run_server(kind: str, qh3_path: str) -> None:
    """Child: serve, print the port, report CPU between "start" and "stop" lines on stdin."""
    server = await (serve_qh3(qh3_path) if kind == "qh3" else serve_aioquic())
    print(server._transport.get_extra_info("sockname")[1], flush=True)
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


async def main(n: int, rounds: int, pairs: int, qh3_path: str) -> None:
    """Both servers up; ``pairs`` ABBA window pairs; per-exchange CPU and the ratio."""
    procs: dict[str, asyncio.subprocess.Process] = {}
    clients: dict[str, Clients] = {}
    try:
        for kind in ("aioquic", "qh3"):
            procs[kind] = p = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--serve", kind, "--qh3-path", qh3_path,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            assert p.stdout is not None
            port = int(await p.stdout.readline())
            clients[kind] = Clients(qh3_path)
            await clients[kind].open(port, n)
            await clients[kind].exchange(0)
        windows: list[dict[str, float]] = []
        nonce = 1
        for pair in range(pairs):
            got: dict[str, float] = {}
            for kind in (("aioquic", "qh3") if pair % 2 == 0 else ("qh3", "aioquic")):
                p = procs[kind]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(b"start\n")
                await p.stdin.drain()
                await p.stdout.readline()
                for _ in range(rounds):
                    await clients[kind].exchange(nonce)
                    nonce += 1
                p.stdin.write(b"stop\n")
                await p.stdin.drain()
                got[kind] = 1000 * json.loads(await p.stdout.readline())["cpu_s"] / (n * rounds)
            windows.append({"aioquic_ms": round(got["aioquic"], 4), "qh3_ms": round(got["qh3"], 4),
                            "ratio": round(got["qh3"] / max(got["aioquic"], 1e-9), 3)})
    finally:
        for cs in clients.values():
            with contextlib.suppress(Exception):
                await cs.close()
        for p in procs.values():
            if p.stdin is not None:
                p.stdin.close()
            await p.wait()
    print(json.dumps({"benchmark": "qh3_echo", "connections": n, "rounds": rounds, "windows": windows,
                      "median_aioquic_ms_per_exchange": statistics.median(w["aioquic_ms"] for w in windows),
                      "median_qh3_ms_per_exchange": statistics.median(w["qh3_ms"] for w in windows),
                      "ratio_qh3_to_aioquic": statistics.median(w["ratio"] for w in windows)}, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--serve", choices=["aioquic", "qh3"], help=argparse.SUPPRESS)
    parser.add_argument("--qh3-path", required=True, help="directory qh3 was pip-installed into (--target)")
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(run_server(args.serve, args.qh3_path))
    else:
        asyncio.run(main(args.connections, args.rounds, args.pairs, args.qh3_path))
