"""``cowboy-node watch TOPIC [filters]``: follow the chain over ``GET /subscribe`` (docs/api.md, Subscriptions).

Prints one JSON message per line (the node's ``block`` / ``txs`` / ``events`` / ``jobs`` messages). When the
connection drops — the node restarted, or it dropped this client as a slow consumer — it reconnects with
``from`` = the height after the last message it printed, so nothing is missed and nothing printed twice
(``--no-resume`` exits 1 instead). ``--count N`` exits 0 after N messages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.parse
from typing import Any

import aiohttp

from cowboy_node.cli.common import SubParsers, add_rpc_flag, address_arg, print_error, tx_hash_arg, uint_arg

RECONNECT_DELAY_S = 1.0
"""Wait before reconnecting."""
MAX_RECONNECTS = 30
"""Reconnections in a row without a message before giving up (exit 1)."""


def subscribe_url(rpc: str, args: argparse.Namespace, from_height: int | None) -> str:
    """The ``ws://…/subscribe?…`` URL of ``args``."""
    q: dict[str, str] = {"topic": args.topic}
    if from_height is not None:
        q["from"] = str(from_height)
    for name in ("sender", "actor"):
        if getattr(args, name) is not None:
            q[name] = "0x" + getattr(args, name).hex()
    if args.hash is not None:
        q["hash"] = args.hash
    if args.job is not None:
        q["job"] = args.job
    if args.name is not None:
        q["name"] = args.name
    base = rpc.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    return f"{base}/subscribe?{urllib.parse.urlencode(q)}"


async def watch(args: argparse.Namespace) -> int:
    """Print messages until ``--count`` is reached (0) or the stream cannot be resumed (1)."""
    printed, nxt, failures = 0, args.from_height, 0
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.ws_connect(subscribe_url(args.rpc, args, nxt), heartbeat=30,
                                              max_msg_size=64 * 1024 * 1024) as ws:
                    async for msg in ws:
                        if msg.type != aiohttp.WSMsgType.TEXT:
                            break
                        doc: dict[str, Any] = json.loads(msg.data)
                        kind = doc.get("type")
                        if kind == "subscribed":
                            continue
                        if kind == "dropped":
                            print_error(f"dropped by the node ({doc.get('reason')}); "
                                        f"resuming from {doc.get('resume_from')}")
                            nxt = int(doc["resume_from"])
                            break
                        print(json.dumps(doc), flush=True)
                        failures = 0
                        printed += 1
                        nxt = int(doc["height"]) + 1
                        if args.count is not None and printed >= args.count:
                            return 0
            except aiohttp.WSServerHandshakeError as e:
                print_error(f"the node refused the subscription: HTTP {e.status} {e.message}")
                return 1
            except (aiohttp.ClientError, OSError) as e:
                print_error(f"connection lost: {e}")
            if args.no_resume:
                return 1
            failures += 1
            if failures > MAX_RECONNECTS:
                print_error("giving up after repeated reconnects")
                return 1
            await asyncio.sleep(RECONNECT_DELAY_S)


def cmd_watch(args: argparse.Namespace) -> int:
    """``cowboy-node watch``."""
    try:
        return asyncio.run(watch(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 0


def register(subparsers: SubParsers) -> None:
    """Add ``watch`` to ``subparsers``."""
    w = subparsers.add_parser("watch", help="follow blocks, transactions, actor events or jobs as they commit")
    w.add_argument("topic", choices=("blocks", "txs", "events", "jobs"))
    w.add_argument("--from", dest="from_height", type=uint_arg(2**64 - 1, "u64"), default=None, metavar="HEIGHT",
                   help="start at this height (replayed from the node's store), then follow live")
    w.add_argument("--sender", type=address_arg, default=None, metavar="ADDRESS", help="txs: this sender's only")
    w.add_argument("--hash", type=tx_hash_arg, default=None, metavar="HASH", help="txs: this transaction only")
    w.add_argument("--actor", type=address_arg, default=None, metavar="ADDRESS", help="events: the emitter (required)")
    w.add_argument("--name", default=None, metavar="NAME", help="events: this event name only")
    w.add_argument("--job", type=tx_hash_arg, default=None, metavar="JOB_ID", help="jobs: this job only")
    w.add_argument("--count", type=uint_arg(2**32, "count"), default=None, metavar="N", help="exit after N messages")
    w.add_argument("--no-resume", action="store_true", help="exit 1 when the stream drops instead of resuming")
    add_rpc_flag(w)
    w.set_defaults(func=cmd_watch)
