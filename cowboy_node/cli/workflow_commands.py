"""An actor developer's workflow on the command line: dry runs, ``--gas auto``, events, terminal timers.

- ``cowboy-node call`` (also ``tx call``) and ``tx deploy`` take ``--simulate``: ``POST /simulate`` runs the
  instruction on the head state, with the command's ``--cycles-limit`` (the node accepts at most 10,000,000),
  and nothing is signed or sent. It prints ``{"simulation": …}`` (status,
  error_code, error_message, result, events, cycles_used, cells_used, fee_estimate) and exits 0 if the run
  succeeded, 3 if it failed. Without ``--key`` it runs as ``--from ADDRESS`` (default the zero address).
- ``--gas auto`` on ``tx deploy`` / ``tx call``: the same dry run as the key's address first (with the node's
  largest dry-run limit), then the limits are set from what it used (:func:`auto_limits`); a failed dry run
  exits 3 and sends nothing.
- ``query events --actor ADDR [--topic T] [--from H] [--to H] [--limit N] [--cursor C | --all]``:
  ``GET /events``; ``--all`` follows ``next`` cursors (at most :data:`MAX_PAGES` pages).
- ``query timers`` (in actor_commands) adds the actor's recent terminal timers from
  ``GET /actor/{address}/timers/history``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from typing import Any

from cowboy_node.cli.client_commands import load_key
from cowboy_node.cli.common import (
    EXIT_TX_FAILED,
    UsageError,
    add_rpc_flag,
    address_arg,
    cli_command,
    print_error,
    print_json,
    rpc_client,
    uint_arg,
)
from cowboy_protocol import api_types as api
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import ApiError, RpcClient
from cowboy_protocol.types.instructions import CallActor, DeployActor

GAS_MARGIN_PERMILLE = 1250
"""``--gas auto`` sets each limit to 125% of what the dry run used (state may change before inclusion)..."""
GAS_MARGIN_CYCLES = 10_000
"""...plus this many cycles..."""
GAS_MARGIN_CELLS = 512
"""...and this many cells."""
MAX_PAGES = 100
"""Pages ``query events --all`` follows at most (100 × the page limit events)."""


def auto_limits(simulation: Mapping[str, Any]) -> tuple[int, int]:
    """``(cycles_limit, cells_limit)`` for a transaction whose dry run used what ``simulation`` reports."""
    cycles, cells = int(simulation["cycles_used"]), int(simulation["cells_used"])
    return (math.ceil(cycles * GAS_MARGIN_PERMILLE / 1000) + GAS_MARGIN_CYCLES,
            math.ceil(cells * GAS_MARGIN_PERMILLE / 1000) + GAS_MARGIN_CELLS)


def simulation_body(ins: CallActor | DeployActor, sender: bytes | None, cycles_limit: int | None) -> dict[str, Any]:
    """The ``POST /simulate`` body of ``ins``."""
    body: dict[str, Any] = {}
    if isinstance(ins, CallActor):
        body["call"] = {"actor": to_checksum_address(ins.actor), "handler": ins.handler,
                        "payload": "0x" + ins.payload.hex()}
    else:
        body["deploy"] = {"source": ins.source, "salt": "0x" + ins.salt.hex(), "init_handler": ins.init_handler,
                          "init_payload": "0x" + ins.init_payload.hex()}
    if sender is not None:
        body["sender"] = to_checksum_address(sender)
    if cycles_limit is not None:
        body["cycles_limit"] = cycles_limit
    return body


def simulate(client: RpcClient, ins: CallActor | DeployActor, sender: bytes | None,
             cycles_limit: int | None = None) -> api.Simulation:
    """``POST /simulate``; the node's JSON answer."""
    out = client.simulate(simulation_body(ins, sender, cycles_limit))
    if not isinstance(out, dict) or "cycles_used" not in out or "status" not in out:
        raise ApiError("invalid_response", "/simulate did not return a simulation result", 200)
    return out


def report_simulation(sim: Mapping[str, Any], extra: dict[str, Any] | None = None) -> int:
    """Print ``{**extra, "simulation": sim}``; exit 0 if it succeeded, else 3 with the error on stderr."""
    print_json({**(extra or {}), "simulation": sim})
    if sim.get("status") == "success":
        return 0
    print_error(f"{sim.get('error_code')}: simulation failed: {sim.get('error_message') or sim.get('error_code')}")
    return EXIT_TX_FAILED


