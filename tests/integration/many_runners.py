"""Many runner sessions in one child process: ``N`` real :class:`~cowboy_runner.link.Link` objects (QUIC, CIP-11
handshake, HeartbeatPing, §11.3 reconnect backoff) against one validator, each bound to its own loopback source
address so per-IP admission limits see ``N`` peers, as they would in production.

Run as ``python -m tests.integration.many_runners --port P --chain-id C --validator HEX --count N ...``. Protocol
(one JSON object per line):

* stdout ``{"event": "ready", "count": N}`` once every link is started; then, whenever a figure changes (sampled
  every 20 ms), ``{"t": <time.monotonic()>, "auth": a, "fresh": f, "connects": c}``: ``a`` links currently
  authenticated, ``f`` of them on a session authenticated after the last ``mark``, ``c`` QUIC connections opened
  in total. ``time.monotonic`` is CLOCK_MONOTONIC, shared by every process on Linux, so the parent can compare.
* stdin ``mark``: remember each link's authentication count (``fresh`` restarts from 0); answered
  ``{"event": "marked", "t": ...}``. End of stdin: every link says Goodbye and the process exits.

The head height sent in pings is advisory (CIP-11 §6.2); it is refreshed from the node's ``/status`` once a second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import sys
import time
from typing import Any

import aiohttp

from cowboy_protocol.transport.frames import JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_runner.link import Link, LinkConfig

KEY_BASE = 0x7E57_0000
"""First runner private key (as an integer); runner ``i`` uses ``KEY_BASE + i``."""
FIRST_HOST = "127.0.0.2"
"""Source address of runner 0; runner ``i`` binds ``FIRST_HOST + i`` (all of 127.0.0.0/8 is loopback on Linux)."""
SAMPLE_S = 0.02
"""How often the figures are sampled."""


def runner_key(i: int) -> bytes:
    """Runner ``i``'s secp256k1 private key (deterministic, valid for any ``i`` used here)."""
    return (KEY_BASE + i).to_bytes(32, "big")


def runner_host(i: int) -> str:
    """Runner ``i``'s loopback source address."""
    return str(ipaddress.IPv4Address(FIRST_HOST) + i)


def emit(doc: dict[str, Any]) -> None:
    """One JSON line on stdout."""
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


async def _ignore(link: Link, assignment: JobAssignment) -> None:
    """No jobs are submitted in the reconnect test."""


async def _head_loop(rpc: str, head: list[int]) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError, KeyError):
                async with http.get(rpc + "/health") as r:
                    head[0] = max(head[0], int((await r.json())["height"]))
            await asyncio.sleep(1.0)


async def _stdin_lines() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def main(args: argparse.Namespace) -> None:
    """Start the links, report, obey ``mark``, stop at end of stdin."""
    head = [0]
    vset = (bytes.fromhex(args.validator),)
    links = [Link(SessionKey(runner_key(i)),
                  LinkConfig(host=args.host, port=args.port, chain_id=args.chain_id, validator_set=vset,
                             expected_validator=vset[0], ping_interval_s=args.ping_interval,
                             local_host=None if args.shared_source else runner_host(i)),
                  height=lambda: head[0], on_assignment=_ignore)
             for i in range(args.count)]
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(lk.run()) for lk in links]
    tasks.append(loop.create_task(_head_loop(args.rpc, head)))
    baseline = [0] * len(links)
    emit({"event": "ready", "count": len(links)})

    async def report() -> None:
        last: tuple[int, int, int] | None = None
        while True:
            auth = fresh = connects = 0
            for i, lk in enumerate(links):
                connects += lk.connects
                if lk.authenticated.is_set():
                    auth += 1
                    fresh += lk.authentications > baseline[i]
            if (auth, fresh, connects) != last:
                last = (auth, fresh, connects)
                emit({"t": time.monotonic(), "auth": auth, "fresh": fresh, "connects": connects})
            await asyncio.sleep(SAMPLE_S)

    tasks.append(loop.create_task(report()))
    stdin = await _stdin_lines()
    while line := (await stdin.readline()).strip():
        if line == b"mark":
            baseline = [lk.authentications for lk in links]
            emit({"event": "marked", "t": time.monotonic()})
    for lk in links:
        lk.stop()
    await asyncio.sleep(0.3)  # let the Goodbyes leave
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="many CIP-11 runner links in one process")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chain-id", required=True)
    parser.add_argument("--validator", required=True, help="validator Ed25519 public key, hex")
    parser.add_argument("--rpc", required=True, help="node RPC base URL (head height)")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--ping-interval", type=float, default=1.0)
    parser.add_argument("--shared-source", action="store_true",
                        help="every link on the wildcard source address (measures the per-IP Hello limit)")
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(main(parser.parse_args()))