def dry_run_sender(args: argparse.Namespace) -> bytes | None:
    """The sender of a ``--simulate`` run: the ``--key``'s address, else ``--from``, else the node's default."""
    if getattr(args, "key", None) is not None:
        return load_key(args)[1]
    sender: bytes | None = getattr(args, "sender", None)
    return sender


def apply_gas_auto(args: argparse.Namespace, client: RpcClient, ins: CallActor | DeployActor,
                   sender: bytes) -> int | None:
    """``--gas auto``: dry-run ``ins`` as ``sender`` and set ``args.cycles_limit`` / ``args.cells_limit`` from it.

    Returns None to go on sending, or an exit code (3: the dry run failed; it is printed, nothing is sent).
    The dry run needs the node, so ``--gas auto`` cannot sign offline.
    """
    sim = simulate(client, ins, sender)
    if sim.get("status") != "success":
        return report_simulation(sim, {"gas": "auto"})
    args.cycles_limit, args.cells_limit = auto_limits(sim)
    return None


def check_gas_flags(args: argparse.Namespace, default_cycles: int) -> None:
    """``--gas auto`` computes both limits: giving one explicitly as well is a usage error (exit 2)."""
    if getattr(args, "gas", None) == "auto" and (args.cycles_limit != default_cycles or args.cells_limit is not None):
        raise UsageError("--gas auto sets --cycles-limit and --cells-limit; give either --gas auto or the limits")


# -- query events --------------------------------------------------------------------------------------
def _events_query(args: argparse.Namespace, cursor: str | None) -> dict[str, str | int | None]:
    query: dict[str, str | int | None] = {"actor": to_checksum_address(args.actor)}
    if args.topic is not None:
        query["topic"] = args.topic
    if args.from_height is not None:
        query["from"] = str(args.from_height)
    if args.to_height is not None:
        query["to"] = str(args.to_height)
    if args.limit is not None:
        query["limit"] = str(args.limit)
    if cursor is not None:
        query["cursor"] = cursor
    return query


@cli_command
def cmd_query_events(args: argparse.Namespace) -> int:
    """A page of an actor's events (``GET /events``), or with ``--all`` every page."""
    if args.from_height is not None and args.to_height is not None and args.to_height < args.from_height:
        raise UsageError("--to must not be below --from")
    if args.all and args.cursor is not None:
        raise UsageError("--all starts at the beginning; it cannot be combined with --cursor")
    client = rpc_client(args)
    page: Any = client.events(_events_query(args, args.cursor))
    if not args.all or not isinstance(page, dict):
        print_json(page)
        return 0
    events = list(page.get("events") or [])
    pages = 1
    while page.get("next") is not None and pages < MAX_PAGES:
        page = client.events(_events_query(args, page["next"]))
        events.extend(page.get("events") or [])
        pages += 1
    print_json({**page, "events": events, "pages": pages})
    return 0


def _topic(text: str) -> str:
    try:
        n = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        n = 0
    if not 0 < n <= 256:
        raise argparse.ArgumentTypeError(f"topic must be 1..256 UTF-8 bytes, got {text!r}")
    return text


def _page_limit(text: str) -> int:
    value = uint_arg(1000, "the page maximum")(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _cursor(text: str) -> str:
    h, sep, s = text.partition(":")
    if not sep or not h.isdigit() or not s.isdigit():
        raise argparse.ArgumentTypeError(f"expected <height>:<seq> as printed in next, got {text!r}")
    return text


def register_query(q_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``query events``."""
    u64 = uint_arg(2**64 - 1, "u64")
    qe = q_sub.add_parser("events", help="an actor's events, paginated (GET /events)")
    qe.add_argument("--actor", required=True, type=address_arg, metavar="ADDRESS", help="the emitting actor")
    qe.add_argument("--topic", type=_topic, default=None, metavar="TOPIC", help="only this topic")
    qe.add_argument("--from", dest="from_height", type=u64, default=None, metavar="H", help="first height (default 0)")
    qe.add_argument("--to", dest="to_height", type=u64, default=None, metavar="H", help="last height (default head)")
    qe.add_argument("--limit", type=_page_limit, default=None, metavar="N",
                    help="events per page (1..1000, default 100)")
    qe.add_argument("--cursor", type=_cursor, default=None, metavar="H:S", help="continue after a page's next")
    qe.add_argument("--all", action="store_true", help=f"follow next cursors (at most {MAX_PAGES} pages)")
    add_rpc_flag(qe)
    qe.set_defaults(func=cmd_query_events)
